package tracer

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/watch"
)

// gate gives a Pod just created (the last delta) a scheduling gate, as the apiserver's Pod
// strategy shows it: spec.schedulingGates and PodScheduled=False, reason SchedulingGated.
func (s *sim) gate(name string) {
	p := s.pods[name]
	p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/hold"}}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonSchedulingGated,
		Message: "Scheduling is blocked due to non-empty scheduling gates", LastTransitionTime: p.CreationTimestamp}}
	s.deltas[len(s.deltas)-1].Object = p.DeepCopy()
}

// ungate removes the gates at ms by manager's Update; when it sets a field besides (a label),
// the apiserver stamps its managedFields entry.
func (s *sim) ungate(name, manager string, stamped bool, ms int) {
	p := s.pods[name]
	p.Spec.SchedulingGates = nil
	p.Generation++
	if stamped {
		p.ManagedFields = append(p.ManagedFields, metav1.ManagedFieldsEntry{Manager: manager, Operation: "Update", APIVersion: "v1", Time: ptr.To(secs(s.at(ms)))})
	}
	p.ResourceVersion = s.nextRV()
	s.emit(ResourcePods, watch.Modified, p.DeepCopy(), s.at(ms))
}

// newNode is a Node created at createdMs and Ready (its kubelet's stamp) at readyMs.
func (s *sim) newNode(name string, createdMs, readyMs int) {
	n := &corev1.Node{
		TypeMeta:   metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: s.uid("node"), ResourceVersion: s.nextRV(), CreationTimestamp: secs(s.at(createdMs)), Labels: map[string]string{"pool": "new"}},
	}
	s.emit(ResourceNodes, watch.Added, n.DeepCopy(), s.at(createdMs))
	n = n.DeepCopy()
	n.ResourceVersion = s.nextRV()
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		LastHeartbeatTime: secs(s.at(readyMs)), LastTransitionTime: secs(s.at(readyMs))}}
	n.Status.Images = []corev1.ContainerImage{{Names: []string{"registry.example/big:1"}, SizeBytes: 1 << 30}}
	s.emit(ResourceNodes, watch.Modified, n, s.at(readyMs))
}

