package main

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"path/filepath"
	"testing"
	"time"

	"github.com/readyspan/readyspan/phases"
)

func readyTrace(uid string, readyAt time.Time) *phases.Trace {
	p := &phases.Pod{UID: uid, Name: uid, Namespace: "default", Root: phases.RootBarePod}
	p.Created.Add(readyAt.Add(-3*time.Second), phases.SourceWatch)
	p.Ready.Add(readyAt, phases.SourceWatch)
	return phases.Build(p, phases.Options{})
}

func TestTakeOverExportsOnlyWhatThePreviousLeaderCouldNot(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	var h handover
	h.keepStandby(readyTrace("before", t0.Add(-500*time.Millisecond)), t0)
	h.keepStandby(readyTrace("after", t0.Add(300*time.Millisecond)), t0.Add(time.Second))
	owed := h.takeOver(t0, nil) // the previous leader released the lease at t0
	if len(owed) != 1 || owed[0].Pod.UID != "after" {
		t.Fatalf("owed %v, want only the Pod Ready after the release", owed)
	}
	if again := h.takeOver(t0, nil); len(again) != 0 {
		t.Fatal("the buffer must be emptied by a takeover")
	}
}

func TestStateFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state")
	if st, err := readState(path); st != nil || err != nil {
		t.Fatalf("missing state file: %v %v", st, err)
	}
	var h handover
	now := time.Now()
	h.noteExported("old", now.Add(-3*time.Minute))
	h.noteExported("a", now.Add(-time.Second))
	h.noteExported("b", now)
	if err := h.writeState(path, now); err != nil {
		t.Fatal(err)
	}
	st, err := readState(path)
	if err != nil {
		t.Fatal(err)
	}
	if !st.StoppedAt.Equal(now.UTC()) || len(st.Exported) != 2 {
		t.Fatalf("state %+v: want the stop time and the 2 recent exports", st)
	}
}

// A Pod Ready before this replica started carries only the whole-second condition time: it
// counts as Ready at the end of that second, so it is exported unless the previous leader was
// alive after that.
func TestReadySeenFromStatus(t *testing.T) {
	ready := time.Date(2026, 11, 30, 10, 0, 5, 0, time.UTC)
	p := &phases.Pod{UID: "u", Name: "u", Namespace: "default", Root: phases.RootBarePod}
	p.Created.Add(ready.Add(-3*time.Second), phases.SourceMetadata)
	p.Ready.Add(ready, phases.SourceStatus)
	tr := phases.Build(p, phases.Options{})
	var h handover
	h.keepStandby(tr, ready.Add(time.Minute))
	if owed := h.takeOver(ready.Add(500*time.Millisecond), nil); len(owed) != 1 {
		t.Fatal("a Pod Ready within the second the previous leader left is owed")
	}
	h.keepStandby(tr, ready.Add(time.Minute))
	if owed := h.takeOver(ready.Add(2*time.Second), nil); len(owed) != 0 {
		t.Fatal("a Pod Ready well before the previous leader left is not owed")
	}
}

// After a takeover, a Pod found already Ready is exported only if the previous leader could not
// have: it became Ready after that leader was last alive.
func TestOwedAfterTakeover(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	statusOnly := func(ready time.Time) *phases.Trace {
		p := &phases.Pod{UID: "u", Name: "u", Namespace: "default", Root: phases.RootBarePod}
		p.Created.Add(ready.Add(-3*time.Second), phases.SourceMetadata)
		p.Ready.Add(ready, phases.SourceStatus)
		return phases.Build(p, phases.Options{})
	}
	var h handover
	if !h.owed(statusOnly(t0)) {
		t.Fatal("without leader election everything is owed")
	}
	h.takeOver(t0, nil)
	if h.owed(statusOnly(t0.Add(-5*time.Second))) || h.owed(readyTrace("w", t0.Add(-time.Second))) {
		t.Fatal("a Pod Ready before the previous leader left was exported by it (its drain ignores the settle time)")
	}
	if !h.owed(statusOnly(t0.Add(5*time.Second))) || !h.owed(readyTrace("w", t0.Add(time.Millisecond))) {
		t.Fatal("Pods Ready after the handover are owed")
	}
}

func TestPreviousAlive(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 123456000, time.UTC)
	l := &observingLock{}
	if got, _ := l.previousAlive(2 * time.Second); !got.IsZero() {
		t.Fatal("no previous leader: zero")
	}
	l.last = resourcelock.LeaderElectionRecord{HolderIdentity: "", RenewTime: metav1.NewTime(t0)}
	if got, released := l.previousAlive(2 * time.Second); !got.Equal(t0) || !released {
		t.Fatalf("released lease: %v %v, want its final renew time", got, released)
	}
	l.last.HolderIdentity = "readyspan-abc"
	if got, released := l.previousAlive(2 * time.Second); !got.Equal(t0.Add(-2*time.Second)) || released {
		t.Fatalf("expired lease: %v %v, want its last renewal less the settle time", got, released)
	}
}

// The handover Lease: a Pod whose whole-second Ready straddles the release is skipped when the
// previous leader says it exported it, and owed otherwise.
func TestHandoverLease(t *testing.T) {
	ctx := context.Background()
	leases := fake.NewClientset().CoordinationV1().Leases("readyspan")
	if s, err := readHandover(ctx, leases, "readyspan-handover"); s != nil || err != nil {
		t.Fatalf("no handover yet: %v %v", s, err)
	}
	now := time.Date(2026, 11, 30, 10, 49, 24, 320000000, time.UTC)
	var old handover
	old.noteExported("exported", now.Add(-100*time.Millisecond))
	for i := 0; i < 2; i++ { // create, then update
		if err := writeHandover(ctx, leases, "readyspan-handover", old.snapshot(now)); err != nil {
			t.Fatal(err)
		}
	}
	prev, err := readHandover(ctx, leases, "readyspan-handover")
	if err != nil || prev == nil || len(prev.Exported) != 1 {
		t.Fatalf("read back %+v %v", prev, err)
	}
	skip := map[string]bool{}
	for _, uid := range prev.Exported {
		skip[uid] = true
	}
	var h handover
	h.takeOver(now, skip)
	statusOnly := func(uid string) *phases.Trace {
		p := &phases.Pod{UID: uid, Name: uid, Namespace: "default", Root: phases.RootBarePod}
		p.Created.Add(now.Add(-3*time.Second), phases.SourceMetadata)
		p.Ready.Add(now.Truncate(time.Second), phases.SourceStatus) // Ready within the release's second
		return phases.Build(p, phases.Options{})
	}
	if h.owed(statusOnly("exported")) {
		t.Fatal("the previous leader exported it")
	}
	if !h.owed(statusOnly("not-exported")) {
		t.Fatal("Ready in the release's second and not exported: owed")
	}
	// Ready before the release, but the stopping leader had not seen it yet (its watch lags).
	lagging := statusOnly("unseen")
	lagging.Pod.Ready = phases.Times{{Time: now.Add(-2 * time.Second).Truncate(time.Second), Source: phases.SourceStatus}}
	if !h.owed(lagging) {
		t.Fatal("a Pod the previous leader never exported is owed, whenever it became Ready")
	}
}
