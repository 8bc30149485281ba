//go:build e2e

// Waits in the scheduling phase that are not the scheduler's (issue 26 §4): a scheduling gate the
// test removes and a preemption on the real node (the wait for a node a real autoscaler adds is
// autoscaler_test.go's). Each span is judged against what the API states independently: the
// test's own clock around its write, the Pod's managedFields, and the scheduler's Scheduled and
// Preempted events.
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// watchLatency bounds how long after a write readyspan's watch receives it on the local cluster.
const watchLatency = time.Second

// TestSchedulingGated: a Pod created with a scheduling gate, removed by the test after 4 s. The
// scheduling phase holds scheduling.gated from the Pod's creation to the removal, which the
// test brackets with its own clock. An Update that only removes the gate leaves managedFields as
// they were; one that also sets a field (a label, as a queueing controller admitting the Pod
// might) stamps the remover's entry, and then the end lies in that entry's second and the span
// names the remover.
func TestSchedulingGated(t *testing.T) {
	for _, tc := range []struct {
		name  string
		label bool
	}{{"gate only", false}, {"gate and a label", true}} {
		t.Run(tc.name, func(t *testing.T) { testSchedulingGated(t, tc.label) })
	}
}

func testSchedulingGated(t *testing.T, label bool) {
	e := Setup(t)
	ns := e.Namespace(t, "e2e-gated")
	p := sleeper("gated", BusyboxImage)
	p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "readyspan.dev/hold"}}
	e.createService(t, ns, service("gated"))
	pod := e.createPod(t, ns, p)

	time.Sleep(4 * time.Second)
	ctx := context.Background()
	cur, err := e.Kube.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := podCondition(cur, corev1.PodScheduled); c == nil || c.Reason != corev1.PodReasonSchedulingGated {
		t.Fatalf("the gated Pod's PodScheduled condition is %+v, want reason SchedulingGated", c)
	}
	cur.Spec.SchedulingGates = nil
	if label {
		cur.Labels["queue.readyspan.dev/admitted"] = "true"
	}
	before := time.Now()
	updated, err := e.Kube.CoreV1().Pods(ns).Update(ctx, cur, metav1.UpdateOptions{FieldManager: "readyspan-e2e-gatekeeper"})
	after := time.Now()
	if err != nil {
		t.Fatalf("remove the scheduling gate: %v", err)
	}
	var removerTime *metav1.Time
	for _, f := range updated.ManagedFields {
		if f.Manager == "readyspan-e2e-gatekeeper" {
			removerTime = f.Time
		}
	}
	t.Logf("gate removed between %s and %s; the remover's managedFields entry: %v", before.Format(time.StampMicro), after.Format(time.StampMicro), removerTime)
	if label && removerTime == nil {
		t.Errorf("the Update that set a label left no managedFields entry for its manager")
	}
	e.WaitPodsReady(t, ns, "app=gated", 1, 2*time.Minute)

	tr := e.WaitTrace(t, string(pod.UID), 2*time.Minute, complete)
	checkStartupTrace(t, tr, pod, "ready", true)
	sched := tr.Find("scheduling")
	gated := tr.Find("scheduling.gated")
	if gated == nil {
		t.Fatalf("no scheduling.gated span (%s)", tr.Summary())
	}
	if p := tr.Parent(gated); p == nil || p.SpanID != sched.SpanID {
		t.Errorf("scheduling.gated is not a child of scheduling")
	}
	if gated.StartTime() != sched.StartTime() {
		t.Errorf("scheduling.gated starts at %s, the scheduling phase (the Pod's creation) at %s", gated.StartTime().Format(time.StampMicro), sched.StartTime().Format(time.StampMicro))
	}
	end := gated.EndTime()
	src, prec := gated.StrTag("readyspan.time.source.end"), gated.StrTag("readyspan.time.precision.end")
	t.Logf("scheduling.gated %s → %s (%s), end from %s (precision %s)", gated.StartTime().Format(time.StampMicro), end.Format(time.StampMicro), gated.Duration(), src, prec)
	// The removal happened between before and after; a watch receive time follows it within
	// watchLatency, a managedFields time is its second, truncated.
	switch src {
	case "watch":
		if end.Before(before) || end.After(after.Add(watchLatency)) {
			t.Errorf("scheduling.gated ends at %s (watch), outside [%s, %s + %s]", end.Format(time.StampMicro), before.Format(time.StampMicro), after.Format(time.StampMicro), watchLatency)
		}
	case "metadata":
		if end.After(after) || end.Before(before.Truncate(time.Second)) {
			t.Errorf("scheduling.gated ends at %s (metadata, 1 s), outside [%s, %s]", end.Format(time.StampMicro), before.Truncate(time.Second).Format(time.StampMicro), after.Format(time.StampMicro))
		}
	default:
		t.Errorf("scheduling.gated ends at a %q stamp, want the watch or the remover's managedFields time", src)
	}
	if removerTime != nil {
		if end.Before(removerTime.Time) || end.After(removerTime.Add(time.Second+watchLatency)) {
			t.Errorf("scheduling.gated ends at %s, not in the remover's managedFields second %s (+%s)", end.Format(time.StampMicro), removerTime.Format(time.RFC3339), watchLatency)
		}
		if by := gated.StrTag("readyspan.scheduling.gates_removed_by"); by != "readyspan-e2e-gatekeeper" {
			t.Errorf("gates_removed_by=%q, want the remover's field manager", by)
		}
	}
	if gated.Duration() < 4*time.Second-time.Second {
		t.Errorf("scheduling.gated lasted %s; the test held the gate for 4 s", gated.Duration())
	}
	// The scheduler could only bind after the removal.
	for _, ev := range e.PodEvents(t, ns, pod.Name) {
		if ev.Reason == "Scheduled" && ev.EventTime.Time.Before(end.Add(-boundaryTolerance)) {
			t.Errorf("Scheduled at %s, before scheduling.gated ends at %s", ev.EventTime.Format(time.StampMicro), end.Format(time.StampMicro))
		}
	}
	e.checkScheduledAt(t, tr, pod)
}

