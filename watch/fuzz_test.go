package watch_test

import (
	"bytes"
	"testing"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/watch"
)

// The fuzz targets here cover the recordings, input readyspan does not control (a bug report
// from anyone): each reader must return an error or a counted skip, never panic, and never keep
// more than it was given, and nothing it returns may make the correlator panic. Seeds are in
// testdata/fuzz/<target>.

// FuzzReadWatch feeds arbitrary bytes as a recorded watch stream.
func FuzzReadWatch(f *testing.F) {
	f.Add([]byte(`{"type":"ADDED","object":{"metadata":{"name":"p","uid":"u","resourceVersion":"5"}},"recv":"2026-01-02T03:04:05.123456789Z"}`+"\n"), uint8(0))
	f.Add([]byte(`{"type":"MODIFIED","object":{"metadata":{"name":"p"}},"recv":"0001-01-01T00:00:00Z","initial":true}`+"\n"+`{"type":"BOOKMARK"}`), uint8(1))
	f.Add([]byte(`{"type":"DELETED","object":{"involvedObject":{"kind":"Pod","uid":"x"},"reason":"Pulled","message":"Container image \"a\" already present on machine"}}`), uint8(8))
	f.Add([]byte(`{"type":"ADDED","object":{"metadata":{"name":1}}}`+"\n"+`{"type":"NOPE","object":{}}`+"\n{"), uint8(0))
	f.Add([]byte(`{"type":"ADDED","object":{"spec":{"containers":[{"name":"a"},{"name":"a"}]}},"recv":"9999-12-31T23:59:59Z"}`), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, which uint8) {
		order := tracer.Kinds.SnapshotOrder()
		s := order[int(which)%len(order)]
		lines := bytes.Count(data, []byte("\n")) + 1
		deltas, problems := watch.ReadWatch(tracer.Kinds, bytes.NewReader(data), s, "watch.jsonl")
		if len(deltas)+len(problems) > lines+1 {
			t.Fatalf("%d deltas and %d problems from %d lines", len(deltas), len(problems), lines)
		}
		for _, p := range problems {
			if !safeText(p.String()) {
				t.Fatalf("problem is not one line of printable text: %q", p)
			}
		}
		for _, d := range deltas {
			if d.Object == nil {
				t.Fatalf("delta without an object")
			}
		}
		replayFuzzed(t, deltas)
	})
}

// FuzzReadList feeds arbitrary bytes as a recorded List snapshot.
func FuzzReadList(f *testing.F) {
	f.Add([]byte(`{"kind":"PodList","items":[{"metadata":{"name":"p","uid":"u"},"status":{"conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2026-01-02T03:04:05Z"}]}}]}`), uint8(9))
	f.Add([]byte(`{"items":[null,{}]}`), uint8(0))
	f.Add([]byte(`{"items":{}}`), uint8(3))
	f.Add([]byte(`[]`), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, which uint8) {
		order := tracer.Kinds.SnapshotOrder()
		s := order[int(which)%len(order)]
		deltas, problems, err := watch.ReadList(tracer.Kinds, data, s, "list.json")
		if err != nil {
			if !safeText(err.Error()) {
				t.Fatalf("error is not one line of printable text: %q", err)
			}
			return
		}
		for _, p := range problems {
			if !safeText(p.String()) {
				t.Fatalf("problem is not one line of printable text: %q", p)
			}
		}
		for _, d := range deltas {
			if d.Object == nil || !d.Initial {
				t.Fatalf("bad snapshot delta %+v", d)
			}
		}
		replayFuzzed(t, deltas)
	})
}

// replayFuzzed runs fuzzed deltas through a correlator: nothing it reads may make it panic.
func replayFuzzed(t *testing.T, deltas []watch.Delta) {
	t.Helper()
	c := tracer.New(tracer.Config{Backfill: true}, tracer.SinkFunc(func(*phases.Trace) {}), nil, nil)
	tracer.Replay(c, deltas)
	if n := c.InFlight(); n != 0 {
		t.Fatalf("%d Pods still in flight after the final flush", n)
	}
}
