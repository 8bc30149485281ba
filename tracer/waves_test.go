package tracer

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/readyspan/readyspan/node"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/watch"
)

// TestWaveMatchedToItsOwnStep replays the timing of issue 22's rolling update (make demo's web:
// 3 replicas, maxSurge 1, maxUnavailable 0): a wave every 2.02 s, each Pod created 9 ms after
// its ReplicaSet's scale-up and exported after the next scale-up was seen. The Pod of wave 1 is
// created at …35.770 (creationTimestamp …35) and the next step stamped at …37.791
// (firstTimestamp …37): whole-second stamps two seconds apart, as close as a Pod's creation and
// the next wave's step come, and close enough to match the Pod to the next wave's step, which
// put its creation 2 s before its cause, marked its trace inconsistent and left it out of the
// histograms. Each Pod's controllers.deployment span must end at its own step, the nanosecond of
// that step's Event name.
func TestWaveMatchedToItsOwnStep(t *testing.T) {
	const waves = 3
	s := newSim(t, "default")
	dep := s.deploymentOf("web", waves, 0)
	first := dep.DeepCopy()
	first.Spec.Replicas = ptr.To(int32(1))
	rs := s.replicaSet(first, "new", 5) // "Scaled up replica set web-new from 0 to 1" at 6 ms
	steps := []int{6}
	var created []int
	at := 40
	for i := 0; i < waves; i++ {
		name := fmt.Sprintf("web-new-%d", i)
		if i > 0 {
			// The deployment controller scales the ReplicaSet up, then says so.
			scaled := rs.DeepCopy()
			scaled.Spec.Replicas = ptr.To(int32(i + 1))
			scaled.ResourceVersion = s.nextRV()
			s.emit(ResourceReplicaSets, watch.Modified, scaled, s.at(at))
			s.workloadEvent(dep, fmt.Sprintf("Scaled up replica set web-new from %d to %d", i, i+1), at+1)
			steps = append(steps, at+1)
			at += 10
		}
		s.pod(name, rs, nil, []container{{name: "web", image: "busybox:1", readiness: true}}, at)
		created = append(created, at)
		s.bind(name, at+15)
		s.kubeletStart(name, at+30, at+300)
		st := s.run(name, "web", false, false, 0, at+320)
		s.running(name, "web", false, st, st+10, false)
		s.ready(name, at+2000)
		at += 2020
	}
	if gap := simAt(steps[2]).Truncate(time.Second).Sub(simAt(created[1]).Truncate(time.Second)); gap != 2*time.Second {
		t.Fatalf("wave 2's step is %v after wave 1's Pod in whole seconds, not the 2 s of the issue", gap)
	}

	var traces []*phases.Trace
	// Exported 2 s after Ready (readyspan run's settle): after the next wave's step is seen.
	c := New(Config{Settle: 2 * time.Second}, SinkFunc(func(tr *phases.Trace) { traces = append(traces, tr) }), nil, nil)
	last := feed(c, s.deltas)
	c.Tick(last.Add(time.Minute))
	if len(traces) != waves {
		t.Fatalf("%d traces, want %d", len(traces), waves)
	}
	for _, tr := range traces {
		var wave int
		if _, err := fmt.Sscanf(tr.Pod.Name, "web-new-%d", &wave); err != nil {
			t.Fatal(err)
		}
		want := simAt(steps[wave])
		dep := tr.Find("controllers.deployment")
		if dep == nil {
			t.Fatalf("%s: no controllers.deployment span", tr.Pod.Name)
		}
		if !dep.End.Equal(want) {
			t.Errorf("%s: controllers.deployment ends at %s, its own step (wave %d) at %s", tr.Pod.Name,
				dep.End.UTC().Format(time.StampMilli), wave, want.UTC().Format(time.StampMilli))
		}
		if len(tr.Summary.Inconsistencies) > 0 {
			t.Errorf("%s: inconsistent: %q", tr.Pod.Name, tr.Summary.Inconsistencies)
		}
		if !tr.Summary.PhaseObserved[slices.Index(phases.Phases, phases.PhaseControllers)] || tr.Summary.Startup == 0 {
			t.Errorf("%s: left out of the histograms: %+v", tr.Pod.Name, tr.Summary)
		}
	}
}

