//go:build e2e

// Scenarios of issue 3 against the local cluster: Pods are started for real (deploy/local) and
// readyspan's output is judged through Jaeger's and Prometheus' HTTP APIs. This file sorts before
// incluster_test.go on purpose: these tests run first, before the in-cluster install exists.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apimachinery/pkg/watch"
)

// boundaryTolerance is how far a span boundary may be from the independent evidence in the API.
const boundaryTolerance = 50 * time.Millisecond

// ---- objects --------------------------------------------------------------------------------

func int32p(i int32) *int32 { return &i }

// webDeployment is the demo's web server: an init container writes the page, busybox httpd
// serves it, and a readiness probe gates its endpoint.
func webDeployment(name string, replicas int32) *appsv1.Deployment {
	labels := LocalPodLabels(map[string]string{"app": name})
	www := corev1.VolumeMount{Name: "www", MountPath: "/www"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: int32p(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxSurge: ptrIntOrString(intstr.FromInt32(1)), MaxUnavailable: ptrIntOrString(intstr.FromInt32(0))}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken:  boolp(false),
					TerminationGracePeriodSeconds: int64p(1),
					InitContainers: []corev1.Container{{
						Name: "write-page", Image: BusyboxImage, ImagePullPolicy: corev1.PullIfNotPresent,
						Command:      []string{"sh", "-c", `echo "hello from $(hostname)" > /www/index.html`},
						VolumeMounts: []corev1.VolumeMount{www},
					}},
					Containers: []corev1.Container{{
						Name: "httpd", Image: BusyboxImage, ImagePullPolicy: corev1.PullIfNotPresent,
						Command: []string{"httpd", "-f", "-p", "8080", "-h", "/www"},
						Ports:   []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromString("http")}},
							InitialDelaySeconds: 1, PeriodSeconds: 1,
						},
						VolumeMounts: []corev1.VolumeMount{www},
					}},
					Volumes: []corev1.Volume{{Name: "www", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
				},
			},
		},
	}
}

// sleeper is a one-container Pod that runs until deleted.
func sleeper(name, image string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: LocalPodLabels(map[string]string{"app": name})},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken:  boolp(false),
			TerminationGracePeriodSeconds: int64p(1),
			Containers: []corev1.Container{{
				Name: "app", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{"sh", "-c", "exec sleep 3600"},
			}},
		},
	}
}

// service selects app=name. Pods in a Service are exported as soon as they are in its
// EndpointSlice (without one, 30 s after Ready), which keeps the tests short.
func service(name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
}

func boolp(b bool) *bool                                      { return &b }
func int64p(i int64) *int64                                   { return &i }
func ptrIntOrString(v intstr.IntOrString) *intstr.IntOrString { return &v }

func (e *Env) createPod(t *testing.T, ns string, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	created, err := e.Kube.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Pod %s: %v", p.Name, err)
	}
	return created
}

func (e *Env) createService(t *testing.T, ns string, s *corev1.Service) {
	t.Helper()
	if _, err := e.Kube.CoreV1().Services(ns).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Service %s: %v", s.Name, err)
	}
}

func (e *Env) createDeployment(t *testing.T, ns string, d *appsv1.Deployment) {
	t.Helper()
	if _, err := e.Kube.AppsV1().Deployments(ns).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Deployment %s: %v", d.Name, err)
	}
}

// labelNode sets (value != "") or removes a label of the node.
func (e *Env) labelNode(t *testing.T, key, value string) {
	t.Helper()
	v := any(nil)
	if value != "" {
		v = value
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{key: v}}})
	if _, err := e.Kube.CoreV1().Nodes().Patch(context.Background(), NodeName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("label node %s=%q: %v", key, value, err)
	}
}

func uidsOf(pods map[types.UID]*corev1.Pod) []string {
	out := make([]string, 0, len(pods))
	for uid := range pods {
		out = append(out, string(uid))
	}
	return out
}

// ---- trace checks ---------------------------------------------------------------------------

// complete reports whether a trace has its root and all six phases.
func complete(tr *Trace) bool {
	if tr.Root() == nil {
		return false
	}
	for _, p := range Phases {
		if tr.Find(p) == nil {
			return false
		}
	}
	return true
}

// checkStartupTrace checks what every trace must satisfy: one root pod.startup by readyspan with
// the Pod's identity, the phases present at most once each, children of the root, in causal order,
// under their components' service names, every span inside its parent and tagged with the
// sources of its boundaries. With all, all six phases must be there.
func checkStartupTrace(t *testing.T, tr *Trace, pod *corev1.Pod, outcome string, all bool) {
	t.Helper()
	checkStartupTraceOn(t, tr, pod, NodeName, outcome, all)
}

