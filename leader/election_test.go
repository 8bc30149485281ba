package leader

import (
	"context"
	"sync"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
)

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

// candidate runs Run for one replica and reports its takeovers.
type candidate struct {
	started  chan [2]any // prevAlive, released
	stopped  chan struct{}
	done     chan error
	cancel   context.CancelFunc
	stopOnce sync.Once
	err      error
}

// stop ends the campaign (releasing the Lease if it holds it) and returns Run's error.
func (c *candidate) stop() error {
	c.cancel()
	c.stopOnce.Do(func() { c.err = <-c.done })
	return c.err
}

func campaign(t *testing.T, client *fake.Clientset, id string) *candidate {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := &candidate{started: make(chan [2]any, 1), stopped: make(chan struct{}), done: make(chan error, 1), cancel: cancel}
	var once sync.Once
	go func() {
		c.done <- Run(ctx, ElectionConfig{
			Leases: client.CoordinationV1(), Namespace: "readyspan", Name: "readyspan", Identity: id,
			Settle:           2 * time.Second,
			OnStartedLeading: func(prevAlive time.Time, released bool) { c.started <- [2]any{prevAlive, released} },
			OnStoppedLeading: func() { once.Do(func() { close(c.stopped) }) },
			// Short timings: a dead leader's Lease expires in a second.
			LeaseDuration: time.Second, RenewDeadline: 500 * time.Millisecond, RetryPeriod: 100 * time.Millisecond,
		})
	}()
	t.Cleanup(func() { c.stop() })
	return c
}

func (c *candidate) takeover(t *testing.T) (time.Time, bool) {
	t.Helper()
	select {
	case s := <-c.started:
		return s[0].(time.Time), s[1].(bool)
	case <-time.After(10 * time.Second):
		t.Fatal("did not win the Lease")
		return time.Time{}, false
	}
}

// Run against a Lease client: the first leader ever has no predecessor; a leader that stops
// releases the Lease, and its successor learns when; a leader that dies leaves its last
// renewal, and its successor counts back the settle time from it.
func TestRunHandsTheLeaseOver(t *testing.T) {
	client := fake.NewClientset()
	a := campaign(t, client, "a")
	if prevAlive, released := a.takeover(t); !prevAlive.IsZero() || released {
		t.Fatalf("first leader ever: previous alive %v, released %v; want none", prevAlive, released)
	}

	// a stops: it releases the Lease, and b takes over from the release.
	beforeStop := time.Now().Truncate(time.Microsecond) // a Lease's times have microseconds
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	afterStop := time.Now()
	select {
	case <-a.stopped:
	default:
		t.Fatal("a stopped without saying so")
	}
	b := campaign(t, client, "b")
	prevAlive, released := b.takeover(t)
	if !released || prevAlive.Before(beforeStop) || prevAlive.After(afterStop) {
		t.Fatalf("after a release: previous alive %v, released %v; want a's release, between %v and %v", prevAlive, released, beforeStop, afterStop)
	}

	// b dies without releasing (its Lease is left as if its process were killed); c waits for
	// the Lease to expire and counts back the settle time from b's last renewal.
	if err := b.stop(); err != nil {
		t.Fatal(err)
	}
	lastRenew := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	leases := client.CoordinationV1().Leases("readyspan")
	l, err := leases.Get(context.Background(), "readyspan", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l.Spec = coordv1.LeaseSpec{HolderIdentity: ptr.To("b"), LeaseDurationSeconds: ptr.To(int32(1)),
		AcquireTime: &metav1.MicroTime{Time: lastRenew}, RenewTime: &metav1.MicroTime{Time: lastRenew}}
	if _, err := leases.Update(context.Background(), l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := campaign(t, client, "c")
	if prevAlive, released := c.takeover(t); released || !prevAlive.Equal(lastRenew.Add(-2*time.Second)) {
		t.Fatalf("after a crash: previous alive %v, released %v; want b's last renewal less the settle time", prevAlive, released)
	}
}

// A leader SIGKILLed and restarted in the same Pod comes back under the same identity and finds
// the Lease still held by "itself", unexpired: client-go lets it take the Lease at once, and its
// predecessor is the dead process, whose last renewal counts, not "the first leader ever" (which
// would owe nothing from before it started and lose the Pods Ready while it was down).
func TestRestartedUnderTheSameIdentity(t *testing.T) {
	client := fake.NewClientset()
	lastRenew := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	if _, err := client.CoordinationV1().Leases("readyspan").Create(context.Background(), &coordv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "readyspan", Name: "readyspan"},
		Spec: coordv1.LeaseSpec{HolderIdentity: ptr.To("readyspan-7d9f-x2k4q"), LeaseDurationSeconds: ptr.To(int32(3600)),
			AcquireTime: &metav1.MicroTime{Time: lastRenew}, RenewTime: &metav1.MicroTime{Time: lastRenew}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	restarted := campaign(t, client, "readyspan-7d9f-x2k4q")
	prevAlive, released := restarted.takeover(t) // at once: an hour's Lease did not have to expire
	if released || !prevAlive.Equal(lastRenew.Add(-2*time.Second)) {
		t.Fatalf("restarted under the same identity: previous alive %v, released %v; want the dead process's last renewal less the settle time (%v)",
			prevAlive, released, lastRenew.Add(-2*time.Second))
	}
	// Its own renewals after that are not a predecessor's: stop and take over again, and the
	// predecessor is its own release.
	if err := restarted.stop(); err != nil {
		t.Fatal(err)
	}
	again := campaign(t, client, "readyspan-7d9f-x2k4q")
	if prevAlive, released := again.takeover(t); !released || !prevAlive.After(lastRenew) {
		t.Fatalf("after its own release: previous alive %v, released %v; want the release", prevAlive, released)
	}
}
