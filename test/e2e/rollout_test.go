//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// Tolerances of the rollout trace against independent evidence: the root's start is the audit
// log's request time of the change, which the apiserver's own request span starts within
// microseconds of; its end is a watch receive time in readyspan, compared with the test's own
// watch of the same objects (two clients of one apiserver on one host).
const (
	rolloutStartTolerance = 5 * time.Millisecond
	rolloutEndTolerance   = 50 * time.Millisecond
)

// rolloutWitness is the test's own watch of one Deployment and its Pods: when the Deployment's
// status said it rolled out, and when each Pod was deleted.
type rolloutWitness struct {
	mu       sync.Mutex
	complete map[int64]time.Time // generation → receive time of the first complete status
	gone     map[types.UID]time.Time
}

func (e *Env) witnessRollouts(t *testing.T, ns, name string) *rolloutWitness {
	t.Helper()
	w := &rolloutWitness{complete: map[int64]time.Time{}, gone: map[types.UID]time.Time{}}
	ctx := Ctx(t)
	deps, err := e.Kube.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatalf("watch deployment: %v", err)
	}
	pods, err := e.Kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("watch pods: %v", err)
	}
	go func() {
		for ev := range deps.ResultChan() {
			now := time.Now()
			d, ok := ev.Object.(*appsv1.Deployment)
			if !ok {
				continue
			}
			if deploymentComplete(d) {
				w.mu.Lock()
				if _, seen := w.complete[d.Generation]; !seen {
					w.complete[d.Generation] = now
				}
				w.mu.Unlock()
			}
		}
	}()
	go func() {
		for ev := range pods.ResultChan() {
			now := time.Now()
			if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type == watch.Deleted {
				w.mu.Lock()
				w.gone[p.UID] = now
				w.mu.Unlock()
			}
		}
	}()
	return w
}

// deploymentComplete is the deployment controller's verdict, as kubectl rollout status reads it.
func deploymentComplete(d *appsv1.Deployment) bool {
	s := d.Status
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	for _, c := range s.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Reason != "NewReplicaSetAvailable" {
			return false
		}
	}
	return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want && s.Replicas == want && s.AvailableReplicas == want
}

// rolloutTrace waits for readyspan's trace of the workload's rollout at generation.
func (e *Env) rolloutTrace(t *testing.T, kind, ns, name string, generation int64, timeout time.Duration) *Trace {
	t.Helper()
	var found *Trace
	tag := map[string]string{"Deployment": "k8s.deployment.name", "StatefulSet": "k8s.statefulset.name", "DaemonSet": "k8s.daemonset.name"}[kind]
	Eventually(t, timeout, fmt.Sprintf("readyspan's trace of the rollout of %s %s/%s generation %d", kind, ns, name, generation), func() (bool, error) {
		traces, err := e.Jaeger.FindTraces(context.Background(), "readyspan", map[string]string{tag: name, "k8s.namespace.name": ns}, 50)
		if err != nil {
			return false, err
		}
		var match []*Trace
		for _, tr := range traces {
			root := tr.Find("workload.rollout")
			if root == nil {
				continue
			}
			if g, _ := root.Tag("readyspan.rollout.generation"); fmt.Sprint(g) == fmt.Sprint(generation) {
				match = append(match, tr)
			}
		}
		if len(match) > 1 {
			t.Fatalf("%d rollout traces of generation %d, want one", len(match), generation)
		}
		if len(match) == 1 {
			found = match[0]
			return true, nil
		}
		return false, fmt.Errorf("%d traces of %s, none of generation %d", len(traces), name, generation)
	})
	return found
}

// scalingEvents are the deployment controller's ScalingReplicaSet events about d since a time.
func (e *Env) scalingEvents(t *testing.T, ns string, uid types.UID, since time.Time) []eventsv1.Event {
	t.Helper()
	list, err := e.Kube.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list events: %v", err)
	}
	var out []eventsv1.Event
	for _, ev := range list.Items {
		if ev.Reason == "ScalingReplicaSet" && ev.Regarding.UID == uid && !nameTime(t, ev.Name).Before(since) {
			out = append(out, ev)
		}
	}
	return out
}