// checkStartupTraceOn is checkStartupTrace for a Pod on the named node (a fake node of KWOK's).
func checkStartupTraceOn(t *testing.T, tr *Trace, pod *corev1.Pod, node, outcome string, all bool) {
	t.Helper()
	if tr.TraceID != TraceID(string(pod.UID)) {
		t.Errorf("trace ID %s, want the Pod UID %s without dashes", tr.TraceID, pod.UID)
	}
	roots := tr.FindAll("pod.startup")
	if len(roots) != 1 {
		t.Fatalf("Pod %s: %d pod.startup spans, want 1 (%s)", pod.Name, len(roots), tr.Summary())
	}
	root := roots[0]
	if p := tr.Parent(root); p != nil {
		t.Errorf("pod.startup has a parent %s", p)
	}
	if s := tr.Service(root); s != "readyspan" {
		t.Errorf("pod.startup service %q, want readyspan", s)
	}
	for k, want := range map[string]string{
		"k8s.pod.name": pod.Name, "k8s.pod.uid": string(pod.UID), "k8s.namespace.name": pod.Namespace,
		"k8s.node.name": node, "readyspan.outcome": outcome,
	} {
		if got := root.StrTag(k); got != want {
			t.Errorf("Pod %s: pod.startup tag %s=%q, want %q", pod.Name, k, got, want)
		}
	}
	var prev *Span
	for _, name := range Phases {
		spans := tr.FindAll(name)
		if len(spans) == 0 {
			if all {
				t.Errorf("Pod %s: no %s span (%s)", pod.Name, name, tr.Summary())
			}
			continue
		}
		if len(spans) > 1 {
			t.Errorf("Pod %s: %d %s spans, want 1", pod.Name, len(spans), name)
		}
		s := spans[0]
		if p := tr.Parent(s); p == nil || p.SpanID != root.SpanID {
			t.Errorf("Pod %s: %s is not a child of pod.startup", pod.Name, name)
		}
		if got, want := tr.Service(s), PhaseServices[name]; got != want {
			t.Errorf("Pod %s: %s reported by service %q, want %q", pod.Name, name, got, want)
		}
		if prev != nil && s.StartTimeUS < prev.StartTimeUS {
			t.Errorf("Pod %s: %s starts %s before %s", pod.Name, name, prev.StartTime().Sub(s.StartTime()), prev.OperationName)
		}
		prev = s
	}
	for _, s := range tr.Spans {
		if s.DurationUS < 0 {
			t.Errorf("Pod %s: span %s has a negative duration %s", pod.Name, s.OperationName, s.Duration())
		}
		for _, k := range []string{"readyspan.time.source.start", "readyspan.time.source.end"} {
			if !s.HasTag(k) {
				t.Errorf("Pod %s: span %s lacks tag %s", pod.Name, s.OperationName, k)
			}
		}
		if p := tr.Parent(s); p != nil && !p.Contains(s) {
			t.Errorf("Pod %s: span %s [%s, %s] is not inside its parent %s [%s, %s]", pod.Name,
				s.OperationName, s.StartTime().Format(time.StampMicro), s.EndTime().Format(time.StampMicro),
				p.OperationName, p.StartTime().Format(time.StampMicro), p.EndTime().Format(time.StampMicro))
		}
	}
}

// descendant returns the spans named name below the phase span phase.
func descendants(tr *Trace, phase, name string) []*Span {
	p := tr.Find(phase)
	if p == nil {
		return nil
	}
	var out []*Span
	for _, s := range tr.Descendants(p) {
		if s.OperationName == name {
			out = append(out, s)
		}
	}
	return out
}

func near(a, b time.Time) bool {
	d := a.Sub(b)
	return d <= boundaryTolerance && d >= -boundaryTolerance
}

// checkScheduledAt checks that the scheduling span ends at the Scheduled event's eventTime (µs,
// the scheduler's clock right after the bind).
func (e *Env) checkScheduledAt(t *testing.T, tr *Trace, pod *corev1.Pod) {
	t.Helper()
	sched := tr.Find("scheduling")
	if sched == nil {
		t.Errorf("Pod %s: no scheduling span", pod.Name)
		return
	}
	for _, ev := range e.PodEvents(t, pod.Namespace, pod.Name) {
		if ev.Reason != "Scheduled" || ev.Regarding.UID != pod.UID {
			continue
		}
		if ev.EventTime.IsZero() {
			t.Errorf("Pod %s: Scheduled event without eventTime", pod.Name)
			return
		}
		if !near(sched.EndTime(), ev.EventTime.Time) {
			t.Errorf("Pod %s: scheduling ends at %s, the Scheduled event is at %s (%s apart, tolerance %s)", pod.Name,
				sched.EndTime().Format(time.StampMicro), ev.EventTime.Format(time.StampMicro),
				sched.EndTime().Sub(ev.EventTime.Time), boundaryTolerance)
		}
		return
	}
	t.Errorf("Pod %s: no Scheduled event", pod.Name)
}