var schedulingWaitScenarios = []scenario{
	{
		name: "scheduling-gated",
		build: func(s *sim) int {
			s.pod("gated", nil, nil, web, 0)
			s.gate("gated")
			s.ungate("gated", "gatekeeper", true, 4200)
			return happy(s, "gated", 4260, false, false)
		},
		check: func(t *testing.T, ts []*phases.Trace) {
			tr := ts[0]
			wantOutcome(t, tr, phases.OutcomeReady)
			g := tr.Find(phases.SpanSchedulingGated)
			if g == nil {
				t.Fatal("no scheduling.gated span")
			}
			// From the Pod's creation (the watch, 3 ms after) to the watch event that showed
			// the gate gone, 3 ms after the removal at 4200 ms.
			wantAt(t, "gated start", g.Start, tr.Phase(phases.PhaseScheduling).Start, 0)
			wantAt(t, "gated end", g.End, simAt(4203), 0)
			if g.Attr(phases.AttrSourceEnd) != "watch" || g.Attr(phases.AttrGatesRemovedBy) != "gatekeeper" {
				t.Errorf("gated end source %v, removed by %v; want watch, gatekeeper", g.Attr(phases.AttrSourceEnd), g.Attr(phases.AttrGatesRemovedBy))
			}
			if w := tr.Summary.SchedulingWaits; len(w) != 1 || w[0] != (phases.Wait{Kind: phases.WaitGated, Duration: 4200 * time.Millisecond}) {
				t.Errorf("scheduling waits %v, want 4.2s gated", w)
			}
		},
	},
	{
		// Nobody removed the gate: stuck, and the trace says the gate is why.
		name: "scheduling-gated-stuck",
		build: func(s *sim) int {
			s.pod("gated", nil, nil, web, 0)
			s.gate("gated")
			return 11 * 60 * 1000
		},
		check: func(t *testing.T, ts []*phases.Trace) {
			tr := ts[0]
			wantOutcome(t, tr, phases.OutcomeStuck)
			if got := tr.Root().StatusMessage; got != "stuck in scheduling: SchedulingGated" {
				t.Errorf("status %q", got)
			}
			// The SchedulingGated condition is the apiserver's, not a failed attempt.
			if n := tr.Summary.SchedulingAttempts; n != 0 || len(tr.Phase(phases.PhaseScheduling).Events()) != 0 {
				t.Errorf("%d attempts, events %v; the scheduler never tried", n, tr.Phase(phases.PhaseScheduling).Events())
			}
			g := tr.Find(phases.SpanSchedulingGated)
			if g == nil || !g.End.Equal(tr.Phase(phases.PhaseScheduling).End) || g.EndBound.Observed {
				t.Errorf("scheduling.gated %v: want it to the trace's end, not observed", g)
			}
		},
	},
	{
		name: "waiting-for-new-node",
		build: func(s *sim) int {
			s.pod("waiter", nil, nil, web, 0)
			s.schedulerEvent("waiter", "FailedScheduling", "Scheduling", "Warning", "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.", 15)
			s.coreEvent(s.podRef("waiter", ""), "cluster-autoscaler", "", "Normal", "TriggeredScaleUp", "pod triggered scale-up: [{pool-a 1->2 (max: 5)}]", 900)
			s.newNode("new-node", 2300, 6100)
			s.node = "new-node"
			return happy(s, "waiter", 6150, false, false)
		},
		check: func(t *testing.T, ts []*phases.Trace) {
			tr := ts[0]
			wantOutcome(t, tr, phases.OutcomeReady)
			w := tr.Find(phases.SpanSchedulingWaitingForNode)
			if w == nil {
				t.Fatal("no scheduling.waiting_for_node span")
			}
			wantAt(t, "wait start (the first FailedScheduling's eventTime)", w.Start, simAt(15), 0)
			wantAt(t, "wait end (the Node's Ready, seen by the watch)", w.End, simAt(6103), 0)
			for k, v := range map[string]any{phases.AttrNodeName: "new-node", phases.AttrAutoscaler: "cluster-autoscaler",
				phases.AttrNodeCreated: simAt(2303).Format(time.RFC3339Nano), phases.AttrNodeReady: simAt(6103).Format(time.RFC3339Nano)} {
				if got := w.Attr(k); got != v {
					t.Errorf("%s=%v, want %v", k, got, v)
				}
			}
			if ws := tr.Summary.SchedulingWaits; len(ws) != 1 || ws[0] != (phases.Wait{Kind: phases.WaitNode, Duration: 6088 * time.Millisecond}) {
				t.Errorf("scheduling waits %v, want 6.088s for a node", ws)
			}
			if es := w.Events(); len(es) != 1 || es[0].Name != "TriggeredScaleUp" {
				t.Errorf("waiting_for_node events %v, want the TriggeredScaleUp", es)
			}
		},
	},
	{
		// An autoscaler was asked, but the Pod found room on a node that was there.
		name: "scale-up-not-needed",
		build: func(s *sim) int {
			s.newNode("nodetest", -60000, -59000)
			s.pod("waiter", nil, nil, web, 0)
			s.schedulerEvent("waiter", "FailedScheduling", "Scheduling", "Warning", "0/1 nodes are available: 1 Insufficient cpu.", 15)
			s.coreEvent(s.podRef("waiter", ""), "cluster-autoscaler", "", "Normal", "TriggeredScaleUp", "pod triggered scale-up: [{pool-a 1->2 (max: 5)}]", 900)
			return happy(s, "waiter", 3000, false, false)
		},
		check: func(t *testing.T, ts []*phases.Trace) {
			tr := ts[0]
			if w := tr.Find(phases.SpanSchedulingWaitingForNode); w != nil {
				t.Errorf("a waiting_for_node span for a Pod bound to a node older than it")
			}
			if es := tr.Phase(phases.PhaseScheduling).Events(); len(es) != 2 {
				t.Errorf("scheduling events %v, want FailedScheduling and TriggeredScaleUp", es)
			}
		},
	},
	{
		name: "preemption",
		build: func(s *sim) int {
			s.pod("low", nil, nil, web, 0)
			s.bind("low", 20)
			s.kubeletStart("low", 50, 700)
			started := s.run("low", "web", false, false, 0, 760)
			s.running("low", "web", false, started, started+900, false) // never Ready
			s.pod("high", nil, nil, web, 3000)
			high := s.pods["high"]
			s.schedulerEvent("high", "FailedScheduling", "Scheduling", "Warning", "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.", 3010)
			s.update("low", 3012, func(p *corev1.Pod, now metav1.Time) {
				setCond(p, corev1.DisruptionTarget, corev1.ConditionTrue, secs(s.at(3012)), corev1.PodReasonPreemptionByScheduler, "default-scheduler: preempting to accommodate a higher priority pod")
			})
			s.update("low", 3014, func(p *corev1.Pod, now metav1.Time) {
				p.DeletionTimestamp = ptr.To(secs(s.at(4014)))
				p.DeletionGracePeriodSeconds = ptr.To(int64(1))
			})
			s.update("high", 3015, func(p *corev1.Pod, now metav1.Time) { p.Status.NominatedNodeName = s.node })
			s.schedulerEvent("low", "Preempted", "Preempting", "Normal", fmt.Sprintf("Preempted by pod %s on node %s", high.UID, s.node), 3016)
			s.delete("low", 4300)
			s.update("high", 4350, func(p *corev1.Pod, now metav1.Time) { p.Status.NominatedNodeName = "" })
			return happy(s, "high", 4360, false, false)
		},
		check: func(t *testing.T, ts []*phases.Trace) {
			high, low := ts[0], ts[1]
			if high.Pod.Name != "high" || low.Pod.Name != "low" {
				t.Fatalf("traces %s, %s", high.Pod.Name, low.Pod.Name)
			}
			sched := high.Phase(phases.PhaseScheduling)
			if got := sched.Attr(phases.AttrNominatedNode); got != "nodetest" {
				t.Errorf("nominated node %v, want nodetest", got)
			}
			if ls := sched.Links(); len(ls) != 1 || ls[0].TraceID != phases.TraceIDFor(low.Pod.UID) || ls[0].SpanID != phases.SpanIDFor(low.Pod.UID, phases.RootSpanName) {
				t.Errorf("the preemptor's links %v, want one to the victim's root", ls)
			}
			wantOutcome(t, low, phases.OutcomeDeleted)
			root := low.Root()
			if root.Attr(phases.AttrPreemptedBy) != "default/high" || root.Attr(phases.AttrPreemptedByUID) != high.Pod.UID {
				t.Errorf("victim preempted_by %v (%v), want default/high (%s)", root.Attr(phases.AttrPreemptedBy), root.Attr(phases.AttrPreemptedByUID), high.Pod.UID)
			}
			if ls := root.Links(); len(ls) != 1 || ls[0].TraceID != high.TraceID {
				t.Errorf("the victim's links %v, want one to the preemptor", ls)
			}
		},
	},
}