// nameTime decodes the hex UnixNano suffix the recorder puts after the last dot of an Event's name.
func nameTime(t *testing.T, name string) time.Time {
	t.Helper()
	var ns int64
	if _, err := fmt.Sscanf(name[strings.LastIndexByte(name, '.')+1:], "%x", &ns); err != nil {
		t.Fatalf("event name %q: %v", name, err)
	}
	return time.Unix(0, ns)
}

// links returns the trace IDs a span links to (Jaeger shows OTLP links as FOLLOWS_FROM references).
func links(s *Span) []string {
	var out []string
	for _, r := range s.References {
		if r.RefType == "FOLLOWS_FROM" {
			out = append(out, r.TraceID)
		}
	}
	return out
}

// TestRolloutDeployment updates the template of a 6-replica Deployment (maxSurge 1,
// maxUnavailable 0, readiness after 2 s) and checks readyspan's one rollout trace against the
// controller's own ScalingReplicaSet events, the Pods' own traces, the apiserver's own span for
// the PATCH, and the test's own watch of the Deployment and its Pods.
func TestRolloutDeployment(t *testing.T) {
	e := Setup(t)
	ns := e.Namespace(t, "e2e-rollout")
	ctx := Ctx(t)
	d := webDeployment("web", 6)
	d.Spec.Template.Spec.Containers[0].ReadinessProbe.InitialDelaySeconds = 2
	e.createService(t, ns, service("web"))
	e.createDeployment(t, ns, d)
	old := e.WaitPodsReady(t, ns, "app=web", 6, 3*time.Minute)
	created, err := e.Kube.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.rolloutTrace(t, "Deployment", ns, "web", created.Generation, 2*time.Minute) // the creation is a rollout too
	witness := e.witnessRollouts(t, ns, "web")

	before := time.Now()
	patch := []byte(`{"spec":{"template":{"metadata":{"annotations":{"readyspan.dev/e2e-change":"1"}}}}}`)
	updated, err := e.Kube.AppsV1().Deployments(ns).Patch(ctx, "web", types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("patch the template: %v", err)
	}
	gen := updated.Generation
	tr := e.rolloutTrace(t, "Deployment", ns, "web", gen, 4*time.Minute)
	root := tr.Find("workload.rollout")
	t.Logf("rollout: %s", root.StrTag("readyspan.rollout.summary"))
	if k := root.StrTag("readyspan.rollout.kind"); k != "update" {
		t.Errorf("kind %q, want update", k)
	}
	if o := root.StrTag("readyspan.rollout.outcome"); o != "complete" {
		t.Fatalf("outcome %q, want complete", o)
	}

	// Steps: one per ScalingReplicaSet event, at the nanosecond of its name (Jaeger keeps µs).
	// After ten of them the recorder combines the rest into one Event rewritten each time
	// ("(combined from similar events): …", its count growing): each rewrite is one step.
	events := e.scalingEvents(t, ns, updated.UID, before)
	steps := tr.FindAll("rollout.step")
	want, combined := 0, 0
	for _, ev := range events {
		if strings.HasPrefix(ev.Note, "(combined from similar events): ") {
			n := int(max(ev.DeprecatedCount, 1))
			if ev.Series != nil {
				n = int(ev.Series.Count)
			}
			want, combined = want+n, combined+n
			continue
		}
		want++
	}
	if len(steps) != want {
		t.Fatalf("%d steps, the controller's ScalingReplicaSet events since the change say %d (%d of them combined)", len(steps), want, combined)
	}
	ups, matched := 0, 0
	for _, s := range steps {
		if strings.HasPrefix(s.StrTag("readyspan.rollout.step.message"), "Scaled up") {
			ups++
		}
	}
	for _, ev := range events {
		if strings.HasPrefix(ev.Note, "(combined from similar events): ") {
			continue
		}
		var match *Span
		for _, s := range steps {
			if s.StrTag("readyspan.rollout.step.message") == ev.Note {
				match = s
			}
		}
		if match == nil {
			t.Errorf("no step for %q", ev.Note)
			continue
		}
		matched++
		if gap := match.StartTime().Sub(nameTime(t, ev.Name)); gap < -time.Microsecond || gap > time.Microsecond {
			t.Errorf("step %q starts %v from its event's stamp", ev.Note, gap)
		}
	}
	t.Logf("%d steps: %d matched to their own Event at its name's nanosecond, %d from rewrites of a combined Event", len(steps), matched, combined)
	if ups != 6 {
		t.Errorf("%d scale-up steps, want 6 waves of 1 (maxSurge 1, maxUnavailable 0)", ups)
	}

	// New Pods: six, each linked to its own trace, which links back.
	newPods := e.WaitPodsReady(t, ns, "app=web", 6, time.Minute)
	podSpans := tr.FindAll("rollout.pod")
	if len(podSpans) != 6 {
		t.Fatalf("%d rollout.pod spans, want 6", len(podSpans))
	}
	for _, p := range newPods {
		var s *Span
		for _, ps := range podSpans {
			if ps.StrTag("k8s.pod.uid") == string(p.UID) {
				s = ps
			}
		}
		if s == nil {
			t.Errorf("new Pod %s has no rollout.pod span", p.Name)
			continue
		}
		if l := links(s); len(l) != 1 || l[0] != TraceID(string(p.UID)) {
			t.Errorf("rollout.pod %s links to %v, want its own trace %s", p.Name, l, TraceID(string(p.UID)))
		}
		if len(tr.Children(s)) != 6 {
			t.Errorf("rollout.pod %s has %d children, want the six phases", p.Name, len(tr.Children(s)))
		}
		own := e.WaitTrace(t, string(p.UID), time.Minute, complete)
		if l := links(own.Root()); len(l) != 1 || l[0] != tr.TraceID {
			t.Errorf("the trace of %s links to %v, want its rollout %s", p.Name, l, tr.TraceID)
		}
		// Each wave's Pod is matched to its own scale-up: one matched to a later wave's had its
		// creation before its cause, and was marked inconsistent and kept out of the histograms.
		if v, _ := own.Root().Tag("readyspan.time.inconsistent"); v == true {
			t.Errorf("the trace of %s is marked inconsistent: %s", p.Name, own.Root().StrTag("readyspan.time.inconsistency"))
		}
	}
	// Old Pods: six terminations, of exactly the Pods that were there before.
	terms := tr.FindAll("rollout.pod.terminate")
	if len(terms) != 6 {
		t.Errorf("%d terminations, want 6", len(terms))
	}
	for _, p := range old {
		n := 0
		for _, s := range terms {
			if s.StrTag("k8s.pod.uid") == string(p.UID) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("old Pod %s terminates %d times in the trace, want 1", p.Name, n)
		}
	}
	// The critical path ends on the last wave: the step that started last is on it.
	var last *Span
	for _, s := range steps {
		if strings.HasPrefix(s.StrTag("readyspan.rollout.step.message"), "Scaled up") && (last == nil || s.StartTimeUS > last.StartTimeUS) {
			last = s
		}
	}
	if v, _ := last.Tag("readyspan.rollout.critical"); v != true {
		t.Errorf("the last wave %q is not on the critical path", last.StrTag("readyspan.rollout.step.message"))
		logRolloutItems(t, tr)
	}

	// Start: the apiserver's own span for the PATCH.
	auditID := e.auditIDOf(t, "patch", ns, "deployments", "web")
	var theirs *Trace
	Eventually(t, time.Minute, "the apiserver's spans for audit ID "+auditID, func() (bool, error) {
		traces, err := e.Jaeger.FindTraces(ctx, "apiserver", map[string]string{"audit-id": auditID}, 5)
		if err != nil || len(traces) != 1 {
			return false, fmt.Errorf("%d traces, %v", len(traces), err)
		}
		theirs = traces[0]
		return true, nil
	})
	first := theirs.Spans[0]
	for _, s := range theirs.Spans {
		if s.StartTimeUS < first.StartTimeUS {
			first = s
		}
	}
	t.Logf("rollout start: readyspan %s (%s), the apiserver's first span of the PATCH %s: %v apart",
		root.StartTime().Format(time.StampMicro), root.StrTag("readyspan.time.source.start"), first.StartTime().Format(time.StampMicro), first.StartTime().Sub(root.StartTime()))
	if gap := first.StartTime().Sub(root.StartTime()); gap < -rolloutStartTolerance || gap > rolloutStartTolerance {
		t.Errorf("rollout start %s is %v from the apiserver's first span of the PATCH (%s), tolerance %v",
			root.StartTime().Format(time.StampMicro), gap, first.StartTime().Format(time.StampMicro), rolloutStartTolerance)
	}
	if src := root.StrTag("readyspan.time.source.start"); src != "audit" {
		t.Errorf("start source %q, want audit", src)
	}

	// End: the later of the Deployment's completed status and the last old Pod gone, as the
	// test's own watch saw them.
	witness.mu.Lock()
	end := witness.complete[gen]
	for _, p := range old {
		if g := witness.gone[p.UID]; g.After(end) {
			end = g
		}
	}
	witness.mu.Unlock()
	if end.IsZero() {
		t.Fatal("the test's watch never saw the rollout complete")
	}
	t.Logf("rollout end: readyspan %s, the test's own watch %s: %v apart", root.EndTime().Format(time.StampMilli), end.Format(time.StampMilli), root.EndTime().Sub(end))
	if gap := root.EndTime().Sub(end); gap < -rolloutEndTolerance || gap > rolloutEndTolerance {
		t.Errorf("rollout end is %v from the test's own watch (%s), tolerance %v", gap, end.Format(time.StampMilli), rolloutEndTolerance)
	}

	// Exactly once, through a sink that cannot merge duplicates.
	if n := e.capturedRoots(t, "workload.rollout")[tr.TraceID]; n != 1 {
		t.Errorf("the OTLP witness received the rollout's root %d times, want 1", n)
	}
	e.noTimeWarnings(t, ns)
}

