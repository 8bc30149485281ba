//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestFailedStartupAlerts: PodImagePullFailing, PodCrashLooping and PodContainerConfigError,
// loaded by Prometheus from deploy/prometheus/alerts.yaml and evaluated over readyspan's real
// metrics, fire for a Pod whose image does not exist, one whose container keeps exiting and one
// whose env names a ConfigMap that does not exist (make e2e runs readyspan with --fail-after 20s).
//
// The rules look back 15 minutes, so on a cluster that failed Pods recently they may be firing
// already. The test therefore also loads copies that look back 2 minutes (the same expression
// otherwise, label e2e=true), waits until those are quiet (at once on a fresh cluster, at most 2
// minutes otherwise), makes the failures happen, and requires each copy to fire with the reason
// of its Pod, and each original to be firing. It adds about 40 s to the suite: --fail-after, a
// scrape and an evaluation (5 s each).
func TestFailedStartupAlerts(t *testing.T) {
	e := Setup(t)
	ctx := Ctx(t)
	cases := []struct {
		alert, reasons string // reasons: the reason label values the Pod may fail with
		pod            func() *corev1.Pod
	}{
		{"PodImagePullFailing", "ErrImagePull ImagePullBackOff", func() *corev1.Pod {
			p := sleeper("missing-image", MissingImage)
			p.Spec.Containers[0].Command = nil
			return p
		}},
		{"PodCrashLooping", "CrashLoopBackOff", func() *corev1.Pod {
			// It exits at once; its readiness probe never passes, so it is never Ready in the
			// moment it runs.
			p := sleeper("crash-loop", BusyboxImage)
			p.Spec.Containers[0].Command = []string{"sh", "-c", "exit 1"}
			p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
				ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"false"}}}, PeriodSeconds: 1}
			return p
		}},
		{"PodContainerConfigError", "CreateContainerConfigError", func() *corev1.Pod {
			p := sleeper("missing-configmap", BusyboxImage)
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "SETTING", ValueFrom: &corev1.EnvVarSource{
				ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "does-not-exist"}, Key: "setting"}}}}
			return p
		}},
	}
	var copies []RuleFile
	groups := map[string]string{}
	for _, c := range cases {
		original := e.loadedRule(t, "alerts.yaml", c.alert)
		groups[c.alert] = original.group
		if !strings.Contains(original.Query, "[15m]") {
			t.Fatalf("%s no longer looks back 15m: %s", c.alert, original.Query)
		}
		copies = append(copies, RuleFile{Alert: c.alert, Expr: strings.ReplaceAll(original.Query, "[15m]", "[2m]"),
			Labels: map[string]string{"severity": "warning", "e2e": "true"}})
	}
	e.LoadRules(t, "e2e-failed-startups", []RuleGroupFile{{Name: "readyspan.e2e.failed", Rules: copies}})
	firing := func(alert string) ([]Alert, error) {
		alerts, err := e.Prom.Alerts(ctx)
		var out []Alert
		for _, a := range alerts {
			if a.Labels["alertname"] == alert && a.State == "firing" {
				out = append(out, a)
			}
		}
		return out, err
	}
	Eventually(t, 3*time.Minute, "earlier failed startups to leave the copies' 2m window", func() (bool, error) {
		var loud []string
		for _, c := range cases {
			r, err := e.findRule(ctx, "readyspan.e2e.failed", c.alert)
			if err != nil {
				return false, err
			}
			if r.State != "inactive" {
				loud = append(loud, c.alert+" "+r.State)
			}
		}
		return len(loud) == 0, fmt.Errorf("not quiet: %v", loud)
	})

	ns := e.Namespace(t, "e2e-failed-alerts")
	start := time.Now()
	var uids []string
	for _, c := range cases {
		uids = append(uids, string(e.createPod(t, ns, c.pod()).UID))
	}
	traces := e.WaitTraces(t, uids, 3*time.Minute, func(tr *Trace) bool { return tr.Root() != nil })
	for i, c := range cases {
		t.Run(c.alert, func(t *testing.T) {
			root := traces[uids[i]].Root()
			reason := root.StrTag("readyspan.failure.reason")
			if root.StrTag("readyspan.outcome") != "failed" || !strings.Contains(" "+c.reasons+" ", " "+reason+" ") {
				t.Fatalf("the trace is %q with reason %q, want failed with one of %s", root.StrTag("readyspan.outcome"), reason, c.reasons)
			}
			Eventually(t, time.Minute, c.alert+" to fire", func() (bool, error) {
				alerts, err := firing(c.alert)
				var copyFires, originalFires bool
				for _, a := range alerts {
					if a.Labels["reason"] != reason {
						continue
					}
					copyFires = copyFires || a.Labels["e2e"] == "true"
					originalFires = originalFires || a.Labels["e2e"] == ""
				}
				if copyFires && originalFires {
					t.Logf("%s firing for reason %s, %s after the Pod was created", c.alert, reason, time.Since(start).Round(time.Second))
				}
				return copyFires && originalFires, fmt.Errorf("firing: %+v (%v)", alerts, err)
			})
			if r, err := e.findRule(ctx, groups[c.alert], c.alert); err != nil || r.State != "firing" {
				t.Errorf("the rule from alerts.yaml: %+v %v", r, err)
			}
		})
	}
}
