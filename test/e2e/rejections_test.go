//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// blockedWithin is how soon after the controller's first refused create readyspan's blocked
// trace reaches the OTLP witness, and the RolloutBlocked alert fires: the minute.
const blockedWithin = time.Minute

// TestRolloutBlocked: three Deployments whose Pod creates the real apiserver refuses, each for
// its own reason, with the real admission plugins and the local cluster's webhook server: a
// ResourceQuota of one Pod (two replicas), the webhook denying Pods labelled readyspan.dev/deny,
// a namespace enforcing the restricted Pod Security level. Each: readyspan's rollout trace says
// blocked, with the class, within a minute of the first FailedCreate Event (by its name's
// nanoseconds), as the OTLP witness received it; the RolloutBlocked alert of alerts.yaml fires
// in Prometheus with that class. The quota is then raised: the controller makes the Pod, and
// the rollout completes, under a second trace that keeps the blocked time and links to the first.
func TestRolloutBlocked(t *testing.T) {
	e := Setup(t)
	e.loadedRule(t, "alerts.yaml", "RolloutBlocked")

	t.Run("quota", func(t *testing.T) {
		ns := e.Namespace(t, "e2e-blocked-quota")
		quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "pods"},
			Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}}}
		if _, err := e.Kube.CoreV1().ResourceQuotas(ns).Create(Ctx(t), quota, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The quota controller fills in what is used before the admission plugin counts it.
		Eventually(t, 30*time.Second, "the quota's status", func() (bool, error) {
			q, err := e.Kube.CoreV1().ResourceQuotas(ns).Get(Ctx(t), "pods", metav1.GetOptions{})
			return err == nil && q.Status.Hard != nil, err
		})
		d := e.checkBlocked(t, ns, webDeployment("web", 2), "quota", "exceeded quota: pods")

		// Raised: the replicaset controller retries, makes the Pod, the rollout completes.
		raised := time.Now()
		patch := []byte(`{"spec":{"hard":{"pods":"5"}}}`)
		if _, err := e.Kube.CoreV1().ResourceQuotas(ns).Patch(Ctx(t), "pods", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		// The replicaset controller retries a refused create with a per-ReplicaSet back-off that
		// doubles from 5 ms: after the dozen refusals of the first seconds its next try is
		// minutes away (up to 1,000 s). Any change of the ReplicaSet requeues it at once, as an
		// operator's `kubectl annotate` does once the quota is raised.
		Eventually(t, 30*time.Second, "the raised quota in the quota's status", func() (bool, error) {
			q, err := e.Kube.CoreV1().ResourceQuotas(ns).Get(Ctx(t), "pods", metav1.GetOptions{})
			return err == nil && q.Status.Hard.Pods().Value() == 5, err
		})
		rsList, err := e.Kube.AppsV1().ReplicaSets(ns).List(Ctx(t), metav1.ListOptions{})
		if err != nil || len(rsList.Items) != 1 {
			t.Fatalf("the Deployment's ReplicaSet: %d, %v", len(rsList.Items), err)
		}
		touch := []byte(`{"metadata":{"annotations":{"e2e.readyspan.dev/quota-raised":"` + raised.UTC().Format(time.RFC3339Nano) + `"}}}`)
		if _, err := e.Kube.AppsV1().ReplicaSets(ns).Patch(Ctx(t), rsList.Items[0].Name, types.MergePatchType, touch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		e.WaitPodsReady(t, ns, "app=web", 2, 5*time.Minute)
		tr := e.blockedRolloutTrace(t, ns, "web", d.Generation, "complete", 3*time.Minute)
		root := tr.Find("workload.rollout")
		if len(links(root)) == 0 {
			t.Error("the completed rollout does not link to the blocked one")
		}
		blocked := tr.FindAll("rollout.blocked")
		if len(blocked) != 1 || blocked[0].IsError() {
			t.Fatalf("%d rollout.blocked spans in the completed trace, want one, cleared", len(blocked))
		}
		// It ends when the controller made the Pod the quota had refused: that Pod's
		// SuccessfulCreate, stamped after the create returned (readyspan sees the Pod on its
		// watch about then).
		var made time.Time
		for _, ev := range e.objectEvents(t, ns, "ReplicaSet", "SuccessfulCreate") {
			if at := nameTime(t, ev.Name); at.After(raised) && (made.IsZero() || at.Before(made)) {
				made = at
			}
		}
		if made.IsZero() {
			t.Fatal("no SuccessfulCreate after the quota was raised")
		}
		if d := blocked[0].EndTime().Sub(made); d < -100*time.Millisecond || d > time.Second {
			t.Errorf("blocked span ends %s from the SuccessfulCreate of the Pod let through, want within [-0.1 s, 1 s]", d)
		}
		e.waitAlertResolved(t, "quota")
	})

	t.Run("admission_webhook", func(t *testing.T) {
		ns := e.Namespace(t, "e2e-blocked-webhook")
		d := webDeployment("web", 1)
		d.Spec.Template.Labels["readyspan.dev/deny"] = "e2e"
		e.checkBlocked(t, ns, d, "admission_webhook", `admission webhook "deny.readyspan.dev" denied the request`)
	})

	t.Run("pod_security", func(t *testing.T) {
		ns := e.Namespace(t, "e2e-blocked-podsecurity")
		nsObj, err := e.Kube.CoreV1().Namespaces().Get(Ctx(t), ns, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if nsObj.Labels == nil {
			nsObj.Labels = map[string]string{}
		}
		nsObj.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
		if _, err := e.Kube.CoreV1().Namespaces().Update(Ctx(t), nsObj, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		e.checkBlocked(t, ns, webDeployment("web", 1), "pod_security", `violates PodSecurity "restricted:latest"`)
	})
}

// checkBlocked creates the Deployment and checks readyspan's blocked trace of it and the alert.
func (e *Env) checkBlocked(t *testing.T, ns string, d *appsv1.Deployment, class, phrase string) *appsv1.Deployment {
	t.Helper()
	ctx := Ctx(t)
	created, err := e.Kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var first time.Time
	Eventually(t, time.Minute, "the replicaset controller's first FailedCreate", func() (bool, error) {
		evs := e.objectEvents(t, ns, "ReplicaSet", "FailedCreate")
		for _, ev := range evs {
			if !strings.Contains(ev.Message, phrase) {
				return false, fmt.Errorf("FailedCreate %q does not say %q", ev.Message, phrase)
			}
			if at := nameTime(t, ev.Name); first.IsZero() || at.Before(first) {
				first = at
			}
		}
		return len(evs) > 0, nil
	})
	t.Logf("first FailedCreate at %s", first.Format(time.RFC3339Nano))

	tr := e.blockedRolloutTrace(t, ns, d.Name, created.Generation, "blocked", blockedWithin+30*time.Second)
	root := tr.Find("workload.rollout")
	received, ok := e.capturedRootTimes(t, "workload.rollout")[tr.TraceID]
	if !ok {
		t.Fatalf("the OTLP witness has not received the blocked trace %s", tr.TraceID)
	}
	if n := e.capturedRoots(t, "workload.rollout")[tr.TraceID]; n != 1 {
		t.Errorf("readyspan sent the blocked trace's root %d times (OTLP witness), want 1", n)
	}
	if after := received.Sub(first); after > blockedWithin || after < 0 {
		t.Errorf("the blocked trace reached the witness %s after the first FailedCreate, want within %s", after, blockedWithin)
	} else {
		t.Logf("blocked trace received %s after the first FailedCreate", after.Round(time.Millisecond))
	}
	if c := root.StrTag("readyspan.rollout.rejection.class"); c != class {
		t.Errorf("class %q, want %q", c, class)
	}
	if r := root.StrTag("readyspan.rollout.reason"); !strings.HasPrefix(r, class+": ") || !strings.Contains(r, phrase) {
		t.Errorf("reason %q, want %s: … %s …", r, class, phrase)
	}
	if s := root.StrTag("readyspan.rollout.summary"); !strings.Contains(s, "blocked ("+class+": ") {
		t.Errorf("summary %q does not say blocked by %s", s, class)
	}
	if !root.IsError() {
		t.Error("a blocked rollout's root is not an error span")
	}
	blocked := tr.FindAll("rollout.blocked")
	if len(blocked) != 1 || blocked[0].StrTag("readyspan.rollout.rejection.class") != class || !blocked[0].IsError() {
		t.Fatalf("%d rollout.blocked spans, want one of class %s, still holding", len(blocked), class)
	}
	if d := blocked[0].StartTime().Sub(first); d < -time.Millisecond || d > time.Millisecond {
		t.Errorf("rollout.blocked starts %s from the first FailedCreate's own stamp", d)
	}
	if p := tr.Parent(blocked[0]); p == nil || p.OperationName != "rollout.step" {
		t.Errorf("rollout.blocked is not under the ReplicaSet's step")
	}
	e.waitAlertFiring(t, class, first)
	return created
}

// blockedRolloutTrace waits for readyspan's rollout trace of a Deployment's generation with the
// outcome (a blocked rollout that goes on has a second trace, complete).
func (e *Env) blockedRolloutTrace(t *testing.T, ns, name string, generation int64, outcome string, timeout time.Duration) *Trace {
	t.Helper()
	var found *Trace
	Eventually(t, timeout, fmt.Sprintf("readyspan's %s trace of deployment %s/%s generation %d", outcome, ns, name, generation), func() (bool, error) {
		traces, err := e.Jaeger.FindTraces(context.Background(), "readyspan", map[string]string{
			"k8s.deployment.name": name, "k8s.namespace.name": ns, "readyspan.rollout.outcome": outcome}, 20)
		if err != nil {
			return false, err
		}
		for _, tr := range traces {
			if root := tr.Find("workload.rollout"); root != nil {
				if g, _ := root.Tag("readyspan.rollout.generation"); fmt.Sprint(g) == fmt.Sprint(generation) {
					found = tr
					return true, nil
				}
			}
		}
		return false, fmt.Errorf("%d %s traces, none of generation %d", len(traces), outcome, generation)
	})
	return found
}

// objectEvents are the Events with the reason about objects of the kind in the namespace, in
// the order of their names' stamps.
func (e *Env) objectEvents(t *testing.T, ns, kind, reason string) []corev1.Event {
	t.Helper()
	list, err := e.Kube.CoreV1().Events(ns).List(Ctx(t), metav1.ListOptions{
		FieldSelector: "involvedObject.kind=" + kind + ",reason=" + reason})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items
}

// waitAlertFiring waits for RolloutBlocked of alerts.yaml to fire for the class, and checks it
// fired within a minute of the first refusal (its pending start plus its 20 s).
func (e *Env) waitAlertFiring(t *testing.T, class string, first time.Time) {
	t.Helper()
	Eventually(t, blockedWithin+30*time.Second, "RolloutBlocked to fire for "+class, func() (bool, error) {
		alerts, err := e.Prom.Alerts(Ctx(t))
		for _, a := range alerts {
			if a.Labels["alertname"] == "RolloutBlocked" && a.Labels["class"] == class && a.Labels["workload"] == "Deployment" && a.State == "firing" {
				firing := a.ActiveAt.Add(20 * time.Second)
				t.Logf("RolloutBlocked firing for %s: pending from %s, %s after the first FailedCreate; %s",
					class, a.ActiveAt.Format(time.RFC3339), firing.Sub(first).Round(time.Second), a.Annotations["summary"])
				if firing.Sub(first) > blockedWithin {
					t.Errorf("RolloutBlocked fired %s after the first FailedCreate, want within %s", firing.Sub(first), blockedWithin)
				}
				return true, nil
			}
		}
		return false, err
	})
}

// waitAlertResolved waits for RolloutBlocked to stop for the class once the rollout went on.
func (e *Env) waitAlertResolved(t *testing.T, class string) {
	t.Helper()
	Eventually(t, time.Minute, "RolloutBlocked to resolve for "+class, func() (bool, error) {
		alerts, err := e.Prom.Alerts(Ctx(t))
		for _, a := range alerts {
			if a.Labels["alertname"] == "RolloutBlocked" && a.Labels["class"] == class {
				return false, err
			}
		}
		return err == nil, err
	})
}

// TestAdmissionWebhook: the local cluster's webhook server, called by the real apiserver over
// TLS, injects its sidecar into a Pod labelled readyspan.dev/inject=sidecar after its delay
// (50 ms by default), and logs the request with the Pod's namespace and name and its own
// handling time; the Pod starts with both containers.
func TestAdmissionWebhook(t *testing.T) {
	e := Setup(t)
	ns := e.Namespace(t, "e2e-webhook")
	p := sleeper("injected", BusyboxImage)
	p.Labels["readyspan.dev/inject"] = "sidecar"
	created := e.createPod(t, ns, p)
	var names []string
	for _, c := range created.Spec.Containers {
		names = append(names, c.Name)
	}
	if len(names) != 2 || names[1] != "readyspan-sidecar" {
		t.Fatalf("containers %v, want the Pod's own and readyspan-sidecar", names)
	}
	e.WaitPodsReady(t, ns, "app=injected", 1, 2*time.Minute)

	var rec struct {
		Hook, Namespace, Name string
		Patched, Allowed      bool
		HandlingMs            float64
	}
	Eventually(t, 10*time.Second, "the webhook's log line for the Pod", func() (bool, error) {
		data, err := os.ReadFile(filepath.Join(e.State, "logs", "webhook.log"))
		if err != nil {
			return false, err
		}
		for _, line := range strings.Split(string(data), "\n") {
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Namespace == ns && rec.Name == "injected" {
				return true, nil
			}
		}
		return false, fmt.Errorf("no line for %s/injected", ns)
	})
	if rec.Hook != "mutate" || !rec.Patched || !rec.Allowed || rec.HandlingMs < 50 || rec.HandlingMs > 1000 {
		t.Errorf("webhook log %+v: want mutate, patched, allowed, handled in 50 ms (its delay) and more", rec)
	}
	t.Logf("the webhook handled the Pod's admission in %.3f ms", rec.HandlingMs)
}
