package leader

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/readyspan/readyspan/phases"
)

func TestTakeOverExportsOnlyWhatThePreviousLeaderCouldNot(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	var l ledger
	l.keepStandby(watchTrace("before", t0.Add(-500*time.Millisecond)), t0)
	l.keepStandby(watchTrace("after", t0.Add(300*time.Millisecond)), t0.Add(time.Second))
	owed := l.takeOver(t0, nil) // the previous leader released the lease at t0
	if len(owed) != 1 || owed[0].Pod.UID != "after" {
		t.Fatalf("owed %v, want only the Pod Ready after the release", owed)
	}
	if again := l.takeOver(t0, nil); len(again) != 0 {
		t.Fatal("the buffer must be emptied by a takeover")
	}
}

// A Pod Ready before this replica started carries only the whole-second condition time: it
// counts as Ready at the end of that second, so it is exported unless the previous leader was
// alive after that.
func TestReadySeenFromStatus(t *testing.T) {
	ready := time.Date(2026, 11, 30, 10, 0, 5, 0, time.UTC)
	tr := statusTrace("u", ready)
	var l ledger
	l.keepStandby(tr, ready.Add(time.Minute))
	if owed := l.takeOver(ready.Add(500*time.Millisecond), nil); len(owed) != 1 {
		t.Fatal("a Pod Ready within the second the previous leader left is owed")
	}
	l.keepStandby(tr, ready.Add(time.Minute))
	if owed := l.takeOver(ready.Add(2*time.Second), nil); len(owed) != 0 {
		t.Fatal("a Pod Ready well before the previous leader left is not owed")
	}
}

// After a takeover, a Pod found already Ready is exported only if the previous leader could not
// have: it became Ready after that leader was last alive.
func TestOwedAfterTakeover(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	var l ledger
	if !l.owed(statusTrace("u", t0)) {
		t.Fatal("without leader election everything is owed")
	}
	l.takeOver(t0, nil)
	if l.owed(statusTrace("u", t0.Add(-5*time.Second))) || l.owed(watchTrace("w", t0.Add(-time.Second))) {
		t.Fatal("a Pod Ready before the previous leader left was exported by it (its drain ignores the settle time)")
	}
	if !l.owed(statusTrace("u", t0.Add(5*time.Second))) || !l.owed(watchTrace("w", t0.Add(time.Millisecond))) {
		t.Fatal("Pods Ready after the handover are owed")
	}
}

// The handover Lease: a Pod whose whole-second Ready straddles the release is skipped when the
// previous leader says it exported it, and owed otherwise.
func TestHandoverLease(t *testing.T) {
	ctx := context.Background()
	leases := fake.NewClientset().CoordinationV1().Leases("readyspan")
	if r, err := readHandover(ctx, leases, "readyspan-handover"); r != nil || err != nil {
		t.Fatalf("no handover yet: %v %v", r, err)
	}
	now := time.Date(2026, 11, 30, 10, 49, 24, 320000000, time.UTC)
	var old ledger
	old.noteExported("exported", now.Add(-100*time.Millisecond))
	for i := 0; i < 2; i++ { // create, then update
		if err := writeHandover(ctx, leases, "readyspan-handover", old.record(now)); err != nil {
			t.Fatal(err)
		}
	}
	prev, err := readHandover(ctx, leases, "readyspan-handover")
	if err != nil || prev == nil || len(prev.Exported) != 1 {
		t.Fatalf("read back %+v %v", prev, err)
	}
	var l ledger
	l.takeOver(now, prev.Skip())
	if l.owed(statusTrace("exported", now)) {
		t.Fatal("the previous leader exported it")
	}
	if !l.owed(statusTrace("not-exported", now)) {
		t.Fatal("Ready in the release's second and not exported: owed")
	}
	// Ready before the release, but the stopping leader had not seen it yet (its watch lags).
	lagging := statusTrace("unseen", now)
	lagging.Pod.Ready = phases.Times{{At: phases.InstantOf(now.Add(-2 * time.Second).Truncate(time.Second)), Source: phases.SourceStatus}}
	if !l.owed(lagging) {
		t.Fatal("a Pod the previous leader never exported is owed, whenever it became Ready")
	}
}

// The record keeps the newest UIDs when there are more than the annotation holds.
func TestHandoverBounded(t *testing.T) {
	ctx := context.Background()
	leases := fake.NewClientset().CoordinationV1().Leases("readyspan")
	r := Record{StoppedAt: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}
	for i := 0; i < maxHandoverUIDs+10; i++ {
		r.Exported = append(r.Exported, fmt.Sprintf("uid-%d", i))
	}
	if err := writeHandover(ctx, leases, "readyspan-handover", r); err != nil {
		t.Fatal(err)
	}
	got, err := readHandover(ctx, leases, "readyspan-handover")
	if err != nil || len(got.Exported) != maxHandoverUIDs || got.Exported[maxHandoverUIDs-1] != r.Exported[len(r.Exported)-1] {
		t.Fatalf("read back %d UIDs (%v), want the newest %d", len(got.Exported), err, maxHandoverUIDs)
	}
}