// noTimeWarnings fails the test if readyspan logged a trace of a Pod in ns with its timestamps
// out of order: on an idle node every stamp of an ordinary startup or rollout is in order, so
// each such warning is a bug (a Pod matched to the wrong cause, a stamp misread).
func (e *Env) noTimeWarnings(t *testing.T, ns string) {
	t.Helper()
	path := filepath.Join(e.State, "logs", "readyspan.log")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("readyspan's log: %v", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, "timestamps out of order") && strings.Contains(line, ns+"/") {
			t.Errorf("readyspan warned of a Pod of the rollout (%s): %s", path, line)
		}
	}
}

// TestRolloutFailsOnMissingImage: a rollout to an image that does not exist, with a 30 s
// progress deadline, ends failed with the controller's reason.
func TestRolloutFailsOnMissingImage(t *testing.T) {
	e := Setup(t)
	ns := e.Namespace(t, "e2e-rollout-fail")
	ctx := Ctx(t)
	d := webDeployment("web", 1)
	d.Spec.ProgressDeadlineSeconds = int32p(30)
	e.createDeployment(t, ns, d)
	e.WaitPodsReady(t, ns, "app=web", 1, 2*time.Minute)
	patch := []byte(fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":"httpd","image":%q}]}}}}`, MissingImage))
	updated, err := e.Kube.AppsV1().Deployments(ns).Patch(ctx, "web", types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr := e.rolloutTrace(t, "Deployment", ns, "web", updated.Generation, 3*time.Minute)
	root := tr.Find("workload.rollout")
	if o := root.StrTag("readyspan.rollout.outcome"); o != "failed" {
		t.Fatalf("outcome %q, want failed", o)
	}
	if r := root.StrTag("readyspan.rollout.reason"); !strings.HasPrefix(r, "ProgressDeadlineExceeded") {
		t.Errorf("reason %q, want the controller's ProgressDeadlineExceeded", r)
	}
	if !root.IsError() {
		t.Error("a failed rollout's root is not an error span")
	}
	if d := root.Duration(); d < 30*time.Second || d > 60*time.Second {
		t.Errorf("failed after %v, want just past the 30 s progress deadline", d)
	}
}

// TestRolloutKinds: kubectl rollout restart, rollout undo and scale each make one rollout of
// their kind; a second change in the middle of a rollout supersedes it, and no Pod is a new Pod
// of both.
func TestRolloutKinds(t *testing.T) {
	e := Setup(t)
	ns := e.Namespace(t, "e2e-rollout-kinds")
	ctx := Ctx(t)
	e.createService(t, ns, service("web"))
	e.createDeployment(t, ns, webDeployment("web", 2))
	e.WaitPodsReady(t, ns, "app=web", 2, 2*time.Minute)
	generation := func() int64 {
		d, err := e.Kube.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return d.Generation
	}
	waitDone := func() {
		Eventually(t, 3*time.Minute, "the rollout to complete", func() (bool, error) {
			d, err := e.Kube.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
			return err == nil && deploymentComplete(d), err
		})
	}
	check := func(kind string, gen int64, pods int) *Trace {
		t.Helper()
		tr := e.rolloutTrace(t, "Deployment", ns, "web", gen, 3*time.Minute)
		root := tr.Find("workload.rollout")
		if k := root.StrTag("readyspan.rollout.kind"); k != kind {
			t.Errorf("generation %d: kind %q, want %s", gen, k, kind)
		}
		if n := len(tr.FindAll("rollout.pod")); pods >= 0 && n != pods {
			t.Errorf("%s: %d new Pods, want %d", kind, n, pods)
		}
		return tr
	}

	e.kubectlRun(t, "-n", ns, "rollout", "restart", "deployment/web")
	waitDone()
	check("restart", generation(), 2)

	e.kubectlRun(t, "-n", ns, "rollout", "undo", "deployment/web")
	waitDone()
	check("rollback", generation(), 2)

	e.kubectlRun(t, "-n", ns, "scale", "deployment/web", "--replicas=5")
	waitDone()
	check("scale", generation(), 3)

	// A change while a rollout is in progress: the first is superseded and links to the second.
	e.kubectlRun(t, "-n", ns, "set", "env", "deployment/web", "FIRST=1")
	first := generation()
	time.Sleep(1500 * time.Millisecond)
	e.kubectlRun(t, "-n", ns, "set", "env", "deployment/web", "SECOND=1")
	second := generation()
	waitDone()
	a := check("update", first, -1)
	b := check("update", second, -1)
	ra := a.Find("workload.rollout")
	if o := ra.StrTag("readyspan.rollout.outcome"); o != "superseded" {
		t.Errorf("the first rollout's outcome %q, want superseded", o)
	}
	if l := links(ra); len(l) != 1 || l[0] != b.TraceID {
		t.Errorf("the superseded rollout links to %v, want %s", l, b.TraceID)
	}
	for _, pa := range a.FindAll("rollout.pod") {
		for _, pb := range b.FindAll("rollout.pod") {
			if pa.StrTag("k8s.pod.uid") == pb.StrTag("k8s.pod.uid") {
				t.Errorf("Pod %s is a new Pod of both rollouts", pa.StrTag("k8s.pod.name"))
			}
		}
	}
	// Waves about 2 s apart (readiness after 1 s), as in make demo: the timing that matched a
	// Pod to the next wave's scale-up.
	e.noTimeWarnings(t, ns)
}

// TestRolloutStatefulSet: a StatefulSet of 3 (OrderedReady) creates its Pods one after the
// other, so every Pod is on the critical path.
func TestRolloutStatefulSet(t *testing.T) {
	e := Setup(t)
	ns := e.Namespace(t, "e2e-rollout-sts")
	ctx := Ctx(t)
	d := webDeployment("db", 3)
	s := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec:       appsv1.StatefulSetSpec{Replicas: int32p(3), Selector: d.Spec.Selector, ServiceName: "db", Template: d.Spec.Template},
	}
	e.createService(t, ns, service("db"))
	created, err := e.Kube.AppsV1().StatefulSets(ns).Create(ctx, s, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr := e.rolloutTrace(t, "StatefulSet", ns, "db", created.Generation, 3*time.Minute)
	root := tr.Find("workload.rollout")
	t.Logf("rollout: %s", root.StrTag("readyspan.rollout.summary"))
	if o := root.StrTag("readyspan.rollout.outcome"); o != "complete" {
		t.Fatalf("outcome %q, want complete", o)
	}
	pods := tr.FindAll("rollout.pod")
	if len(pods) != 3 {
		t.Fatalf("%d rollout.pod spans, want 3", len(pods))
	}
	for _, p := range pods {
		if v, _ := p.Tag("readyspan.rollout.critical"); v != true {
			t.Errorf("OrderedReady: Pod %s is not on the critical path", p.StrTag("k8s.pod.name"))
		}
	}
	if n := len(tr.FindAll("rollout.step")); n != 3 {
		t.Errorf("%d steps, want one per Pod created", n)
	}
	// Each Pod's own trace: the statefulset controller's step, from the Pod before turning
	// Ready to its SuccessfulCreate.
	e.checkStatefulSetSteps(t, ns, "db", 3)
}

// TestRolloutDaemonSet updates a DaemonSet on the node: one new Pod, one termination.
func TestRolloutDaemonSet(t *testing.T) {
	e := Setup(t)
	ns := e.Namespace(t, "e2e-rollout-ds")
	ctx := Ctx(t)
	d := webDeployment("agent", 1)
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec:       appsv1.DaemonSetSpec{Selector: d.Spec.Selector, Template: d.Spec.Template},
	}
	if _, err := e.Kube.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.WaitPodsReady(t, ns, "app=agent", 1, 2*time.Minute)
	patch := []byte(`{"spec":{"template":{"metadata":{"annotations":{"readyspan.dev/e2e-change":"1"}}}}}`)
	updated, err := e.Kube.AppsV1().DaemonSets(ns).Patch(ctx, "agent", types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr := e.rolloutTrace(t, "DaemonSet", ns, "agent", updated.Generation, 3*time.Minute)
	root := tr.Find("workload.rollout")
	t.Logf("rollout: %s", root.StrTag("readyspan.rollout.summary"))
	if o := root.StrTag("readyspan.rollout.outcome"); o != "complete" {
		t.Fatalf("outcome %q, want complete", o)
	}
	if n, m := len(tr.FindAll("rollout.pod")), len(tr.FindAll("rollout.pod.terminate")); n != 1 || m != 1 {
		t.Errorf("%d new Pods and %d terminations, want 1 and 1", n, m)
	}
	// The new Pod's own trace: the daemonset controller's step for the template change, ending
	// at its SuccessfulCreate; the old Pod it deleted for the update is not a Pod it replaced.
	for name, pt := range e.podTraces(t, ns, "app=agent", 1) {
		s := e.step(t, ns, pt, "controllers.daemonset", "Created pod: "+name)
		root := pt.Root()
		if c, r, d := s.StrTag("readyspan.controller.cause"), root.StrTag("readyspan.root"), root.StrTag("k8s.daemonset.name"); c != "change" || r != "daemonset" || d != "agent" {
			t.Errorf("%s: cause %q, root %q, daemonset %q, want change, daemonset, agent", name, c, r, d)
		}
		if r := root.StrTag("readyspan.replaces.pod"); r != "" {
			t.Errorf("%s: an update's Pod says it replaced %s", name, r)
		}
	}
}

// kubectlRun runs the local cluster's kubectl (bin/kubectl) as a user would.
func (e *Env) kubectlRun(t *testing.T, args ...string) string {
	t.Helper()
	out, err := inclusterRun(t, e.Root, nil, filepath.Join(e.Root, "bin", "kubectl"), append([]string{"--kubeconfig", e.Kubeconfig}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// logRolloutItems prints a rollout trace's steps and Pods in time order, each with its
// stamps' sources and whether it is on the critical path: what a failed critical-path check
// needs to be understood from the test's output alone.
func logRolloutItems(t *testing.T, tr *Trace) {
	t.Helper()
	var items []*Span
	for _, name := range []string{"rollout.step", "rollout.pod", "rollout.pod.terminate"} {
		items = append(items, tr.FindAll(name)...)
	}
	sort.Slice(items, func(i, j int) bool { return items[i].StartTimeUS < items[j].StartTimeUS })
	for _, s := range items {
		crit, _ := s.Tag("readyspan.rollout.critical")
		what := s.StrTag("readyspan.rollout.step.message")
		if what == "" {
			what = s.StrTag("k8s.pod.name")
		}
		t.Logf("  %-22s %s → %s (%s → %s) critical=%v  %s", s.OperationName,
			s.StartTime().Format("15:04:05.000000"), s.EndTime().Format("15:04:05.000000"),
			s.StrTag("readyspan.time.source.start"), s.StrTag("readyspan.time.source.end"), crit, what)
	}
}
