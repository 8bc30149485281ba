package tracer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/readyspan/readyspan/phases"
)

// The volumes capture was recorded with `readyspan record -n volumes` on the local v1.37 cluster (one real
// node: kubelet, containerd). Two Pods: late-configmap mounts a ConfigMap created about six
// seconds after the Pod (the kubelet reported FailedMount meanwhile); local-claim uses a claim of
// a WaitForFirstConsumer StorageClass without a provisioner, bound to a local PersistentVolume
// on a directory of the node. evidence/ holds what the API said once both were Ready (kubectl
// get -o json of the ConfigMap, the claim, the PV, the Pods and the Events): the evidence the
// reconstruction is judged by, none of which readyspan wrote or reads.
// It is kept apart from the run* captures, which also hold List snapshots of Deployments and of
// both Events APIs that the generic checks read.
const run11 = "volumes"

func readRun11(t *testing.T, name string, into any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "real-node", run11, "evidence", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, into); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// TestRealNodeVolumes replays the capture and compares with its golden output (catching change;
// the two tests below judge it).
func TestRealNodeVolumes(t *testing.T) {
	dir := filepath.Join("testdata", "real-node", run11)
	traces := replayDir(t, dir)
	if len(traces) != 2 {
		t.Fatalf("%d traces, want 2", len(traces))
	}
	for _, tr := range traces {
		checkShape(t, tr)
	}
	spans, waterfall := render(t, traces)
	golden(t, dir+".txtar", spans, waterfall)
}

func tracesByName(t *testing.T, dir string) map[string]*phases.Trace {
	t.Helper()
	out := map[string]*phases.Trace{}
	for _, tr := range replayDir(t, filepath.Join("testdata", "real-node", dir)) {
		out[tr.Pod.Name] = tr
	}
	return out
}

