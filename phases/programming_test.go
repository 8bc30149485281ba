package phases

import (
	"strings"
	"testing"
	"time"
)

// servedPod is a bare Pod behind a Service, worked out on paper (ms after t):
// created 0, scheduled 100, started 500 (its one container), Ready 1000, its address ready in
// the EndpointSlice 1100.
func servedPod(t time.Time) *Pod {
	at := func(ms int, src Source) Times {
		return Times{{At: InstantOf(t.Add(time.Duration(ms) * time.Millisecond)), Source: src}}
	}
	p := &Pod{UID: "5e0c5a3c-0000-4000-8000-000000000001", Name: "web-1", Namespace: "prod", Node: "node-1",
		Root: RootBarePod, HasService: true, Addresses: []string{"10.88.77.5"}}
	p.Created = at(0, SourceWatch)
	p.Scheduled = at(100, SourceEventTime)
	c := Container{Name: "web", Image: "registry.example/web:v1", Cache: "warm"}
	c.Started = at(500, SourceEventName)
	c.ReadyAt = at(900, SourceWatch)
	p.Containers = []Container{c}
	p.ContainersReady = at(900, SourceWatch)
	p.Ready = at(1000, SourceWatch)
	p.EndpointsReady = at(1100, SourceWatch)
	return p
}

// Three nodes program the Pod 600, 800 and 700 ms after its endpoints: it serves at 1900, the
// last; the span runs from the endpoints (1100) to it and names the spread. Without the
// programming the same Pod serves at 1100.
func TestProgrammingEndsServing(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	bare := Build(servedPod(t0), Options{})
	if got := bare.Summary.Startup; got != 1100*time.Millisecond {
		t.Fatalf("without programming: startup %v, want 1.1s", got)
	}
	if bare.Find(SpanStatusProgramming) != nil {
		t.Fatal("status.programming drawn with no node reporting")
	}

	p := servedPod(t0)
	p.Programming = &Programming{Mode: "nftables", Wait: 10 * time.Second, Nodes: []NodeProgramming{
		{Node: "node-a", At: ms(1700)}, {Node: "node-b", At: ms(1900)}, {Node: "node-c", At: ms(1800)}}}
	tr := Build(p, Options{})
	if got := tr.Summary.Startup; got != 1900*time.Millisecond {
		t.Errorf("startup %v, want 1.9s (the last node's rules)", got)
	}
	if end := tr.Root().End; !end.Equal(ms(1900)) {
		t.Errorf("root ends %v after t0, want 1.9s", end.Sub(t0))
	}
	sp := tr.Find(SpanStatusProgramming)
	if sp == nil {
		t.Fatal("no status.programming")
	}
	if !sp.Start.Equal(ms(1100)) || !sp.End.Equal(ms(1900)) {
		t.Errorf("status.programming [%v, %v], want [1.1s, 1.9s]", sp.Start.Sub(t0), sp.End.Sub(t0))
	}
	want := map[string]any{AttrProgrammingNodes: int64(3), AttrProgrammingProgrammed: int64(3),
		AttrProgrammingP50: 700.0, AttrProgrammingMax: 800.0, AttrProgrammingMode: "nftables"}
	for k, v := range want {
		if got := sp.Attr(k); got != v {
			t.Errorf("%s = %v, want %v", k, got, v)
		}
	}
	if ev := sp.Events(); len(ev) != 3 || ev[0].Attrs[0].Value != "node-b" {
		t.Errorf("events %+v, want the three nodes, node-b (the slowest) first", ev)
	}
	if sp.Status == StatusError {
		t.Errorf("error on a complete programming: %s", sp.StatusMessage)
	}
}

// A node that never programs the Pod within the wait: the startup ends at the last node that
// did (1.7 s), and the span is an error that names the missing node.
func TestProgrammingIncomplete(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	p := servedPod(t0)
	p.Programming = &Programming{Wait: 10 * time.Second, Nodes: []NodeProgramming{
		{Node: "node-a", At: t0.Add(1700 * time.Millisecond)}, {Node: "node-z"}}}
	tr := Build(p, Options{})
	sp := tr.Find(SpanStatusProgramming)
	if sp == nil {
		t.Fatal("no status.programming")
	}
	if sp.Status != StatusError || !strings.Contains(sp.StatusMessage, "1 of 2 nodes") || !strings.Contains(sp.StatusMessage, "node-z") {
		t.Errorf("status %v %q, want an error naming node-z, 1 of 2", sp.Status, sp.StatusMessage)
	}
	if got := tr.Summary.Startup; got != 1700*time.Millisecond || !sp.End.Equal(t0.Add(1700*time.Millisecond)) {
		t.Errorf("startup %v, span end %v, want 1.7s (node-a, the last that programmed it)", got, sp.End.Sub(t0))
	}
	// A node whose clock is behind reports its rules before the slice existed: the span and
	// the serving never precede the endpoints.
	p = servedPod(t0)
	p.Programming = &Programming{Wait: 10 * time.Second, Nodes: []NodeProgramming{{Node: "node-a", At: t0.Add(800 * time.Millisecond)}}}
	tr = Build(p, Options{})
	if got := tr.Summary.Startup; got != 1100*time.Millisecond {
		t.Errorf("early node: startup %v, want 1.1s", got)
	}
}
