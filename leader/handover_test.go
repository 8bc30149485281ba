package leader

import (
	"context"
	"reflect"
	"sort"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/readyspan/readyspan/phases"
)

// The handover between two replicas, through the Gate's API and a Lease client, on a fake
// clock. The old leader leads from long before t0 and stops at t0: it releases the Lease then
// (after its handover record), or dies after its last renewal then. The new replica stands by
// from before, and takes over a second after t0.

// t0 is not a whole second, so that a Pod can be Ready in the same second, before or after it.
var t0 = time.Date(2026, 11, 30, 10, 49, 24, 320_000_000, time.UTC)

const settle = 2 * time.Second // the correlator's default settle time

type stop int

const (
	// release: drain, flush, write the handover record (at t0-100ms), release the Lease at t0.
	release stop = iota
	// releaseStaleRecord: the same, but writing the record failed; a record another leader left
	// when it stopped ten minutes earlier is still on the handover Lease.
	releaseStaleRecord
	// crash: last renewal at t0, then the process dies: no release, no record.
	crash
	// crashAfterRecord: the handover record is written at t0-100ms, but the process dies before
	// it releases the Lease (its last renewal at t0).
	crashAfterRecord
)

// pod is one Pod in a handover scenario.
type pod struct {
	uid   string
	ready time.Duration // when it turned Ready, from t0
	// oldExported: the old leader exported it (false: it died first, or its watch lagged).
	oldExported bool
	// newLag is how much later the new replica's watch saw it Ready; status says the new
	// replica knows only the condition's whole second (it found the Pod Ready).
	newLag time.Duration
	status bool
	// late: its trace completes on the new replica after the takeover (else before, while it
	// stands by).
	late bool
	want bool // the new leader exports it
}

func (p pod) newTrace() *phases.Trace {
	if p.status {
		return statusTrace(p.uid, t0.Add(p.ready))
	}
	return watchTrace(p.uid, t0.Add(p.ready+p.newLag))
}

// replica is one readyspan process: its Gate, and the lock it campaigns with.
type replica struct {
	gate *Gate
	rec  *recorder
	lock *observingLock
}

func newReplica(client *fake.Clientset, clk *testingclock.FakePassiveClock, id string) *replica {
	rec := newRecorder()
	return &replica{
		gate: New(Config{Elected: true, Leases: client.CoordinationV1().Leases("readyspan"), Lease: "readyspan", Sink: rec, Metrics: rec, Clock: clk}),
		rec:  rec,
		lock: &observingLock{Interface: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: "readyspan", Name: "readyspan"},
			Client:     client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: id},
		}},
	}
}