// ---- scenarios ------------------------------------------------------------------------------

// TestAlertRulesPromtool checks readyspan's alert rules with promtool: they load, and their unit
// tests (cases that fire and cases that stay quiet) pass.
func TestAlertRulesPromtool(t *testing.T) {
	root := repoRoot(t)
	promtool := filepath.Join(root, "bin", "promtool")
	if _, err := os.Stat(promtool); err != nil {
		Missing(t, "bin/promtool (make cluster-build): %v", err)
	}
	for _, args := range [][]string{
		{"check", "rules", "deploy/prometheus/alerts.yaml"},
		{"test", "rules", "deploy/prometheus/alerts_test.yaml"},
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
			continue
		}
		t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
	}
}

// TestWebDeployment: every Pod of a 3-replica Deployment (init container, readiness probe,
// Service) gets exactly one complete trace whose ID is its UID, with the controllers, kubelet and
// status detail, warm image pulls, and a scheduling span that ends at the Scheduled event.
func TestWebDeployment(t *testing.T) {
	e := Setup(t)
	ns := e.Namespace(t, "e2e-web")
	e.createService(t, ns, service("web"))
	e.createDeployment(t, ns, webDeployment("web", 3))
	pods := e.WaitPodsReady(t, ns, "app=web", 3, 2*time.Minute)
	uids := []string{}
	for _, p := range pods {
		uids = append(uids, string(p.UID))
	}
	e.WaitTraces(t, uids, 2*time.Minute, complete)

	for i := range pods {
		pod := &pods[i]
		t.Run(pod.Name, func(t *testing.T) {
			tr := e.WaitTrace(t, string(pod.UID), 2*time.Minute, complete)
			checkStartupTrace(t, tr, pod, "ready", true)
			root := tr.Root()
			if got := root.StrTag("k8s.deployment.name"); got != "web" {
				t.Errorf("k8s.deployment.name=%q, want web", got)
			}
			var rs string
			for _, o := range pod.OwnerReferences {
				if o.Kind == "ReplicaSet" {
					rs = o.Name
				}
			}
			if got := root.StrTag("k8s.replicaset.name"); got != rs {
				t.Errorf("k8s.replicaset.name=%q, want %q", got, rs)
			}
			for phase, names := range map[string][]string{
				"controllers": {"controllers.deployment", "controllers.replicaset"},
				"kubelet":     {"kubelet.sandbox", "container.init", "container.image_pull", "container.create", "container.start", "container.readiness"},
				"status":      {"status.running", "status.ready", "status.endpoints"},
			} {
				for _, name := range names {
					if len(descendants(tr, phase, name)) == 0 {
						t.Errorf("no %s under %s (%s)", name, phase, tr.Summary())
					}
				}
			}
			pulls := descendants(tr, "kubelet", "container.image_pull")
			for _, s := range pulls {
				if got := s.StrTag("readyspan.image.cache"); got != "warm" {
					t.Errorf("image pull of %s tagged readyspan.image.cache=%q, want warm (already present)", s.StrTag("k8s.container.name"), got)
				}
				if got := s.StrTag("container.image.name"); got != BusyboxImage {
					t.Errorf("image pull tagged container.image.name=%q, want %s", got, BusyboxImage)
				}
			}
			e.checkScheduledAt(t, tr, pod)

			// Exactly one Pod trace: searching by the Pod UID finds this trace ID and no other
			// pod.startup (and at most one rollout, the one that created it, names the Pod too).
			found, err := e.Jaeger.FindTraces(context.Background(), "readyspan", map[string]string{"k8s.pod.uid": string(pod.UID)}, 20)
			if err != nil {
				t.Fatal(err)
			}
			var podTraces, rollouts []string
			for _, f := range found {
				switch {
				case f.Root() != nil:
					podTraces = append(podTraces, f.TraceID)
				case f.Find("workload.rollout") != nil:
					rollouts = append(rollouts, f.TraceID)
				}
			}
			if len(podTraces) != 1 || podTraces[0] != TraceID(string(pod.UID)) {
				t.Errorf("Jaeger has Pod traces %v for Pod %s, want exactly [%s]", podTraces, pod.UID, TraceID(string(pod.UID)))
			}
			if len(rollouts) > 1 {
				t.Errorf("the Pod %s is in %d rollout traces %v, want at most the one that created it", pod.Name, len(rollouts), rollouts)
			}
			e.CheckExportedOnce(t, map[string]string{string(pod.UID): pod.Name})
		})
	}
}