func podCondition(p *corev1.Pod, c corev1.PodConditionType) time.Time {
	for _, x := range p.Status.Conditions {
		if x.Type == c && x.Status == corev1.ConditionTrue {
			return x.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// TestRealNodeLateConfigMap: the volumes step of a Pod whose ConfigMap came late ends after the
// ConfigMap was created (its creationTimestamp, whole seconds: created at or after it) and not
// after the sandbox was ready (PodReadyToStartContainers, whole seconds: ready before its next
// second), carries the kubelet's FailedMount with its count, and states the window from the
// last FailedMount (its lastTimestamp) to its end.
func TestRealNodeLateConfigMap(t *testing.T) {
	var cm corev1.ConfigMap
	var pods corev1.PodList
	var events corev1.EventList
	readRun11(t, "configmap.json", &cm)
	readRun11(t, "pods.json", &pods)
	readRun11(t, "events.json", &events)
	var pod *corev1.Pod
	for i := range pods.Items {
		if pods.Items[i].Name == "late-configmap" {
			pod = &pods.Items[i]
		}
	}
	var mount *corev1.Event
	for i := range events.Items {
		if e := &events.Items[i]; e.InvolvedObject.Name == "late-configmap" && e.Reason == "FailedMount" {
			mount = e
		}
	}
	if pod == nil || mount == nil {
		t.Fatal("the evidence holds no late-configmap Pod or no FailedMount about it")
	}
	sandboxReady := podCondition(pod, corev1.PodReadyToStartContainers)

	tr := tracesByName(t, run11)["late-configmap"]
	if tr == nil || tr.Pod.Outcome != phases.OutcomeReady {
		t.Fatalf("no ready trace of late-configmap: %+v", tr)
	}
	v, sb := tr.Find(phases.SpanKubeletVolumes), tr.Find(phases.SpanKubeletSandbox)
	if v == nil || sb == nil || v.ParentSpanID != sb.SpanID {
		t.Fatalf("kubelet.volumes is missing or not inside kubelet.sandbox")
	}
	if !v.End.After(cm.CreationTimestamp.Time) {
		t.Errorf("kubelet.volumes ends %v, not after the ConfigMap's creation (%v)", v.End, cm.CreationTimestamp.Time)
	}
	if v.End.After(sandboxReady.Add(time.Second)) || v.End.After(sb.End) {
		t.Errorf("kubelet.volumes ends %v, after the sandbox was ready (%v, whole seconds; the sandbox step ends %v)", v.End, sandboxReady, sb.End)
	}
	if !v.Start.Equal(sb.Start) {
		t.Errorf("kubelet.volumes starts %v, not with the sandbox step (%v)", v.Start, sb.Start)
	}
	if got := v.Events(); len(got) != 1 || got[0].Name != "FailedMount" || eventAttr(got[0], "count") != int64(mount.Count) {
		t.Errorf("events %+v, want the one FailedMount, count %d", got, mount.Count)
	}
	wantWindow := float64(v.End.Sub(mount.LastTimestamp.Time)) / float64(time.Millisecond)
	if got := v.Attr(phases.AttrVolumesWindow); got != wantWindow {
		t.Errorf("window %v ms, want %v (the last FailedMount at %v to the end)", got, wantWindow, mount.LastTimestamp.Time)
	}
	if tr.Summary.FailureReason != "" {
		t.Errorf("a mount that succeeded is named a failure: %q", tr.Summary.FailureReason)
	}
	t.Logf("ConfigMap created %v; last FailedMount %v (x%d); volumes %v → %v; sandbox ready %v",
		cm.CreationTimestamp.Time, mount.LastTimestamp.Time, mount.Count, v.Start, v.End, sandboxReady)
}

// TestRealNodeLocalClaim: the claim bound by the scheduler's VolumeBinding (WaitForFirstConsumer,
// a static local PV) is drawn in scheduling, named, ending when it turned Bound: not before the
// PV's own lastPhaseTransitionTime (the PV controller's clock, whole seconds) and not after the
// scheduler's Scheduled eventTime, which the scheduler writes once the claim is bound and the Pod
// with it. Nothing shows a wait in the kubelet: no kubelet.volumes.
func TestRealNodeLocalClaim(t *testing.T) {
	var pv corev1.PersistentVolume
	var pvc corev1.PersistentVolumeClaim
	var events corev1.EventList
	readRun11(t, "pv.json", &pv)
	readRun11(t, "pvc.json", &pvc)
	readRun11(t, "events.json", &events)
	var scheduled time.Time
	for _, e := range events.Items {
		if e.InvolvedObject.Name == "local-claim" && e.Reason == "Scheduled" {
			scheduled = e.EventTime.Time
		}
	}
	if scheduled.IsZero() || pv.Status.LastPhaseTransitionTime == nil || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.Name != pvc.Name {
		t.Fatal("the evidence holds no Scheduled event, or the PV is not bound to the claim")
	}

	tr := tracesByName(t, run11)["local-claim"]
	if tr == nil || tr.Pod.Outcome != phases.OutcomeReady {
		t.Fatalf("no ready trace of local-claim: %+v", tr)
	}
	vb, sched := tr.Find(phases.SpanSchedulingVolumeBinding+"/"+pvc.Name), tr.Find(phases.PhaseScheduling)
	if vb == nil || vb.ParentSpanID != sched.SpanID {
		t.Fatalf("no %s/%s inside scheduling", phases.SpanSchedulingVolumeBinding, pvc.Name)
	}
	if vb.Attr(phases.AttrClaimName) != pvc.Name || vb.Attr(phases.AttrVolumeName) != pv.Name {
		t.Errorf("attributes %v, want claim %s, volume %s", vb.Attrs, pvc.Name, pv.Name)
	}
	if bound := pv.Status.LastPhaseTransitionTime.Time; vb.End.Before(bound) {
		t.Errorf("the binding ends %v, before the PV turned Bound (%v)", vb.End, bound)
	}
	if vb.End.After(scheduled) {
		t.Errorf("the binding ends %v, after the scheduler's Scheduled (%v)", vb.End, scheduled)
	}
	if vb.StartBound.Observed {
		t.Error("nothing states when the scheduler began to bind a static volume: the start is not observed")
	}
	if tr.Find(phases.SpanKubeletVolumes) != nil {
		t.Error("kubelet.volumes drawn without evidence of a wait in the kubelet")
	}
	t.Logf("claim bound %v (PV Bound %v); Scheduled %v: the scheduler's 1 s poll of its bindings", vb.End, pv.Status.LastPhaseTransitionTime.Time, scheduled)
}

func eventAttr(e phases.Event, key string) any {
	for _, a := range e.Attrs {
		if a.Key == key {
			return a.Value
		}
	}
	return nil
}