func init() { scenarios = append(scenarios, schedulingWaitScenarios...) }

// TestVictimWaitsForPreempted: a victim deleted before Ready is held until the scheduler's
// Preempted event names its preemptor (here 2 s after the Pod was gone), at most preemptedWait,
// and forgotten once exported: its deletion has come and gone.
func TestVictimWaitsForPreempted(t *testing.T) {
	for _, tc := range []struct {
		name    string
		eventMs int // 0: the event never comes
		wantBy  bool
		wantEnd int // ms the trace was exported at, by the stream's clock
	}{
		{"event after the delete", 3300, true, 3300},
		{"no event", 0, false, 3014 + 3000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t, "default")
			s.pod("low", nil, nil, web, 0)
			s.bind("low", 20)
			s.kubeletStart("low", 50, 700)
			s.pod("high", nil, nil, web, 2900)
			high := s.pods["high"]
			s.update("low", 3012, func(p *corev1.Pod, now metav1.Time) {
				setCond(p, corev1.DisruptionTarget, corev1.ConditionTrue, secs(s.at(3012)), corev1.PodReasonPreemptionByScheduler, "default-scheduler: preempting to accommodate a higher priority pod")
				p.DeletionTimestamp = ptr.To(secs(s.at(4012)))
			})
			s.delete("low", 3100)
			if tc.eventMs > 0 {
				s.schedulerEvent("low", "Preempted", "Preempting", "Normal", fmt.Sprintf("Preempted by pod %s on node %s", high.UID, s.node), tc.eventMs)
			}
			var got *phases.Trace
			var exportedAt time.Time
			var now time.Time
			c := New(Config{}, SinkFunc(func(tr *phases.Trace) {
				if tr.Pod.Name == "low" {
					got, exportedAt = tr, now
				}
			}), nil, nil)
			for _, d := range s.deltas {
				for ; now.Before(d.Recv); now = now.Add(100 * time.Millisecond) {
					if now.IsZero() {
						now = s.t0
					}
					c.Tick(now)
				}
				now = d.Recv
				c.Handle(d)
			}
			for stop := s.at(8000); now.Before(stop); now = now.Add(100 * time.Millisecond) {
				c.Tick(now)
			}
			if got == nil {
				t.Fatal("no trace for the victim")
			}
			if by := got.Root().Attr(phases.AttrPreemptedByUID); (by != nil) != tc.wantBy {
				t.Errorf("preempted_by.uid %v, want it %v", by, tc.wantBy)
			}
			if d := exportedAt.Sub(s.at(tc.wantEnd)); d < 0 || d > 200*time.Millisecond {
				t.Errorf("exported at %s, want %s", exportedAt.Format(time.StampMilli), s.at(tc.wantEnd).Format(time.StampMilli))
			}
			if _, ok := c.done[s.pods["low"].UID]; ok {
				t.Error("the victim stays in the done set after its deletion")
			}
		})
	}
}