var pulledRE = regexp.MustCompile(`^Successfully pulled image "([^"]+)" in ([^ ]+) \(([^ ]+) including waiting\)`)

// TestColdPull: an image pulled through the registry's slow path is tagged cold, and the pull
// span and its transfer child match the two durations of the kubelet's Pulled event.
func TestColdPull(t *testing.T) {
	e := Setup(t)
	ns := e.Namespace(t, "e2e-cold")
	image := ColdRepo + ":" + ns
	e.createService(t, ns, service("cold"))
	pod := e.createPod(t, ns, sleeper("cold", image))
	e.WaitPodsReady(t, ns, "app=cold", 1, 2*time.Minute)
	tr := e.WaitTrace(t, string(pod.UID), 2*time.Minute, complete)
	checkStartupTrace(t, tr, pod, "ready", true)

	pulls := descendants(tr, "kubelet", "container.image_pull")
	if len(pulls) != 1 {
		t.Fatalf("%d container.image_pull spans, want 1 (%s)", len(pulls), tr.Summary())
	}
	pull := pulls[0]
	for k, want := range map[string]string{"readyspan.image.cache": "cold", "container.image.name": image, "k8s.container.name": "app"} {
		if got := pull.StrTag(k); got != want {
			t.Errorf("container.image_pull tag %s=%q, want %q", k, got, want)
		}
	}
	transfer := tr.Children(pull)
	if len(transfer) != 1 || transfer[0].OperationName != "container.image_pull.transfer" {
		t.Fatalf("container.image_pull children %v, want one container.image_pull.transfer", transfer)
	}

	var msg string
	for _, ev := range e.PodEvents(t, ns, pod.Name) {
		if ev.Reason == "Pulled" {
			msg = ev.Note
		}
	}
	m := pulledRE.FindStringSubmatch(msg)
	if m == nil {
		t.Fatalf("no cold Pulled event (got %q)", msg)
	}
	transferDur, err1 := time.ParseDuration(m[2])
	totalDur, err2 := time.ParseDuration(m[3])
	if err1 != nil || err2 != nil {
		t.Fatalf("Pulled message %q: %v %v", msg, err1, err2)
	}
	t.Logf("Pulled: %s; pull span %s, transfer span %s", msg, pull.Duration(), transfer[0].Duration())
	if d := pull.Duration() - totalDur; d > boundaryTolerance || d < -boundaryTolerance {
		t.Errorf("container.image_pull lasts %s, the Pulled event says %s including waiting", pull.Duration(), totalDur)
	}
	if d := transfer[0].Duration() - transferDur; d > boundaryTolerance || d < -boundaryTolerance {
		t.Errorf("container.image_pull.transfer lasts %s, the Pulled event says %s", transfer[0].Duration(), transferDur)
	}
	if totalDur < 2*time.Second {
		t.Errorf("the cold pull took %s: the registry's 2s blob delay did not apply", totalDur)
	}
}

// TestUnschedulable: a Pod that waits for a node label has its FailedScheduling attempts as
// events of its scheduling span, which ends at the bind.
func TestUnschedulable(t *testing.T) {
	e := Setup(t)
	ns := e.Namespace(t, "e2e-unsched")
	key := E2ELabel + "-" + ns
	p := sleeper("pending", BusyboxImage)
	p.Spec.NodeSelector = map[string]string{key: "yes"}
	e.createService(t, ns, service("pending"))
	pod := e.createPod(t, ns, p)
	t.Cleanup(func() { e.labelNode(t, key, "") })

	Eventually(t, time.Minute, "a FailedScheduling event", func() (bool, error) {
		for _, ev := range e.PodEvents(t, ns, pod.Name) {
			if ev.Reason == "FailedScheduling" {
				return true, nil
			}
		}
		return false, nil
	})
	time.Sleep(3 * time.Second)
	e.labelNode(t, key, "yes")
	e.WaitPodsReady(t, ns, "app=pending", 1, 2*time.Minute)

	tr := e.WaitTrace(t, string(pod.UID), 2*time.Minute, complete)
	checkStartupTrace(t, tr, pod, "ready", true)
	sched := tr.Find("scheduling")
	attempts := sched.Log("FailedScheduling")
	if len(attempts) == 0 {
		t.Fatalf("the scheduling span has no FailedScheduling event (logs %+v)", sched.Logs)
	}
	for _, a := range attempts {
		msg, _ := a["message"].(string)
		if !strings.Contains(msg, "node") {
			t.Errorf("FailedScheduling event message %q does not look like the scheduler's", msg)
		}
		// The attempt's time is the scheduler's eventTime; the span's start may come from
		// readyspan's own receipt of the Pod, so allow the boundary tolerance on each side.
		ts := a["timestamp"].(time.Time)
		if ts.Before(sched.StartTime().Add(-boundaryTolerance)) || ts.After(sched.EndTime().Add(boundaryTolerance)) {
			t.Errorf("FailedScheduling at %s is outside the scheduling span [%s, %s] (tolerance %s)", ts.Format(time.StampMicro),
				sched.StartTime().Format(time.StampMicro), sched.EndTime().Format(time.StampMicro), boundaryTolerance)
		} else if ts.Before(sched.StartTime()) {
			t.Logf("note: FailedScheduling at %s is %s before the scheduling span starts", ts.Format(time.StampMicro), sched.StartTime().Sub(ts))
		}
	}
	t.Logf("%d FailedScheduling attempts; scheduling lasted %s", len(attempts), sched.Duration())
	if sched.Duration() < 3*time.Second {
		t.Errorf("scheduling lasted %s, but the Pod waited over 3s for the label", sched.Duration())
	}
	e.checkScheduledAt(t, tr, pod)
}