func podCondition(p *corev1.Pod, typ corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == typ {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// startKWOK runs bin/kwok for the Nodes annotated kwok.x-k8s.io/node=fake, with the node stages
// and the kubelet-like Pod stages of deploy/local/config/kwok, until the test ends.
func (e *Env) startKWOK(t *testing.T) {
	t.Helper()
	bin := filepath.Join(e.Root, "bin", "kwok")
	if _, err := os.Stat(bin); err != nil {
		Missing(t, "bin/kwok is not built (deploy/local/scripts/build.sh kwok): %v", err)
	}
	cfg := filepath.Join(e.Root, "deploy", "local", "config", "kwok")
	logf, err := os.Create(filepath.Join(t.TempDir(), "kwok.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--kubeconfig", e.Kubeconfig,
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--config", filepath.Join(cfg, "kwok.yaml"), "--config", filepath.Join(cfg, "node-initialize.yaml"),
		"--config", filepath.Join(cfg, "node-heartbeat-with-lease.yaml"), "--config", filepath.Join(cfg, "pod-startup.yaml"),
		"--node-lease-duration-seconds", "40", "--cidr", "10.201.0.0/16", "--server-address", "127.0.0.1:10248")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start kwok: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		logf.Close()
	})
}

// TestPreemption: a low-priority Pod that never turns Ready takes the real node's free CPU; a
// high-priority Pod asking for the same preempts it. The preemptor's scheduling span names the
// node the scheduler nominated and links to the victim's trace; the victim's trace says who
// preempted it (the scheduler's Preempted event) and links back.
func TestPreemption(t *testing.T) {
	e := Setup(t)
	ns := e.Namespace(t, "e2e-preempt")
	ctx := context.Background()
	for name, value := range map[string]int32{ns + "-low": 1000, ns + "-high": 1000000} {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
		if _, err := e.Kube.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create PriorityClass %s: %v", name, err)
		}
		t.Cleanup(func() {
			_ = e.Kube.SchedulingV1().PriorityClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	free := e.freeCPU(t)
	ask := free - 50 // millicores left for nothing else to fit
	if ask < 200 {
		Missing(t, "only %dm CPU free on %s: too little to preempt for", free, NodeName)
	}
	cpu := resource.NewMilliQuantity(ask, resource.DecimalSI)
	pod := func(name, class string, ready bool) *corev1.Pod {
		p := sleeper(name, BusyboxImage)
		p.Spec.PriorityClassName = class
		p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": NodeName}
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: *cpu}
		if !ready { // a victim still starting: its trace is in flight when it is preempted
			p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
				ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"false"}}},
				PeriodSeconds: 1,
			}
		}
		return p
	}
	// The preemptor holds the node's free CPU: give it back before the next test, not when the
	// namespace's deletion gets to it.
	t.Cleanup(func() {
		ctx := context.Background()
		zero := int64(0)
		_ = e.Kube.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		Eventually(t, time.Minute, "the preemption test's Pods gone", func() (bool, error) {
			l, err := e.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			return err == nil && len(l.Items) == 0, err
		})
	})
	victim := e.createPod(t, ns, pod("victim", ns+"-low", false))
	Eventually(t, time.Minute, "the victim running", func() (bool, error) {
		p, err := e.Kube.CoreV1().Pods(ns).Get(ctx, victim.Name, metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, err
	})
	e.createService(t, ns, service("preemptor"))
	preemptor := e.createPod(t, ns, pod("preemptor", ns+"-high", true))
	e.WaitPodsReady(t, ns, "app=preemptor", 1, 2*time.Minute)

	var preempted *struct{ note, related string }
	for _, ev := range e.PodEvents(t, ns, victim.Name) {
		if ev.Reason == "Preempted" {
			rel := ""
			if ev.Related != nil {
				rel = ev.Related.Name
			}
			preempted = &struct{ note, related string }{ev.Note, rel}
		}
	}
	if preempted == nil {
		t.Fatalf("no Preempted event about the victim")
	}
	t.Logf("Preempted event: %q (related %s)", preempted.note, preempted.related)
	// The message names the preemptor's UID (the event's related reference came back empty
	// on the local v1.37.2 control plane: readyspan reads the message).
	if want := fmt.Sprintf("Preempted by pod %s on node %s", preemptor.UID, NodeName); preempted.note != want {
		t.Errorf("the scheduler's Preempted event says %q; the test expected %q", preempted.note, want)
	}

	trs := e.WaitTraces(t, []string{string(preemptor.UID), string(victim.UID)}, 2*time.Minute, func(tr *Trace) bool { return tr.Root() != nil })
	ptr, vtr := trs[string(preemptor.UID)], trs[string(victim.UID)]
	checkStartupTrace(t, ptr, preemptor, "ready", true)
	sched := ptr.Find("scheduling")
	if got := sched.StrTag("readyspan.scheduling.nominated_node"); got != NodeName {
		t.Errorf("the preemptor's scheduling nominated_node=%q, want %s", got, NodeName)
	}
	if !linksTo(sched, TraceID(string(victim.UID))) {
		t.Errorf("the preemptor's scheduling span does not link to the victim's trace %s (references %+v)", TraceID(string(victim.UID)), sched.References)
	}
	root := vtr.Root()
	if got := root.StrTag("readyspan.outcome"); got != "deleted" {
		t.Errorf("the victim's outcome is %q, want deleted", got)
	}
	if got, want := root.StrTag("readyspan.preempted_by"), ns+"/"+preemptor.Name; got != want {
		t.Errorf("the victim's readyspan.preempted_by=%q, want %q", got, want)
	}
	if got := root.StrTag("readyspan.preempted_by.uid"); got != string(preemptor.UID) {
		t.Errorf("the victim's readyspan.preempted_by.uid=%q, want %s", got, preemptor.UID)
	}
	if !linksTo(root, TraceID(string(preemptor.UID))) {
		t.Errorf("the victim's root does not link to the preemptor's trace (references %+v)", root.References)
	}
}

// linksTo reports whether a span links (a FOLLOWS_FROM reference in Jaeger) to a trace.
func linksTo(s *Span, traceID string) bool {
	for _, r := range s.References {
		if r.RefType == "FOLLOWS_FROM" && r.TraceID == traceID {
			return true
		}
	}
	return false
}

// freeCPU is the real node's allocatable CPU less what the Pods on it request, in millicores.
func (e *Env) freeCPU(t *testing.T) int64 {
	t.Helper()
	ctx := context.Background()
	n, err := e.Kube.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	free := n.Status.Allocatable.Cpu().MilliValue()
	pods, err := e.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + NodeName})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, c := range p.Spec.Containers {
			free -= c.Resources.Requests.Cpu().MilliValue()
		}
	}
	return free
}
