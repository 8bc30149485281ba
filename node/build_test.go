package node

import (
	"strings"
	"testing"
	"time"

	"github.com/readyspan/readyspan/phases"
)

var t0 = time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)

func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

// karpenterStartup is a Node Karpenter made: its NodeClaim created at 1.9 s (seen), Launched at
// 2 s, the Node created at 7 s, Registered at 8 s, Ready at 9.4 s (seen; the kubelet's second 9 s),
// network up at 11.2 s, startup taints gone at 12.5 s, Initialized at 13 s, its two DaemonSet Pods
// Ready at 14.1 s and 15.3 s.
func karpenterStartup() *Startup {
	s := &Startup{Name: "kwok-default-x7k2q", UID: "11111111-2222-4333-8444-555555555555", Provisioner: phases.ServiceKarpenter,
		Claim: &phases.NodeClaimSeen{Name: "default-x7k2q", UID: "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee", NodePool: "default"}, Outcome: OutcomeReady}
	s.Claim.Created.Add(ms(1_000), phases.SourceMetadata)
	s.Claim.Created.Add(ms(1_900), phases.SourceWatch)
	s.Claim.Launched.Add(ms(2_000), phases.SourceStatus)
	s.Claim.Registered.Add(ms(8_000), phases.SourceStatus)
	s.Claim.Initialized.Add(ms(13_000), phases.SourceStatus)
	s.Created.Add(ms(7_000), phases.SourceMetadata)
	s.Ready.Add(ms(9_000), phases.SourceStatus)
	s.Ready.Add(ms(9_400), phases.SourceWatch)
	s.NetworkReady.Add(ms(11_200), phases.SourceWatch)
	s.TaintsRemoved.Add(ms(12_500), phases.SourceWatch)
	for i, at := range []int{14_100, 15_300} {
		p := DaemonPod{PodRef: phases.PodRef{Namespace: "kube-system", Name: "agent-" + string(rune('a'+i)), UID: "dddddddd-0000-4000-8000-00000000000" + string(rune('1'+i))}, DaemonSet: "agent"}
		p.Ready.Add(ms(at), phases.SourceWatch)
		s.DaemonPods = append(s.DaemonPods, p)
	}
	s.Waiters = []phases.PodRef{{Namespace: "ns", Name: "web-1", UID: "cccccccc-0000-4000-8000-000000000001"}}
	return s
}

// TestBuildSteps: the steps lie end to end from the NodeClaim's creation, each to its own
// boundary, the root from the decision to the last DaemonSet Pod Ready; the root links to the
// Pods that waited, each DaemonSet Pod's span to its trace.
func TestBuildSteps(t *testing.T) {
	s := karpenterStartup()
	tr := Build(s)
	if tr.TraceID != phases.TraceIDFor(s.Claim.UID) {
		t.Errorf("trace ID %s, want the NodeClaim's UID", tr.TraceID)
	}
	root := tr.Root()
	if root.Name != RootSpanName || !root.Start.Equal(ms(1_900)) || !root.End.Equal(ms(15_300)) || root.Status != phases.StatusOK {
		t.Errorf("root %s %s → %s status %v", root.Name, root.Start.Format(time.StampMilli), root.End.Format(time.StampMilli), root.Status)
	}
	if root.SpanID != RootSpanIDFor(s.Claim.UID, s.UID) {
		t.Error("the root's span ID is not the one Pods link to")
	}
	if l := root.Links(); len(l) != 1 || l[0].TraceID != phases.TraceIDFor(s.Waiters[0].UID) {
		t.Errorf("links %v, want the waiting Pod's trace", l)
	}
	want := []struct {
		name string
		end  time.Time
	}{
		{SpanLaunch, ms(2_000)}, {SpanInstance, ms(7_000)}, {SpanRegistration, ms(8_000)}, {SpanKubeletReady, ms(9_400)},
		{SpanNetwork, ms(11_200)}, {SpanStartupTaints, ms(12_500)}, {SpanInitialization, ms(13_000)}, {SpanDaemonSets, ms(15_300)},
	}
	var steps []phases.Span
	var pods int
	for _, sp := range tr.Spans[1:] {
		switch sp.ParentSpanID {
		case root.SpanID:
			steps = append(steps, sp)
		default:
			pods++
			if sp.Name != SpanDaemonPod || len(sp.Links()) != 1 {
				t.Errorf("span %s under a step, links %v", sp.Name, sp.Links())
			}
		}
	}
	if len(steps) != len(want) || pods != 2 {
		t.Fatalf("%d steps and %d DaemonSet Pods, want %d and 2", len(steps), pods, len(want))
	}
	at := root.Start
	for i, sp := range steps {
		if sp.Name != want[i].name || !sp.Start.Equal(at) || !sp.End.Equal(want[i].end) {
			t.Errorf("step %d: %s %s → %s, want %s %s → %s", i, sp.Name, sp.Start.Format(time.StampMilli), sp.End.Format(time.StampMilli),
				want[i].name, at.Format(time.StampMilli), want[i].end.Format(time.StampMilli))
		}
		if !tr.Summary.Drawn[i] || tr.Summary.Steps[i] != sp.End.Sub(sp.Start) {
			t.Errorf("summary of %s: %v drawn %v", sp.Name, tr.Summary.Steps[i], tr.Summary.Drawn[i])
		}
		at = sp.End
	}
	if tr.Summary.Duration != 13_400*time.Millisecond {
		t.Errorf("duration %v", tr.Summary.Duration)
	}
	for _, sp := range tr.Spans {
		if sp.SpanID.IsZero() || sp.StartBound.Source == 0 {
			t.Errorf("span %s without an ID or bounds", sp.Path)
		}
	}
}

// TestBuildWithoutClaim: a Node no NodeClaim made starts at its creation; a step whose boundary
// lies at or before the one before it draws nothing; a startup still waiting for a DaemonSet Pod
// draws no DaemonSet step and, stuck, ends at its End.
func TestBuildWithoutClaim(t *testing.T) {
	s := karpenterStartup()
	s.Claim, s.Provisioner = nil, ""
	s.Ready = phases.Times{{At: phases.InstantOf(ms(7_000)), Source: phases.SourceStatus}}
	s.DaemonPods[1].Ready = nil
	s.Outcome, s.End, s.Reason = OutcomeStuck, ms(600_000), "DaemonSet Pods not Ready"
	tr := Build(s)
	if tr.TraceID != phases.TraceIDFor(s.UID) {
		t.Errorf("trace ID %s, want the Node's UID", tr.TraceID)
	}
	var names []string
	for _, sp := range tr.Spans[1:] {
		names = append(names, sp.Name)
	}
	if got, want := strings.Join(names, " "), SpanNetwork+" "+SpanStartupTaints; got != want {
		t.Errorf("steps %s, want %s", got, want)
	}
	root := tr.Root()
	if !root.Start.Equal(ms(7_000)) || !root.End.Equal(ms(600_000)) || root.Status != phases.StatusError || root.EndBound.Observed {
		t.Errorf("root %s → %s status %v observed end %v", root.Start.Format(time.StampMilli), root.End.Format(time.StampMilli), root.Status, root.EndBound.Observed)
	}
	if root.Attr(phases.AttrNodeReason) != "DaemonSet Pods not Ready" || root.Attr(phases.AttrNodeOutcome) != "stuck" {
		t.Errorf("attributes %v", root.Attrs)
	}
}