// TestFailures: Pods that cannot pull their image or keep crashing get a failed trace with
// status Error and the reason (make e2e runs readyspan with --fail-after 20s).
func TestFailures(t *testing.T) {
	e := Setup(t)
	ns := e.Namespace(t, "e2e-fail")
	missing := sleeper("missing-image", MissingImage)
	missing.Spec.Containers[0].Command = nil
	// It exits at once and its readiness probe never passes: never Ready, only CrashLoopBackOff.
	crash := sleeper("crash-loop", BusyboxImage)
	crash.Spec.Containers[0].Command = []string{"sh", "-c", "exit 1"}
	crash.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"false"}}}, PeriodSeconds: 1}
	cases := []struct {
		pod     *corev1.Pod
		reasons []string
	}{
		{e.createPod(t, ns, missing), []string{"ErrImagePull", "ImagePullBackOff"}},
		{e.createPod(t, ns, crash), []string{"CrashLoopBackOff"}},
	}
	traces := e.WaitTraces(t, []string{string(cases[0].pod.UID), string(cases[1].pod.UID)}, 4*time.Minute,
		func(tr *Trace) bool { return tr.Root() != nil })
	for _, c := range cases {
		t.Run(c.pod.Name, func(t *testing.T) {
			tr := traces[string(c.pod.UID)]
			checkStartupTrace(t, tr, c.pod, "failed", false)
			root := tr.Root()
			if !root.IsError() {
				t.Errorf("pod.startup is not an error (tags %+v)", root.Tags)
			}
			ok := false
			for _, r := range c.reasons {
				ok = ok || strings.Contains(root.StatusMessage(), r)
			}
			if !ok {
				t.Errorf("pod.startup status message %q names none of %v", root.StatusMessage(), c.reasons)
			}
			t.Logf("status: %q", root.StatusMessage())
		})
	}
}

