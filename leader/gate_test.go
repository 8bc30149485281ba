package leader

import (
	"context"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/readyspan/readyspan/phases"
)

// Without leader election the Gate exports everything, and leaves no handover record.
func TestGateWithoutElection(t *testing.T) {
	client := fake.NewClientset()
	rec := newRecorder()
	g := New(Config{Leases: client.CoordinationV1().Leases("readyspan"), Lease: "readyspan", Sink: rec, Metrics: rec})
	g.Offer(watchTrace("a", t0))
	if !reflect.DeepEqual(rec.exported(), []string{"a"}) || !rec.leading() {
		t.Fatalf("exported %v, leader metric %v: want everything, and leading", rec.exported(), rec.leader)
	}
	if err := g.Handover(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoordinationV1().Leases("readyspan").Get(context.Background(), "readyspan-handover", metav1.GetOptions{}); err == nil {
		t.Fatal("a handover record without leader election")
	}
}

// A leader that loses the Lease stands by again: it exports nothing more, keeps what it would
// have exported, and, not leading, leaves no handover record when it stops.
func TestGateStepsDown(t *testing.T) {
	client := fake.NewClientset()
	rec := newRecorder()
	clk := testingclock.NewFakePassiveClock(t0)
	g := New(Config{Elected: true, Leases: client.CoordinationV1().Leases("readyspan"), Lease: "readyspan", Sink: rec, Metrics: rec, Clock: clk})
	if g.Leading() || rec.leading() {
		t.Fatal("an elected Gate starts as a standby")
	}
	g.TakeOver(context.Background(), time.Time{}, false)
	clk.SetTime(t0.Add(time.Second))
	g.Offer(watchTrace("a", t0.Add(time.Second)))
	g.StepDown()
	g.StepDown() // idempotent
	g.Offer(watchTrace("b", t0.Add(2*time.Second)))
	if !reflect.DeepEqual(rec.exported(), []string{"a"}) || rec.leading() || rec.drops("not_leader") != 1 {
		t.Fatalf("exported %v, leader metric %v, not_leader drops %d: want only what it exported while leading", rec.exported(), rec.leader, rec.drops("not_leader"))
	}
	if err := g.Handover(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoordinationV1().Leases("readyspan").Get(context.Background(), "readyspan-handover", metav1.GetOptions{}); err == nil {
		t.Fatal("a standby wrote a handover record")
	}
}

// blockingSink holds the first export until released, to catch a trace offered meanwhile.
type blockingSink struct {
	*recorder
	first, release chan struct{}
}

func (s *blockingSink) Export(t *phases.Trace) {
	select {
	case <-s.first:
	default:
		close(s.first)
		<-s.release
	}
	s.recorder.Export(t)
}

// A trace offered while a takeover exports the buffer waits for it, then is exported: it falls
// neither in the buffer already emptied nor out of the sink.
func TestTakeOverLosesNoConcurrentTrace(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(t0)
	sink := &blockingSink{recorder: newRecorder(), first: make(chan struct{}), release: make(chan struct{})}
	g := New(Config{Elected: true, Sink: sink, Metrics: sink.recorder, Clock: clk})
	clk.SetTime(t0.Add(time.Second))
	g.Offer(watchTrace("buffered", t0.Add(time.Second)))
	go g.TakeOver(context.Background(), time.Time{}, false)
	<-sink.first // the takeover is exporting the buffer
	offered := make(chan struct{})
	go func() {
		g.Offer(watchTrace("concurrent", t0.Add(2*time.Second)))
		close(offered)
	}()
	select {
	case <-offered:
		t.Fatal("a trace was offered while the takeover was exporting the buffer: it went to the standby buffer")
	case <-time.After(50 * time.Millisecond):
	}
	close(sink.release)
	<-offered
	if got := sink.exported(); !reflect.DeepEqual(got, []string{"buffered", "concurrent"}) {
		t.Fatalf("exported %v, want the buffered trace and the concurrent one", got)
	}
}
