package tracer

import (
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/readyspan/readyspan/events"
)

// TestEventTimes: an event keeps the times an Event states to the nanosecond, as instants (the
// same instant as the API's, whatever location it was decoded in), and takes a time outside
// what int64 nanoseconds span, which only a malformed Event states, as none rather than as a
// wrapped-around instant.
func TestEventTimes(t *testing.T) {
	// A SuccessfulCreate as the apiserver returned it (the run8 capture), its lastTimestamp
	// varied per case.
	const captured = `{"kind":"Event","apiVersion":"v1","metadata":{"name":"sleeper-6b9c87548b.18ecc6093f7deb67",
		"namespace":"run8-slow-pull-watch","uid":"5618cb79-d7b3-42c5-9138-cc5d9c846897","resourceVersion":"432"},
		"involvedObject":{"kind":"ReplicaSet","namespace":"run8-slow-pull-watch","name":"sleeper-6b9c87548b"},
		"reason":"SuccessfulCreate","message":"Created pod: sleeper-6b9c87548b-swlx4","firstTimestamp":"2026-11-30T08:41:34Z",
		"lastTimestamp":"2026-11-30T08:41:34Z","count":1,"type":"Normal","eventTime":null}`
	recv := time.Date(2026, 11, 30, 8, 41, 34, 123456789, time.UTC)
	tests := []struct {
		name string
		last string // lastTimestamp
		want time.Time
	}{
		{"a time of today", "2026-11-30T08:41:35Z", time.Date(2026, 11, 30, 8, 41, 35, 0, time.UTC)},
		{"none", "", time.Time{}},
		{"past what int64 nanoseconds span", "3000-01-01T00:00:00Z", time.Time{}},
		{"before it", "1600-01-01T00:00:00Z", time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ev corev1.Event
			if err := json.Unmarshal([]byte(captured), &ev); err != nil {
				t.Fatal(err)
			}
			ev.LastTimestamp.Time = time.Time{}
			if tt.last != "" {
				at, err := time.Parse(time.RFC3339, tt.last)
				if err != nil {
					t.Fatal(err)
				}
				ev.LastTimestamp.Time = at.Local() // as metav1.Time decodes
			}
			e := events.FromCore(&ev, recv)
			if got := e.Last.Time(); !got.Equal(tt.want) || got.IsZero() != tt.want.IsZero() {
				t.Errorf("lastTimestamp %q kept as %v, want %v", tt.last, got, tt.want)
			}
			if got, want := e.NameTime.Time(), time.Unix(0, 0x18ecc6093f7deb67); !got.Equal(want) {
				t.Errorf("name time %v, want %v (0x18ecc6093f7deb67 ns)", got, want)
			}
			if got := e.Recv.Time(); !got.Equal(recv) {
				t.Errorf("receive time %v, want %v to the nanosecond", got, recv)
			}
			if got := e.First.Time(); !got.Equal(time.Date(2026, 11, 30, 8, 41, 34, 0, time.UTC)) {
				t.Errorf("firstTimestamp %v", got)
			}
		})
	}
}