// TestRestartMidRollout: readyspan restarted in the middle of a rolling update neither duplicates
// nor loses a trace: every Pod of the rollout has exactly one trace.
func TestRestartMidRollout(t *testing.T) {
	e := Setup(t)
	ns := e.Namespace(t, "e2e-restart")
	ctx := Ctx(t)
	const replicas = 4
	w, err := e.Kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	seen := make(chan *corev1.Pod, 100)
	go func() {
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type == watch.Added {
				seen <- p
			}
		}
	}()
	pods := map[types.UID]*corev1.Pod{}
	drain := func() {
		for {
			select {
			case p := <-seen:
				pods[p.UID] = p
			default:
				return
			}
		}
	}

	e.createService(t, ns, service("rollout"))
	e.createDeployment(t, ns, webDeployment("rollout", replicas))
	e.WaitPodsReady(t, ns, "app=rollout", replicas, 2*time.Minute)
	drain()
	first := len(pods)
	// The first ReplicaSet's Pods are exported before the rollout starts.
	e.WaitTraces(t, uidsOf(pods), 2*time.Minute, complete)

	// Roll out a new template and restart readyspan once the new ReplicaSet has created a Pod.
	patch := []byte(`{"spec":{"template":{"metadata":{"annotations":{"readyspan.dev/e2e-rollout":"2"}}}}}`)
	if _, err := e.Kube.AppsV1().Deployments(ns).Patch(ctx, "rollout", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	Eventually(t, time.Minute, "the rollout's first new Pod", func() (bool, error) {
		drain()
		return len(pods) > first, nil
	})
	restartAt := time.Now()
	e.RestartReadyspan(t)
	// For the record when a trace goes missing: where each Pod was when readyspan restarted.
	if list, err := e.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, p := range list.Items {
			t.Logf("after the restart at %s: Pod %s %s phase=%s ready=%v deleting=%v", restartAt.Format(time.StampMilli),
				p.Name, p.UID, p.Status.Phase, PodReady(&p), p.DeletionTimestamp != nil)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("readyspan's log: %s", filepath.Join(e.State, "logs", "readyspan.log"))
		}
	})
	Eventually(t, 3*time.Minute, "the rollout to finish", func() (bool, error) {
		d, err := e.Kube.AppsV1().Deployments(ns).Get(ctx, "rollout", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s := d.Status
		return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == replicas && s.AvailableReplicas == replicas && s.Replicas == replicas, nil
	})
	drain()
	if len(pods) != 2*replicas {
		t.Fatalf("saw %d Pods, want %d (two ReplicaSets of %d)", len(pods), 2*replicas, replicas)
	}
	e.WaitTraces(t, uidsOf(pods), 2*time.Minute, complete)
	// A late duplicate would come after the first export: look again a little later.
	time.Sleep(10 * time.Second)
	for _, p := range pods {
		tr, err := e.Jaeger.Trace(ctx, TraceID(string(p.UID)))
		if err != nil || tr == nil {
			t.Errorf("Pod %s: trace gone: %v", p.Name, err)
			continue
		}
		for _, name := range append([]string{"pod.startup"}, Phases...) {
			if n := len(tr.FindAll(name)); n != 1 {
				t.Errorf("Pod %s: %d %s spans in its trace, want 1 (exported twice?)", p.Name, n, name)
			}
		}
	}
	found, err := e.Jaeger.FindTraces(ctx, "readyspan", map[string]string{"k8s.namespace.name": ns}, 100)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{} // Pod traces; the namespace's rollouts are traces too, not counted here
	for _, tr := range found {
		if tr.Root() != nil {
			ids[tr.TraceID] = true
		}
	}
	for _, p := range pods {
		if !ids[TraceID(string(p.UID))] {
			t.Errorf("Pod %s: its trace is not found by namespace", p.Name)
		}
	}
	if len(ids) != len(pods) {
		t.Errorf("%d Pod traces in namespace %s, want %d (one per Pod)", len(ids), ns, len(pods))
	}
	// Jaeger may show one trace where two identical exports arrived: count what readyspan sent.
	names := map[string]string{}
	for _, p := range pods {
		names[string(p.UID)] = p.Name
	}
	e.CheckExportedOnce(t, names)
}

// phaseCounts returns sum by (phase) of readyspan_phase_duration_seconds_count{outcome="ready"}.
func (e *Env) phaseCounts(ctx context.Context) (map[string]float64, error) {
	v, err := e.Prom.Query(ctx, `sum by (phase) (readyspan_phase_duration_seconds_count{outcome="ready"})`)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, s := range v {
		out[s.Metric["phase"]] = s.Value
	}
	// Pod traces exported: every trace sent, less the rollouts (each rollout is observed in the
	// duration histogram when it is handed to the exporter).
	for q, expr := range map[string]string{
		"readyspan_pod_startup_duration_seconds_count": "sum(readyspan_pod_startup_duration_seconds_count)",
		"readyspan_traces_exported_total":              "sum(readyspan_traces_exported_total) - sum(readyspan_rollout_duration_seconds_count)",
	} {
		f, _, err := e.Prom.Value(ctx, expr)
		if err != nil {
			return nil, err
		}
		out[q] = f
	}
	return out, nil
}

// stablePhaseCounts waits until two readings a scrape apart agree.
func (e *Env) stablePhaseCounts(t *testing.T) map[string]float64 {
	t.Helper()
	var last map[string]float64
	Eventually(t, time.Minute, "readyspan's counters in Prometheus to settle", func() (bool, error) {
		a, err := e.phaseCounts(context.Background())
		if err != nil {
			return false, err
		}
		time.Sleep(11 * time.Second) // two scrapes
		b, err := e.phaseCounts(context.Background())
		last = b
		return err == nil && fmt.Sprint(a) == fmt.Sprint(b), err
	})
	return last
}