// hold writes the election record as client-go does: holder "" and a 1s duration is a release.
func (r *replica) hold(t *testing.T, holder string, at time.Time) {
	t.Helper()
	ctx := context.Background()
	rec := resourcelock.LeaderElectionRecord{HolderIdentity: holder, LeaseDurationSeconds: 15, AcquireTime: metav1.NewTime(at), RenewTime: metav1.NewTime(at)}
	if holder == "" {
		rec.LeaseDurationSeconds = 1
	}
	if _, _, err := r.lock.Get(ctx); err != nil {
		if err := r.lock.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := r.lock.Update(ctx, rec); err != nil {
		t.Fatal(err)
	}
}

// wins is the new replica winning the Lease: what Run's OnStartedLeading does.
func (r *replica) wins(t *testing.T) {
	t.Helper()
	if _, _, err := r.lock.Get(context.Background()); err != nil {
		t.Fatal(err)
	}
	prevAlive, released := r.lock.previousAlive(settle)
	r.gate.TakeOver(context.Background(), prevAlive, released)
}

// handOver plays a scenario and checks what the new leader exports and counts.
func handOver(t *testing.T, how stop, pods []pod) {
	t.Helper()
	ctx := context.Background()
	client := fake.NewClientset()
	clk := testingclock.NewFakePassiveClock(t0.Add(-10 * time.Minute))
	old := newReplica(client, clk, "old")
	old.hold(t, "old", clk.Now())
	old.gate.TakeOver(ctx, time.Time{}, false) // the first leader ever
	if how == releaseStaleRecord {
		var all []string
		for _, p := range pods {
			all = append(all, p.uid)
		}
		if err := writeHandover(ctx, client.CoordinationV1().Leases("readyspan"), "readyspan-handover", Record{StoppedAt: clk.Now(), Exported: all}); err != nil {
			t.Fatal(err)
		}
	}
	clk.SetTime(t0.Add(-5 * time.Minute))
	fresh := newReplica(client, clk, "new")
	if _, _, err := fresh.lock.Get(ctx); err != nil { // it sees who leads
		t.Fatal(err)
	}

	sorted := append([]pod(nil), pods...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].ready < sorted[j].ready })
	for _, p := range sorted {
		clk.SetTime(t0.Add(p.ready))
		if p.oldExported {
			old.gate.Offer(watchTrace(p.uid, t0.Add(p.ready)))
		}
		if !p.late {
			fresh.gate.Offer(p.newTrace())
		}
	}
	if got := old.rec.exported(); len(got) != count(pods, func(p pod) bool { return p.oldExported }) {
		t.Fatalf("the old leader exported %v", got)
	}

	switch how {
	case release, releaseStaleRecord:
		clk.SetTime(t0.Add(-100 * time.Millisecond))
		if how == release {
			if err := old.gate.Handover(ctx); err != nil {
				t.Fatal(err)
			}
		}
		old.hold(t, "", t0)
		old.gate.StepDown()
	case crash, crashAfterRecord:
		old.hold(t, "old", t0)
		if how == crashAfterRecord {
			clk.SetTime(t0.Add(-100 * time.Millisecond))
			if err := old.gate.Handover(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}

	clk.SetTime(t0.Add(time.Second))
	fresh.wins(t)
	for _, p := range sorted {
		if p.late {
			clk.SetTime(t0.Add(p.ready + settle))
			fresh.gate.Offer(p.newTrace())
		}
	}

	var want []string
	for _, p := range pods {
		if p.want {
			want = append(want, p.uid)
		}
	}
	sort.Strings(want)
	if got := fresh.rec.exported(); !reflect.DeepEqual(got, want) {
		t.Errorf("the new leader exported %v, want %v", got, want)
	}
	if got, want := fresh.rec.drops("not_leader"), count(pods, func(p pod) bool { return !p.late }); got != want {
		t.Errorf("not_leader drops: %d, want %d (every trace offered while standing by)", got, want)
	}
	if got, want := fresh.rec.drops("exported_by_previous_leader"), count(pods, func(p pod) bool { return p.late && !p.want }); got != want {
		t.Errorf("exported_by_previous_leader drops: %d, want %d (every late trace not owed)", got, want)
	}
	if !fresh.gate.Leading() || !fresh.rec.leading() {
		t.Error("the new replica does not lead after taking over")
	}
}

func count(pods []pod, f func(pod) bool) int {
	n := 0
	for _, p := range pods {
		if f(p) {
			n++
		}
	}
	return n
}

// A clean release: the old leader exports A and B, drains, writes {A, B}, releases. The new
// leader, which buffered A, B and C, exports only C, and then what turns Ready after.
func TestCleanRelease(t *testing.T) {
	tests := []struct {
		name string
		how  stop
		pods []pod
	}{
		{"handover record read", release, []pod{
			{uid: "A", ready: -30 * time.Second, oldExported: true, want: false},
			{uid: "B", ready: -time.Second, oldExported: true, newLag: 10 * time.Millisecond, want: false}, // drained
			{uid: "C", ready: 300 * time.Millisecond, want: true},                                          // Ready after the release
			// The old leader's watch lagged: it never saw this one. Only its record can say so.
			{uid: "unseen", ready: -1500 * time.Millisecond, want: true},
			{uid: "B-late", ready: -500 * time.Millisecond, oldExported: true, late: true, want: false},
			{uid: "D-late", ready: 2 * time.Second, late: true, want: true},
		}},
		// Without a current record (its write failed; the one on the Lease is another leader's,
		// ten minutes old) the release time decides: the lagging Pod is lost.
		{"stale handover record", releaseStaleRecord, []pod{
			{uid: "A", ready: -30 * time.Second, oldExported: true, want: false},
			{uid: "B", ready: -time.Second, oldExported: true, newLag: 10 * time.Millisecond, want: false},
			{uid: "C", ready: 300 * time.Millisecond, want: true},
			{uid: "unseen", ready: -1500 * time.Millisecond, want: false},
			{uid: "B-late", ready: -500 * time.Millisecond, oldExported: true, late: true, want: false},
			{uid: "D-late", ready: 2 * time.Second, late: true, want: true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { handOver(t, tt.how, tt.pods) })
	}
}

// A leader that dies without releasing: the new leader exports every trace whose Ready it saw
// after the old leader's last renewal less the settle time. The documented bound: what the old
// leader exported in that window (Pods Ready in the settle time before its last renewal, or
// whose whole-second Ready ends in it) is exported twice, with the same IDs; nothing else is.
func TestCrashWithoutRelease(t *testing.T) {
	pods := []pod{
		{uid: "long-before", ready: -10 * time.Second, oldExported: true, want: false},
		{uid: "window-start", ready: -settle, oldExported: true, want: false},
		{uid: "window-dup", ready: -settle + time.Millisecond, oldExported: true, want: true},
		{uid: "window-dup-late", ready: -time.Second, oldExported: true, late: true, want: true},
		// Its whole second, 22s, ends after t0-settle (22.320s): counted as in the window.
		{uid: "status-dup", ready: -2300 * time.Millisecond, oldExported: true, status: true, want: true},
		{uid: "status-before", ready: -3400 * time.Millisecond, oldExported: true, status: true, want: false},
		{uid: "settling", ready: -time.Second, want: true}, // waiting its settle time when the leader died
		{uid: "after", ready: 500 * time.Millisecond, want: true},
		{uid: "after-late", ready: 3 * time.Second, late: true, want: true},
	}
	for _, how := range []struct {
		name string
		how  stop
	}{
		{"no record", crash},
		// A record written but not followed by a release may not be the last word: ignored.
		{"record without release", crashAfterRecord},
	} {
		t.Run(how.name, func(t *testing.T) {
			handOver(t, how.how, pods)
			var dups []string
			for _, p := range pods {
				if p.oldExported && p.want {
					dups = append(dups, p.uid)
					if seen := readySeen(p.newTrace()); !seen.After(t0.Add(-settle)) || seen.After(t0) {
						t.Errorf("%s exported twice, seen Ready at %v: outside (last renewal - settle, last renewal]", p.uid, seen)
					}
				}
			}
			if want := []string{"window-dup", "window-dup-late", "status-dup"}; !reflect.DeepEqual(dups, want) {
				t.Errorf("duplicates %v, want exactly %v", dups, want)
			}
		})
	}
}

// A Ready second straddling the release (t0 is 24.320s): with the record, a Pod the old leader
// exported is not exported again and one it did not is; without it, every such Pod is exported
// (a duplicate rather than a loss: the whole second counts as after the release).
func TestReadySecondStraddlingRelease(t *testing.T) {
	tests := []struct {
		name string
		how  stop
		pods []pod
	}{
		{"handover record read", release, []pod{
			{uid: "exported", ready: -100 * time.Millisecond, status: true, oldExported: true, want: false},
			{uid: "exported-late", ready: -200 * time.Millisecond, status: true, oldExported: true, late: true, want: false},
			{uid: "after-release", ready: 200 * time.Millisecond, status: true, want: true},
			{uid: "never-seen", ready: -200 * time.Millisecond, status: true, want: true},
			// The old leader saw it before the release, the new one after (its watch lagged).
			{uid: "watch-lag", ready: -10 * time.Millisecond, newLag: 30 * time.Millisecond, oldExported: true, want: false},
		}},
		{"handover record lost", releaseStaleRecord, []pod{
			{uid: "exported", ready: -100 * time.Millisecond, status: true, oldExported: true, want: true},
			{uid: "exported-late", ready: -200 * time.Millisecond, status: true, oldExported: true, late: true, want: true},
			{uid: "after-release", ready: 200 * time.Millisecond, status: true, want: true},
			{uid: "never-seen", ready: -200 * time.Millisecond, status: true, want: true},
			{uid: "watch-lag", ready: -10 * time.Millisecond, newLag: 30 * time.Millisecond, oldExported: true, want: true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { handOver(t, tt.how, tt.pods) })
	}
}
