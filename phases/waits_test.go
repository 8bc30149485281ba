package phases

import (
	"testing"
	"time"
)

// waitingPod is a bare Pod created at 0 that found no node at 20 ms (the scheduler's eventTime).
func waitingPod() *Pod {
	p := &Pod{UID: "0b7e6a52-5d1c-4c36-9a53-1e0e2f5f0001", Name: "w", Namespace: "ns", Root: RootBarePod}
	p.Created.Add(ms(3), SourceWatch)
	p.SchedulingFailure = []Occurrence{{Time: StampOf(ms(20), SourceEventTime), Reason: "FailedScheduling", Message: "0/3 nodes are available: 3 Insufficient cpu.", Count: 1}}
	return p
}

// TestWaitingForKarpenterNode: Karpenter's Nominated names the autoscaler; the wait runs from
// the failed attempt to the new Node's Ready, whose kubelet-stamped second the watch narrows.
func TestWaitingForKarpenterNode(t *testing.T) {
	p := waitingPod()
	p.Autoscaler = []Occurrence{{Time: StampOf(ms(900), SourceEventName), Reason: "Nominated", Message: "Pod should schedule on: nodeclaim/default-x7k2q", Count: 1}}
	p.NewNode = &NodeSeen{Name: "ip-10-0-1-23"}
	p.NewNode.Created.Add(ms(40_000), SourceMetadata)
	p.NewNode.Ready.Add(ms(75_000), SourceStatus)
	p.NewNode.Ready.Add(ms(75_400), SourceWatch)
	p.Node = "ip-10-0-1-23"
	p.Scheduled.Add(ms(75_500), SourceEventTime)
	p.Ready.Add(ms(80_000), SourceWatch)
	tr := Build(p, Options{})
	w := tr.Find(SpanSchedulingWaitingForNode)
	if w == nil {
		t.Fatal("no waiting_for_node span")
	}
	if !w.Start.Equal(ms(20)) || !w.End.Equal(ms(75_400)) {
		t.Errorf("wait %s → %s, want the failed attempt → the Node's Ready seen", w.Start.Format(time.StampMilli), w.End.Format(time.StampMilli))
	}
	if w.Attr(AttrAutoscaler) != "karpenter" || w.Service != "karpenter" {
		t.Errorf("autoscaler %v, service %s; want karpenter", w.Attr(AttrAutoscaler), w.Service)
	}
	if got := tr.Summary.SchedulingWaits; len(got) != 1 || got[0].Kind != WaitNode || got[0].Duration != 75_380*time.Millisecond {
		t.Errorf("waits %v", got)
	}
}

// TestStillWaitingForNode: a scale-up was triggered and no node came before the trace ended:
// the wait runs to the end, which nothing observed.
func TestStillWaitingForNode(t *testing.T) {
	p := waitingPod()
	p.Autoscaler = []Occurrence{
		{Time: StampOf(ms(500), SourceEventName), Reason: "TriggeredScaleUp", Message: "pod triggered scale-up: [{pool 1->2 (max: 5)}]", Count: 1},
	}
	p.Outcome, p.End = OutcomeStuck, ms(600_000)
	tr := Build(p, Options{})
	w := tr.Find(SpanSchedulingWaitingForNode)
	if w == nil {
		t.Fatal("no waiting_for_node span")
	}
	if !w.End.Equal(ms(600_000)) || w.EndBound.Observed {
		t.Errorf("wait ends at %s (observed %v), want the trace's end, not observed", w.End.Format(time.StampMilli), w.EndBound.Observed)
	}
	if len(tr.Summary.SchedulingWaits) != 0 {
		t.Errorf("an unobserved wait was measured: %v", tr.Summary.SchedulingWaits)
	}
}

// TestNotTriggeredScaleUp: an autoscaler that declined draws no wait; its event stays on the
// scheduling phase.
func TestNotTriggeredScaleUp(t *testing.T) {
	p := waitingPod()
	p.Autoscaler = []Occurrence{{Time: StampOf(ms(500), SourceEventName), Reason: "NotTriggerScaleUp", Message: "pod didn't trigger scale-up: 1 max node group size reached", Count: 1}}
	p.Outcome, p.End = OutcomeStuck, ms(600_000)
	tr := Build(p, Options{})
	if tr.Find(SpanSchedulingWaitingForNode) != nil {
		t.Error("a wait for a node no autoscaler would add")
	}
	found := false
	for _, e := range tr.Phase(PhaseScheduling).Events() {
		found = found || e.Name == "NotTriggerScaleUp"
	}
	if !found {
		t.Error("the NotTriggerScaleUp event is not on the scheduling phase")
	}
}

// TestGateRemovalUnobserved: the watch never showed the Pod without its gate (it was bound by the
// next version readyspan saw): the gate ends, unobserved, at the scheduler's first attempt.
func TestGateRemovalUnobserved(t *testing.T) {
	p := &Pod{UID: "0b7e6a52-5d1c-4c36-9a53-1e0e2f5f0002", Name: "g", Namespace: "ns", Root: RootBarePod, Gated: true}
	p.Created.Add(ms(3), SourceWatch)
	p.Scheduled.Add(ms(4_020), SourceEventTime)
	p.Scheduled.Add(ms(4_030), SourceWatch)
	p.Ready.Add(ms(6_000), SourceWatch)
	tr := Build(p, Options{})
	g := tr.Find(SpanSchedulingGated)
	if g == nil {
		t.Fatal("no scheduling.gated span")
	}
	if !g.End.Equal(ms(4_020)) || g.EndBound.Observed || g.Attr(AttrSourceEnd) != "derived" {
		t.Errorf("gate ends at %s from %v (observed %v), want the bind, derived", g.End.Format(time.StampMilli), g.Attr(AttrSourceEnd), g.EndBound.Observed)
	}
	if len(tr.Summary.SchedulingWaits) != 0 {
		t.Errorf("an unobserved gate was measured: %v", tr.Summary.SchedulingWaits)
	}
}