// TestPhaseMetrics: after N Pods start, Prometheus counts exactly N more startups and exported
// traces, and N more observations of every phase (of each phase the traces show measured).
func TestPhaseMetrics(t *testing.T) {
	e := Setup(t)
	ns := e.Namespace(t, "e2e-metrics")
	const n = 3
	before := e.stablePhaseCounts(t)
	e.createService(t, ns, service("metrics"))
	e.createDeployment(t, ns, webDeployment("metrics", n))
	pods := e.WaitPodsReady(t, ns, "app=metrics", n, 2*time.Minute)
	uids := []string{}
	for _, p := range pods {
		uids = append(uids, string(p.UID))
	}
	traces := e.WaitTraces(t, uids, 2*time.Minute, complete)

	// A phase is counted once per trace in which readyspan measured it at both ends; a span it
	// could not measure carries readyspan.time.observed=false. These four are always measurable
	// on a real cluster: the Pod's own watch events and the components' events bound them.
	want := map[string]float64{"readyspan_pod_startup_duration_seconds_count": n, "readyspan_traces_exported_total": n}
	for _, phase := range Phases {
		for _, tr := range traces {
			if v, ok := tr.Find(phase).Tag("readyspan.time.observed"); !ok || v != false {
				want[phase]++
			}
		}
	}
	for _, phase := range []string{"controllers", "scheduling", "kubelet", "status"} {
		if want[phase] != n {
			t.Errorf("phase %s measured in %g of %d traces, want all", phase, want[phase], n)
		}
	}
	for _, phase := range []string{"submit", "apiserver"} {
		if want[phase] != n {
			t.Logf("note: phase %s measured in %g of %d traces (readyspan.time.observed=false in the others)", phase, want[phase], n)
		}
	}

	keys := append(append([]string{}, Phases...), "readyspan_pod_startup_duration_seconds_count", "readyspan_traces_exported_total")
	var after map[string]float64
	delta := func() string {
		parts := []string{}
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s+%g(want %g)", k, after[k]-before[k], want[k]))
		}
		return strings.Join(parts, " ")
	}
	Eventually(t, time.Minute, "Prometheus to count every traced Pod", func() (bool, error) {
		var err error
		if after, err = e.phaseCounts(context.Background()); err != nil {
			return false, err
		}
		for _, k := range keys {
			if after[k]-before[k] != want[k] {
				return false, fmt.Errorf("%s", delta())
			}
		}
		return true, nil
	})
	after = e.stablePhaseCounts(t)
	for _, k := range keys {
		if after[k]-before[k] != want[k] {
			t.Errorf("%s counted %g more times, want %g (%s)", k, after[k]-before[k], want[k], delta())
		}
	}
	t.Logf("counts for %d traced Pods: %s", n, delta())
	names := map[string]string{}
	for _, p := range pods {
		names[string(p.UID)] = p.Name
	}
	e.CheckExportedOnce(t, names)
}

// TestColdPullAlert: readyspan's PodColdImagePullSlow rule, loaded by Prometheus from
// deploy/prometheus/alerts.yaml and evaluated over readyspan's real metrics, stays quiet for a
// 4 s cold pull and fires for a cold pull slower than its 30 s threshold. The e2e loads a copy with
// `for: 5s` (the original waits 15 minutes, so it only reaches pending here).
func TestColdPullAlert(t *testing.T) {
	e := Setup(t)
	ctx := Ctx(t)
	const alert = "PodColdImagePullSlow"

	original := e.loadedRule(t, "alerts.yaml", alert)
	e.LoadRules(t, "e2e-cold-pull", []RuleGroupFile{{Name: "readyspan.e2e", Rules: []RuleFile{{
		Alert: alert, Expr: original.Query, For: "5s",
		Labels: map[string]string{"severity": "warning", "e2e": "true"},
	}}}})
	state := func() (string, error) {
		r, err := e.findRule(ctx, "readyspan.e2e", alert)
		if r == nil {
			return "", err
		}
		return r.State, err
	}

	// On a cluster kept up from an earlier run, that run's slow pull stays in the rule's 10 m
	// window and would keep the alert firing: wait until the window holds none.
	Eventually(t, 11*time.Minute, "earlier slow cold pulls to leave the rule's window", func() (bool, error) {
		v, err := e.Prom.Query(ctx, original.Query)
		return err == nil && len(v) == 0, fmt.Errorf("%s: %v %v", original.Query, v, err)
	})

	ns := e.Namespace(t, "e2e-alert")
	// A fast cold pull first, so the histogram exists before the slow one increases it: rate()
	// sees only increases between scrapes.
	e.createService(t, ns, service("fast"))
	fast := e.createPod(t, ns, sleeper("fast", ColdRepo+":"+ns+"-fast"))
	e.WaitTrace(t, string(fast.UID), 2*time.Minute, complete)
	Eventually(t, time.Minute, "Prometheus to scrape the fast cold pull", func() (bool, error) {
		v, ok, err := e.Prom.Value(ctx, "sum(readyspan_image_pull_duration_seconds_count)")
		return ok && v > 0, err
	})
	time.Sleep(11 * time.Second) // two evaluations
	if s, err := state(); err != nil || s != "inactive" {
		t.Errorf("after a fast cold pull the alert is %q (%v), want inactive", s, err)
	}

	// The registry serves the two new blobs of a delay-20s-* tag after 20 s each: a pull over 30 s.
	e.createService(t, ns, service("slow"))
	slow := e.createPod(t, ns, sleeper("slow", ColdRepo+":delay-20s-"+ns))
	e.WaitPodsReady(t, ns, "app=slow", 1, 3*time.Minute)
	e.WaitTrace(t, string(slow.UID), 2*time.Minute, complete)
	Eventually(t, 2*time.Minute, alert+" to fire", func() (bool, error) {
		alerts, err := e.Prom.Alerts(ctx)
		for _, a := range alerts {
			if a.Labels["alertname"] == alert && a.Labels["e2e"] == "true" && a.State == "firing" {
				t.Logf("firing: %s (value %s)", a.Annotations["summary"], a.Value)
				return true, nil
			}
		}
		return false, err
	})
	if r, err := e.findRule(ctx, original.group, alert); err != nil || r == nil || r.State != "pending" {
		t.Errorf("the rule from alerts.yaml (for: 15m) should be pending now: %+v %v", r, err)
	}
}

