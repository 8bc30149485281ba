package tracer

import (
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/watch"
)

// Events from an initial list (no receive time) about Pods readyspan never traces (Ready before
// it started, or never seen) are held like any orphan, then let go orphanAfter later: a restart
// into a full cluster lists the last hour of Events, and before, those waited for ever.
func TestInitialOrphansAge(t *testing.T) {
	deltas, err := Kinds.LoadRecording(filepath.Join("testdata", "real-node", "run8-slow-pull-watch"))
	if err != nil {
		t.Fatal(err)
	}
	var aboutPod, created *watch.Delta // a kubelet Event about a Pod, a replicaset controller's SuccessfulCreate
	for i := range deltas {
		e, ok := deltas[i].Object.(*corev1.Event)
		switch {
		case !ok:
		case aboutPod == nil && e.InvolvedObject.Kind == "Pod":
			aboutPod = &deltas[i]
		case created == nil && e.InvolvedObject.Kind == "ReplicaSet" && e.Reason == "SuccessfulCreate":
			created = &deltas[i]
		}
	}
	if aboutPod == nil || created == nil {
		t.Fatal("the recording has no Pod Event or no SuccessfulCreate")
	}
	c := New(Config{}, SinkFunc(func(*phases.Trace) { t.Error("no Pod, no trace") }), nil, nil)
	for _, d := range []*watch.Delta{aboutPod, created} {
		initial := *d
		initial.Type, initial.Initial, initial.Recv = watch.Added, true, time.Time{}
		c.Handle(initial)
	}
	held := func() (pending, byName int) { return c.pendingCount, len(c.createdBy) }
	if p, n := held(); p != 1 || n != 1 {
		t.Fatalf("held %d pending events and %d SuccessfulCreate, want 1 and 1", p, n)
	}
	start := time.Date(2026, 12, 1, 17, 0, 0, 0, time.UTC)
	for _, step := range []struct {
		at   time.Duration // after the first tick
		want int           // of each kind still held
	}{
		{0, 1},                          // the first prune that sees them starts their age
		{orphanAfter, 1},                // a Pod that shows up now still gets them
		{orphanAfter + 2*pruneEvery, 0}, // then they go
	} {
		c.Tick(start.Add(step.at))
		if p, n := held(); p != step.want || n != step.want || len(c.pendingEvents) != step.want {
			t.Errorf("%s after the first tick: %d pending (%d Pods), %d SuccessfulCreate held, want %d of each", step.at, p, len(c.pendingEvents), n, step.want)
		}
	}
}
