package phases

import (
	"strings"
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

// karpenterNodePod is waitingPod bound to a Node Karpenter made for it: its NodeClaim created at
// 1.9 s, Launched at 2 s, the Node created at 7 s (the instance's boot), Registered at 8 s, Ready
// at 9.4 s (the watch; the kubelet's second is 9 s), the network up at 11.2 s and the startup
// taint gone at 12.5 s; the Pod bound at 12.6 s.
func karpenterNodePod() *Pod {
	p := waitingPod()
	p.Autoscaler = []Occurrence{{Time: StampOf(ms(2_000), SourceEventSeconds), Reason: "Nominated", Message: "Pod should schedule on: nodeclaim/default-x7k2q", Count: 1}}
	n := &NodeSeen{Name: "kwok-default-x7k2q", Traced: true, Claim: &NodeClaimSeen{Name: "default-x7k2q", UID: "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee", NodePool: "default"}}
	n.Claim.Created.Add(ms(1_000), SourceMetadata)
	n.Claim.Created.Add(ms(1_900), SourceWatch)
	n.Claim.Launched.Add(ms(2_000), SourceStatus)
	n.Claim.Registered.Add(ms(8_000), SourceStatus)
	n.Claim.Initialized.Add(ms(13_000), SourceStatus)
	n.Created.Add(ms(7_000), SourceMetadata)
	n.Ready.Add(ms(9_000), SourceStatus)
	n.Ready.Add(ms(9_400), SourceWatch)
	n.NetworkReady.Add(ms(11_200), SourceWatch)
	n.TaintsRemoved.Add(ms(12_500), SourceWatch)
	p.NewNode, p.Node = n, n.Name
	p.Scheduled.Add(ms(12_600), SourceEventTime)
	p.Ready.Add(ms(15_000), SourceWatch)
	return p
}

// TestNodeStepsCoverTheWait: the new Node's steps lie inside the Pod's wait one after the other,
// each ending at its own boundary, the first at the wait's start and the last at its end: no
// gap, no overlap. The wait ends at the last of Ready, network and taints before the bind.
func TestNodeStepsCoverTheWait(t *testing.T) {
	tr := Build(karpenterNodePod(), Options{})
	w := tr.Find(SpanSchedulingWaitingForNode)
	if w == nil {
		t.Fatal("no waiting_for_node span")
	}
	if !w.End.Equal(ms(12_500)) {
		t.Errorf("wait ends at %s, want the startup taint gone (12.5 s)", w.End.Format(time.StampMilli))
	}
	if w.Attr(AttrNodeClaimName) != "default-x7k2q" || w.Attr(AttrNodePool) != "default" {
		t.Errorf("nodeclaim %v, nodepool %v", w.Attr(AttrNodeClaimName), w.Attr(AttrNodePool))
	}
	claim := "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"
	if l := w.Links(); len(l) != 1 || l[0].TraceID != TraceIDFor(claim) || l[0].SpanID != SpanIDFor(claim, NodeRootSpanName) {
		t.Errorf("links %v, want the node's trace, keyed by its NodeClaim's UID", l)
	}
	want := []struct {
		name    string
		end     time.Time
		service string
	}{
		{SpanNodeDecision, ms(1_900), ServiceKarpenter},
		{SpanNodeLaunch, ms(2_000), ServiceKarpenter},
		{SpanNodeInstance, ms(7_000), ServiceCloudProvider},
		{SpanNodeRegistration, ms(8_000), ServiceKarpenter},
		{SpanNodeKubeletReady, ms(9_400), ServiceKubelet},
		{SpanNodeNetwork, ms(11_200), ServiceCNI},
		{SpanNodeStartupTaints, ms(12_500), ServiceNodeAgents},
	}
	var steps []Span
	for _, s := range tr.Spans {
		if s.ParentSpanID == w.SpanID {
			steps = append(steps, s)
		}
	}
	if len(steps) != len(want) {
		t.Fatalf("%d steps under the wait, want %d", len(steps), len(want))
	}
	at := w.Start
	for i, s := range steps {
		if s.Name != want[i].name || !s.Start.Equal(at) || !s.End.Equal(want[i].end) || s.Service != want[i].service {
			t.Errorf("step %d: %s %s → %s (%s), want %s %s → %s (%s)", i, s.Name, s.Start.Format(time.StampMilli), s.End.Format(time.StampMilli), s.Service,
				want[i].name, at.Format(time.StampMilli), want[i].end.Format(time.StampMilli), want[i].service)
		}
		at = s.End
	}
	if !at.Equal(w.End) {
		t.Errorf("the steps end at %s, the wait at %s", at.Format(time.StampMilli), w.End.Format(time.StampMilli))
	}
}

// TestNodeStepsOutOfOrder: a KWOK node states Ready in the second it was created, before its
// NodeClaim is Registered: Ready adds no step of its own (its time lies in the registration),
// and a taint removed after the bind is not part of the wait.
func TestNodeStepsOutOfOrder(t *testing.T) {
	p := karpenterNodePod()
	n := p.NewNode
	n.Ready = nil
	n.Ready.Add(ms(7_000), SourceStatus)
	n.NetworkReady = nil
	n.TaintsRemoved = nil
	n.TaintsRemoved.Add(ms(20_000), SourceWatch)
	p.Scheduled = nil
	p.Scheduled.Add(ms(8_100), SourceEventTime)
	tr := Build(p, Options{})
	w := tr.Find(SpanSchedulingWaitingForNode)
	if w == nil {
		t.Fatal("no waiting_for_node span")
	}
	var names []string
	end := w.Start
	for _, s := range tr.Spans {
		if s.ParentSpanID == w.SpanID {
			names = append(names, s.Name)
			end = s.End
		}
	}
	if got, want := strings.Join(names, " "), strings.Join([]string{SpanNodeDecision, SpanNodeLaunch, SpanNodeInstance, SpanNodeRegistration}, " "); got != want {
		t.Errorf("steps %s, want %s", got, want)
	}
	if !end.Equal(ms(8_000)) || !w.End.After(end) && !w.End.Equal(end) {
		t.Errorf("the steps end at %s, the wait at %s", end.Format(time.StampMilli), w.End.Format(time.StampMilli))
	}
}

// TestNodeUntaintedAfterTheBind: the watch showed the startup taint gone 300 ms after the
// scheduler's bind (the Node's event came later than the Pod's); the scheduler could not bind
// before it, so the wait and its last step end at the bind.
func TestNodeUntaintedAfterTheBind(t *testing.T) {
	p := karpenterNodePod()
	p.NewNode.TaintsRemoved = Times{{At: InstantOf(ms(12_900)), Source: SourceWatch}}
	tr := Build(p, Options{})
	w := tr.Find(SpanSchedulingWaitingForNode)
	if w == nil {
		t.Fatal("no waiting_for_node span")
	}
	last := tr.Find(SpanSchedulingWaitingForNode + "/" + SpanNodeStartupTaints)
	if !w.End.Equal(ms(12_600)) || last == nil || !last.End.Equal(ms(12_600)) || last.EndBound.Source != SourceEventTime {
		t.Errorf("wait ends at %s, its startup_taints step %v; want both at the bind (12.6 s, event-time)", w.End.Format(time.StampMilli), last)
	}
}
