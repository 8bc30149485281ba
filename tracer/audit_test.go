package tracer

import (
	"sort"
	"testing"
	"time"

	"github.com/readyspan/readyspan/phases"
)

// TestAuditAcrossSecond: a bare Pod's create request whose answer leaves in the second after the
// one the apiserver stamped the Pod with (creationTimestamp is whole seconds). The audit log's
// receipt and answer are the apiserver phase, to the microsecond, whatever second the answer
// falls in; a create received after the stamp's second is some other write.
func TestAuditAcrossSecond(t *testing.T) {
	// simT0 is 33.700 s past the minute: ms 295 is 33.995, ms 320 is 34.020.
	cases := []struct {
		name               string
		receivedMs, doneMs int
		createdMs          int // when the Pod is stamped (creationTimestamp is its second)
		want               time.Duration
		measured           bool
	}{
		{name: "answered in the stamp's second", receivedMs: 250, doneMs: 280, createdMs: 260, want: 30 * time.Millisecond, measured: true},
		{name: "answered in the next second", receivedMs: 290, doneMs: 320, createdMs: 295, want: 30 * time.Millisecond, measured: true},
		{name: "slow answer, two seconds on", receivedMs: 290, doneMs: 1500, createdMs: 295, want: 1210 * time.Millisecond, measured: true},
		{name: "received a second after the stamp's second", receivedMs: 1310, doneMs: 1320, createdMs: 295, measured: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t, "default")
			s.auditWrite("pods", "", "solo", "create", "kubectl/v1.37.2 (linux/amd64) kubernetes/$Format", tc.receivedMs, tc.doneMs)
			s.pod("solo", nil, nil, []container{{name: "web", image: busybox}}, tc.createdMs)
			end := happy(s, "solo", tc.doneMs+30, false, false)
			sort.SliceStable(s.deltas, func(i, j int) bool { return s.deltas[i].Recv.Before(s.deltas[j].Recv) })
			var traces []*phases.Trace
			c := New(Config{Settle: 2 * time.Second, FailAfter: 2 * time.Minute}, SinkFunc(func(tr *phases.Trace) { traces = append(traces, tr) }), nil, nil)
			for _, d := range s.deltas {
				c.Handle(d)
			}
			c.Tick(s.at(end).Add(5 * time.Second))
			if len(traces) != 1 {
				t.Fatalf("%d traces, want 1", len(traces))
			}
			api := traces[0].Phase("apiserver")
			measured := api.Attr(phases.AttrObserved) == nil
			if measured != tc.measured {
				t.Fatalf("apiserver phase measured %v, want %v (%v)", measured, tc.measured, api.Attrs)
			}
			if tc.measured && api.Duration() != tc.want {
				t.Errorf("apiserver phase %v, want the audit log's %v", api.Duration(), tc.want)
			}
		})
	}
}
