package daemon

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/readyspan/readyspan/dataplane"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
)

var lm0 = time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)

func lmAt(ms int) time.Time { return lm0.Add(time.Duration(ms) * time.Millisecond) }

// servedTrace is a bare Pod behind a Service: created 0, Ready 1000, in the EndpointSlice 1100.
func servedTrace() *phases.Trace {
	at := func(ms int, src phases.Source) phases.Times {
		return phases.Times{{At: phases.InstantOf(lmAt(ms)), Source: src}}
	}
	p := &phases.Pod{UID: "5e0c5a3c-0000-4000-8000-000000000001", Name: "web-1", Namespace: "prod", Node: "node-a",
		Root: phases.RootBarePod, HasService: true, Addresses: []string{"10.88.77.5"}}
	p.Created, p.Scheduled = at(0, phases.SourceWatch), at(100, phases.SourceEventTime)
	c := phases.Container{Name: "web", Image: "registry.example/web:v1", Started: at(500, phases.SourceEventName), ReadyAt: at(900, phases.SourceWatch)}
	p.Containers, p.ContainersReady = []phases.Container{c}, at(900, phases.SourceWatch)
	p.Ready, p.EndpointsReady = at(1000, phases.SourceWatch), at(1100, phases.SourceWatch)
	return phases.Build(p, phases.Options{})
}

func rotationChange(node string, in bool, ms int) dataplane.Report {
	return dataplane.Report{Change: &dataplane.Change{Node: node, In: in, At: lmAt(ms), Mode: dataplane.ModeIPTables,
		Endpoint: dataplane.Endpoint{Namespace: "prod", Service: "web", PortName: "http", Protocol: "tcp",
			Address: netip.MustParseAddr("10.88.77.5"), Port: 8080}}}
}

// A Pod trace waits for both nodes reporting and is drawn again with their programming; the
// correlator's copy is left as it was. With no node reporting, a trace goes on at once.
func TestLastMilePod(t *testing.T) {
	table := dataplane.NewTable(0, 0)
	var out []*phases.Trace
	now := lmAt(0)
	s := newLastMileStage(table, 10*time.Second, func(t *phases.Trace) { out = append(out, t) }, nil)
	s.now = func() time.Time { return now }

	s.pod(servedTrace())
	if len(out) != 1 || out[0].Find(phases.SpanStatusProgramming) != nil {
		t.Fatalf("no node reporting: %d traces out, want the one, unchanged", len(out))
	}
	out = nil

	for _, n := range []string{"node-a", "node-b"} {
		table.Add(dataplane.Report{Sync: &dataplane.Sync{Node: n, Mode: dataplane.ModeIPTables}}, lmAt(-1000))
	}
	orig := servedTrace()
	// The rollout tracker links the root to the Pod's rollout after the trace is built.
	toRollout := phases.Link{TraceID: phases.TraceIDFor("rollout"), SpanID: phases.SpanIDFor("rollout", "workload.rollout")}
	orig.Root().AddLink(toRollout)
	s.pod(orig)
	table.Add(rotationChange("node-a", true, 1700), lmAt(1700))
	now = lmAt(1800)
	s.step(false)
	if len(out) != 0 {
		t.Fatal("went on before node-b programmed the Pod")
	}
	table.Add(rotationChange("node-b", true, 1900), lmAt(1900))
	now = lmAt(1950)
	s.step(false)
	if len(out) != 1 {
		t.Fatalf("%d traces out once both nodes programmed it, want 1", len(out))
	}
	sp := out[0].Find(phases.SpanStatusProgramming)
	if sp == nil || !sp.End.Equal(lmAt(1900)) || out[0].Summary.Startup != 1900*time.Millisecond {
		t.Errorf("programming %+v, startup %v; want it to end at 1.9 s, the last node", sp, out[0].Summary.Startup)
	}
	if links := out[0].Root().Links(); len(links) != 1 || links[0].SpanID != toRollout.SpanID {
		t.Errorf("the redrawn root's links %+v, want the rollout's link carried over", links)
	}
	if orig.Find(phases.SpanStatusProgramming) != nil || orig.Pod.Programming != nil {
		t.Error("the correlator's trace was changed")
	}

	// node-b never programs the next Pod: it goes at the wait's end, counted incomplete.
	out = nil
	next := servedTrace()
	next.Pod.Addresses = []string{"10.88.77.9"}
	s.pod(next)
	now = lmAt(20_000)
	s.step(false)
	if len(out) != 1 || out[0].Find(phases.SpanStatusProgramming).Status != phases.StatusError {
		t.Errorf("%d out; want the trace out at its deadline, node-b named as missing", len(out))
	}
}

// A rollout waits for its old Pod to leave both nodes' rules and names the one late.
func TestLastMileRollout(t *testing.T) {
	table := dataplane.NewTable(0, 0)
	for _, n := range []string{"node-a", "node-b"} {
		table.Add(dataplane.Report{Sync: &dataplane.Sync{Node: n}}, lmAt(-1000))
	}
	var out []*rollout.Trace
	s := newLastMileStage(table, 10*time.Second, nil, func(t *rollout.Trace) { out = append(out, t) })
	now := lmAt(1000)
	s.now = func() time.Time { return now }
	r := &rollout.Rollout{Workload: rollout.Workload{Kind: "Deployment", Name: "web", Namespace: "prod", UID: "0000000c-0000-4000-8000-000000000001"},
		Kind: rollout.KindUpdate, Generation: 2, Outcome: rollout.OutcomeComplete,
		Start:    phases.Times{{At: phases.InstantOf(lmAt(0)), Source: phases.SourceWatch}},
		Complete: phases.Times{{At: phases.InstantOf(lmAt(3000)), Source: phases.SourceWatch}},
		OldPods: []rollout.OldPod{{UID: "0000000b-0000-4000-8000-000000000001", Name: "web-old", Addresses: []string{"10.88.77.5"},
			Deleted: phases.Times{{At: phases.InstantOf(lmAt(1000)), Source: phases.SourceWatch}},
			Gone:    phases.Times{{At: phases.InstantOf(lmAt(2900)), Source: phases.SourceWatch}}}}}
	s.rollout(rollout.Build(r))
	table.Add(rotationChange("node-a", false, 1500), lmAt(1500))
	table.Add(rotationChange("node-b", false, 1700), lmAt(1700))
	now = lmAt(1800)
	s.step(false)
	if len(out) != 1 {
		t.Fatalf("%d rollouts out, want 1", len(out))
	}
	if want := "web-old was still in the rules of 2 of 2 nodes 0.7 s after it was told to stop"; !strings.Contains(out[0].Summary.Sentence, want) {
		t.Errorf("sentence %q, want %q", out[0].Summary.Sentence, want)
	}
	if r.OldPods[0].Rotation != nil {
		t.Error("the tracker's rollout was changed")
	}
}