// TestReplacementNotFromTheScaleUp: a Pod the ReplicaSet creates to replace one deleted a minute
// after its scale-up was made by the loss, not by the scale-up, whose one Pod was made and traced
// already: its controllers phase is the ReplicaSet's alone, not a Deployment change a minute
// before its creation.
func TestReplacementNotFromTheScaleUp(t *testing.T) {
	s := newSim(t, "default")
	dep := s.deploymentOf("web", 1, 0)
	rs := s.replicaSet(dep, "new", 5) // "Scaled up replica set web-new from 0 to 1" at 6 ms
	start := func(name string, at int) {
		s.pod(name, rs, nil, []container{{name: "web", image: "busybox:1"}}, at)
		s.bind(name, at+15)
		s.kubeletStart(name, at+30, at+300)
		st := s.run(name, "web", false, false, 0, at+320)
		s.running(name, "web", false, st, st+10, true)
		s.ready(name, st+20)
	}
	start("web-new-a", 40)
	s.delete("web-new-a", 60_000)
	start("web-new-b", 60_020)

	traces := map[string]*phases.Trace{}
	c := New(Config{}, SinkFunc(func(tr *phases.Trace) { traces[tr.Pod.Name] = tr }), nil, nil)
	last := feed(c, s.deltas)
	c.Tick(last.Add(time.Minute))
	a, b := traces["web-new-a"], traces["web-new-b"]
	if a == nil || b == nil {
		t.Fatalf("traces of %v, want both Pods", traces)
	}
	if sp := a.Find("controllers.deployment"); sp == nil || !sp.End.Equal(simAt(6)) {
		t.Errorf("the scale-up's own Pod: controllers.deployment %v, want it to end at the step (%s)", sp, simAt(6).UTC().Format(time.StampMilli))
	}
	if sp := b.Find("controllers.deployment"); sp != nil {
		t.Errorf("the replacement has a controllers.deployment span, %s to %s, ending at the scale-up of its predecessor",
			sp.Start.UTC().Format(time.StampMilli), sp.End.UTC().Format(time.StampMilli))
	}
	if b.Pod.Root != phases.RootOf("ReplicaSet") || b.Find("controllers.replicaset") == nil {
		t.Fatalf("the replacement's root is %q, want the ReplicaSet's", b.Pod.Root)
	}
	// It replaces web-new-a: its root links to that Pod's trace and says why it went, and the
	// ReplicaSet's step starts at the deletion, as the watch received it (the sim's lag, 3 ms).
	root := b.Root()
	var replaced []phases.Link
	for _, l := range root.Links() {
		if len(l.Attrs) > 0 && l.Attrs[0] == (phases.Attr{Key: phases.AttrLinkRelation, Value: "replaces"}) {
			replaced = append(replaced, l)
		}
	}
	if len(replaced) != 1 || replaced[0].TraceID != a.TraceID || replaced[0].SpanID != a.Root().SpanID {
		t.Errorf("the replacement links to %v, want one to the root of web-new-a's trace", root.Links())
	}
	if p, why := root.Attr(phases.AttrReplacesPod), root.Attr(phases.AttrReplacesWhy); p != "web-new-a" || why != "deleted" {
		t.Errorf("the replacement replaces %v (%v), want web-new-a (deleted)", p, why)
	}
	sp := b.Find(phases.SpanControllersReplicaSet)
	if deleted := simAt(60_000).Add(s.watchLag); !sp.Start.Equal(deleted) || sp.Attr(phases.AttrCause) != "replacement" {
		t.Errorf("controllers.replicaset starts at %s (cause %v), want the deletion seen at %s (replacement)",
			sp.Start.UTC().Format(time.StampMilli), sp.Attr(phases.AttrCause), deleted.UTC().Format(time.StampMilli))
	}
}

// TestReplacementOfADisruptedPod: Karpenter evicts a Pod to consolidate its node away
// (`Evicted pod: Underutilized`, its Event about the Pod, which may come before or after the
// Pod's deletion is seen); the Pod the ReplicaSet makes in its place names the cause, the
// autoscaler and the node, and links to that node's startup trace, which readyspan traced.
func TestReplacementOfADisruptedPod(t *testing.T) {
	for _, eventFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("event first %v", eventFirst), func(t *testing.T) {
			s := newSim(t, "default")
			n1 := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: s.node, UID: "11111111-2222-4333-8444-555555555555", CreationTimestamp: secs(s.at(1))},
				Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: secs(s.at(1))}}}}
			s.emit(ResourceNodes, watch.Added, n1, s.at(2))
			dep := s.deploymentOf("web", 1, 0)
			rs := s.replicaSet(dep, "new", 5)
			start := func(name string, at int) {
				s.pod(name, rs, nil, []container{{name: "web", image: "busybox:1"}}, at)
				s.bind(name, at+15)
				s.kubeletStart(name, at+30, at+300)
				st := s.run(name, "web", false, false, 0, at+320)
				s.running(name, "web", false, st, st+10, true)
				s.ready(name, st+20)
			}
			start("web-new-a", 40)
			evicted := func() {
				s.coreEvent(s.podRef("web-new-a", ""), "karpenter", "", corev1.EventTypeNormal, "Evicted", "Evicted pod: Underutilized", 60_001)
			}
			if eventFirst {
				evicted()
			}
			s.delete("web-new-a", 60_002)
			if !eventFirst {
				evicted()
			}
			start("web-new-b", 60_020)

			traces := map[string]*phases.Trace{}
			c := New(Config{Nodes: NodeSinkFunc(func(*node.Trace) {})}, SinkFunc(func(tr *phases.Trace) { traces[tr.Pod.Name] = tr }), nil, nil)
			last := feed(c, s.deltas)
			c.Tick(last.Add(time.Minute))
			b := traces["web-new-b"]
			if b == nil {
				t.Fatalf("no trace of the replacement: %v", traces)
			}
			root := b.Root()
			for key, want := range map[string]any{phases.AttrReplacesPod: "web-new-a", phases.AttrReplacesDisruption: "Underutilized",
				phases.AttrReplacesDisruptedBy: "karpenter", phases.AttrReplacesNode: s.node} {
				if got := root.Attr(key); got != want {
					t.Errorf("%s = %v, want %v", key, got, want)
				}
			}
			found := false
			for _, l := range root.Links() {
				found = found || l.TraceID == node.TraceIDFor("", string(n1.UID)) && len(l.Attrs) > 0 && l.Attrs[0].Value == phases.LinkDisruptedNode
			}
			if !found {
				t.Errorf("no link to the node's startup trace in %v", root.Links())
			}
		})
	}
}
