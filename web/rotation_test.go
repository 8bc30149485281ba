package web

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/readyspan/readyspan/internal/captures"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
)

// TestAPIRotation: a rollout of the real rolling-update capture, one old Pod's removal from two
// nodes' rules reported (the last 1.5 s after its deletion, without a preStop hook), is served
// at /rotation with that Pod's UID, the nodes and the 1.5 s, as the rollout's own
// rollout.pod.rotation span says; a rollout without reports is [], one not held 404, and the
// rollout's own view is unchanged by it.
func TestAPIRotation(t *testing.T) {
	_, rollouts := replay(t, captures.Path("rolling-update-waves"))
	var withRotation *rollout.Trace
	var victim rollout.OldPod
	for i, tr := range rollouts {
		j := slices.IndexFunc(tr.Rollout.OldPods, func(o rollout.OldPod) bool { _, ok := o.Deleted.Resolve(); return ok && !o.PreStop })
		if j < 0 || withRotation != nil {
			continue
		}
		r := *tr.Rollout
		r.OldPods = slices.Clone(r.OldPods)
		deleted, _ := r.OldPods[j].Deleted.Resolve()
		r.OldPods[j].Rotation = &phases.Programming{Wait: 10 * time.Second, Nodes: []phases.NodeProgramming{
			{Node: "node-a", At: deleted.Time().Add(300 * time.Millisecond)},
			{Node: "node-b", At: deleted.Time().Add(1500 * time.Millisecond)}}}
		withRotation, victim = rollout.Build(&r), r.OldPods[j]
		rollouts[i] = withRotation
	}
	if withRotation == nil || len(rollouts) < 2 {
		t.Fatalf("%d rollouts, none with an old Pod stopped without a preStop hook", len(rollouts))
	}
	ring := NewRing(RingConfig{})
	for _, r := range rollouts {
		ring.AddRollout(r)
	}
	srv := httptest.NewServer(NewServer(ring, ServerConfig{}))
	defer srv.Close()

	var got []RotationView
	get(t, srv, "/api/v1/rollouts/"+withRotation.Root().SpanID.String()+"/rotation", http.StatusOK, &got)
	if len(got) != 1 {
		t.Fatalf("%d rotation views, want 1: %+v", len(got), got)
	}
	g := got[0]
	if g.UID != victim.UID || g.Pod != victim.Name || g.Nodes != 2 || g.Removed != 2 || g.Late != 2 || g.AfterStopMs != 1500 || !g.Error {
		t.Errorf("rotation %+v; want %s (%s), 2 nodes, both late, 1500 ms after the stop", g, victim.Name, victim.UID)
	}
	if g.DurMs != 1500 {
		t.Errorf("the span lasts %v ms, want 1500 (deletion → last removal)", g.DurMs)
	}
	for _, r := range rollouts {
		if r == withRotation {
			continue
		}
		var none []RotationView
		get(t, srv, "/api/v1/rollouts/"+r.Root().SpanID.String()+"/rotation", http.StatusOK, &none)
		if none == nil || len(none) != 0 {
			t.Errorf("rollout %s without reports: %+v, want []", r.TraceID, none)
		}
	}
	get(t, srv, "/api/v1/rollouts/0123456789abcdef/rotation", http.StatusNotFound, nil)
	var v RolloutView
	get(t, srv, "/api/v1/rollouts/"+withRotation.Root().SpanID.String(), http.StatusOK, &v)
	if v.ID != withRotation.Root().SpanID.String() || v.TraceID != withRotation.TraceID.String() || len(v.Rows) == 0 {
		t.Errorf("the rollout's own view: %+v", v.RolloutSummary)
	}
}
