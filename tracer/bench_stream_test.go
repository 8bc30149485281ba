package tracer

import (
	"fmt"
	"strings"
	"testing"

	"github.com/readyspan/readyspan/phases"
)

// TestManyPodsStream: BenchmarkCorrelatorManyPods measures what it says, 200 independent
// Deployments' startups. Each op's stream yields 400 traces, every one rooted at its own
// Deployment and drawn as the capture's own trace of the Pod it copies. A shared ReplicaSet took
// all but its scale-up's two Pods for its replacements (readyspan.root=replicaset); an
// EndpointSlice left naming the capture's Pods gave none of them a status.endpoints span.
func TestManyPodsStream(t *testing.T) {
	deltas, err := Kinds.LoadRecording(manyPodsRecording)
	if err != nil {
		t.Fatal(err)
	}
	captured := map[string]string{} // Pod name → its trace, drawn
	c := New(Config{Backfill: true}, SinkFunc(func(tr *phases.Trace) { captured[tr.Pod.Name] = drawn(tr) }), nil, nil)
	for _, d := range deltas {
		c.Handle(d)
	}
	c.Flush(phases.OutcomeInProgress)

	var traces []*phases.Trace
	c = New(Config{Backfill: true}, SinkFunc(func(tr *phases.Trace) { traces = append(traces, tr) }), nil, nil)
	for _, d := range manyPodsStream(t) {
		c.Handle(d)
	}
	c.Flush(phases.OutcomeInProgress)
	if want := 2 * manyPodsCopies; len(traces) != want || len(captured) != 2 {
		t.Fatalf("%d traces from the stream, %d from the capture; want %d and 2", len(traces), len(captured), want)
	}
	seen := map[string]bool{}
	for _, tr := range traces {
		name := tr.Pod.Name
		copyOf, suffix := name[:len(name)-len("-0000")], name[len(name)-len("-0000"):]
		if seen[name] {
			t.Errorf("%s traced twice", name)
		}
		seen[name] = true
		if root := tr.Root().Attr(phases.AttrRoot); root != string(phases.RootOf("Deployment")) || controllerNamed(tr.Pod, "Deployment") != "sleeper"+suffix {
			t.Errorf("%s: readyspan.root=%v of Deployment %q, want deployment of sleeper%s", name, root, controllerNamed(tr.Pod, "Deployment"), suffix)
		} else if got, want := drawn(tr), captured[copyOf]; got != want {
			t.Errorf("%s is drawn\n%s\nwant the capture's %s\n%s", name, got, copyOf, want)
		}
	}
}

// drawn is a trace's spans, names and bounds, as the benchmark's copies must repeat them.
func drawn(tr *phases.Trace) string {
	var b strings.Builder
	for _, s := range tr.Spans {
		fmt.Fprintf(&b, "%s %s %s %v\n", s.Name, s.Start.UTC().Format("15:04:05.000000000"), s.End.Sub(s.Start), s.Status)
	}
	return b.String()
}