type loadedRule struct {
	Rule
	group string
}

// loadedRule finds an alerting rule that Prometheus loaded from a file named file.
func (e *Env) loadedRule(t *testing.T, file, name string) loadedRule {
	t.Helper()
	groups, err := e.Prom.Rules(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		if filepath.Base(g.File) != file {
			continue
		}
		for _, r := range g.Rules {
			if r.Name == name {
				if r.Health != "ok" && r.Health != "unknown" {
					t.Errorf("rule %s health %q", name, r.Health)
				}
				return loadedRule{Rule: r, group: g.Name}
			}
		}
	}
	// Not loaded: say whether the file has it at all.
	data, _ := os.ReadFile(filepath.Join(repoRoot(t), "deploy/prometheus", file))
	js, _ := utilyaml.ToJSON(data)
	t.Fatalf("Prometheus has not loaded rule %s from %s (the file has it: %v)", name, file, strings.Contains(string(js), `"`+name+`"`))
	return loadedRule{}
}

func (e *Env) findRule(ctx context.Context, group, name string) (*Rule, error) {
	groups, err := e.Prom.Rules(ctx)
	if err != nil {
		return nil, err
	}
	for _, g := range groups {
		if g.Name != group {
			continue
		}
		for i := range g.Rules {
			if g.Rules[i].Name == name {
				return &g.Rules[i], nil
			}
		}
	}
	return nil, fmt.Errorf("rule %s/%s not loaded", group, name)
}

// TestSelfMetrics: readyspan's own metrics in Prometheus say it is synced, watching, exporting
// without errors, and count a warm and a cold pull and their scheduling attempts.
func TestSelfMetrics(t *testing.T) {
	e := Setup(t)
	ctx := Ctx(t)
	ns := e.Namespace(t, "e2e-self")
	e.createService(t, ns, service("warm"))
	e.createService(t, ns, service("cold"))
	warm := e.createPod(t, ns, sleeper("warm", BusyboxImage))
	cold := e.createPod(t, ns, sleeper("cold", ColdRepo+":"+ns))
	e.WaitTraces(t, []string{string(warm.UID), string(cold.UID)}, 2*time.Minute, complete)
	checks := []struct {
		query string
		ok    func(v float64, found bool) bool
		want  string
	}{
		{`max(readyspan_cache_synced)`, func(v float64, f bool) bool { return f && v == 1 }, "1"},
		{`sum(readyspan_watch_events_total{resource=~"pods?"})`, func(v float64, f bool) bool { return f && v > 0 }, "> 0"},
		{`sum(readyspan_traces_exported_total)`, func(v float64, f bool) bool { return f && v > 0 }, "> 0"},
		{`sum(readyspan_export_errors_total)`, func(v float64, f bool) bool { return !f || v == 0 }, "0"},
		{`sum(readyspan_image_pulls_total{result="pulled"})`, func(v float64, f bool) bool { return f && v > 0 }, "> 0 (the cold pulls)"},
		{`sum(readyspan_image_pulls_total{result="present"})`, func(v float64, f bool) bool { return f && v > 0 }, "> 0 (the warm pulls)"},
		{`sum(readyspan_scheduling_attempts_count)`, func(v float64, f bool) bool { return f && v > 0 }, "> 0"},
		{`count(readyspan_pods_in_phase)`, func(v float64, f bool) bool { return f && v > 0 }, "> 0 series"},
	}
	// Within two scrapes of the scenario before.
	Eventually(t, 30*time.Second, "readyspan's self metrics in Prometheus", func() (bool, error) {
		var bad []string
		for _, c := range checks {
			v, found, err := e.Prom.Value(ctx, c.query)
			if err != nil {
				return false, err
			}
			if !c.ok(v, found) {
				bad = append(bad, fmt.Sprintf("%s = %g (present %v), want %s", c.query, v, found, c.want))
			}
		}
		return len(bad) == 0, fmt.Errorf("%s", strings.Join(bad, "; "))
	})
}
