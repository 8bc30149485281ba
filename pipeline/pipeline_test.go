package pipeline

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/readyspan/readyspan/exporters/otlp"
	"github.com/readyspan/readyspan/internal/captures"
	"github.com/readyspan/readyspan/node"
	"github.com/readyspan/readyspan/otlpin"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/rollout/tracker"
	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/watch"
)

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		set   func(*Options)
		wantE string
	}{
		{"defaults", func(*Options) {}, ""},
		{"JSON watches", func(o *Options) { o.Watch.Encoding = watch.EncodingJSON }, ""},
		{"an unknown watch encoding", func(o *Options) { o.Watch.Encoding = "cbor" }, "--watch-encoding"},
		{"fewer than no Pods in flight", func(o *Options) { o.Trace.MaxInFlight = -1 }, "--max-in-flight"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var o Options
			tc.set(&o)
			err := o.Validate()
			if tc.wantE == "" && err != nil || tc.wantE != "" && (err == nil || !strings.Contains(err.Error(), tc.wantE)) {
				t.Errorf("Validate() = %v, want an error with %q", err, tc.wantE)
			}
		})
	}
}

// A live pipeline correlates only when a sink takes traces: readyspan record taps the deltas and
// builds no correlator.
func TestNewLiveCorrelatesOnlyForTraceSinks(t *testing.T) {
	env := Env{Client: fake.NewClientset(), Host: "test"}
	for _, tc := range []struct {
		name  string
		sinks Sinks
		want  bool
	}{
		{"deltas only", Sinks{Deltas: func(watch.Delta) {}}, false},
		{"Pods", Sinks{Pods: tracer.SinkFunc(func(*phases.Trace) {})}, true},
		{"rollouts only", Sinks{Rollouts: tracker.SinkFunc(func(*rollout.Trace) {})}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := NewLive(Options{}, env, tc.sinks)
			if l.Source == nil || (l.Correlator != nil) != tc.want {
				t.Errorf("source %v, correlator %v; want a correlator: %v", l.Source != nil, l.Correlator != nil, tc.want)
			}
		})
	}
}

// A replay rebuilds the same traces whatever settle time and backfill the options carry: it
// always backfills and exports at once.
func TestReplayIgnoresLiveTiming(t *testing.T) {
	deltas, err := tracer.Kinds.LoadRecording(captures.Path("kinds-statefulset"))
	if err != nil {
		t.Fatal(err)
	}
	rebuild := func(o Options) []string {
		var out []string
		Replay(o, deltas, Sinks{
			Pods:     tracer.SinkFunc(func(t *phases.Trace) { out = append(out, "pod "+t.TraceID.String()) }),
			Rollouts: tracker.SinkFunc(func(t *rollout.Trace) { out = append(out, "rollout "+t.TraceID.String()) }),
		})
		return out
	}
	want := rebuild(Options{})
	if len(want) == 0 {
		t.Fatal("the recording rebuilt no traces")
	}
	got := rebuild(Options{Trace: tracer.Config{Settle: time.Hour, Backfill: false}})
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("with a settle time and no backfill:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if w := Replay(Options{}, deltas, Sinks{}); w != nil {
		t.Errorf("a replay no sink takes warned %q", w)
	}
}

// ExportOTLP hands every trace of a batch to the backend and counts them.
func TestExportOTLP(t *testing.T) {
	deltas, err := tracer.Kinds.LoadRecording(captures.Path("kinds-statefulset"))
	if err != nil {
		t.Fatal(err)
	}
	var pods []*phases.Trace
	var rollouts []*rollout.Trace
	Replay(Options{}, deltas, Sinks{
		Pods:     tracer.SinkFunc(func(t *phases.Trace) { pods = append(pods, t) }),
		Rollouts: tracker.SinkFunc(func(t *rollout.Trace) { rollouts = append(rollouts, t) }),
	})
	backend, err := otlpin.Listen(otlpin.Config{Addr: "127.0.0.1:0"}, otlpin.NewStore(time.Minute, 1<<20, nil), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = backend.Shutdown(context.Background()) }()
	nodes := []*node.Trace{node.Build(&node.Startup{Name: "n1", UID: "0000000d-0000-4000-8000-000000000001", Outcome: node.OutcomeReady})}
	n, err := ExportOTLP(t.Context(), otlp.Config{Endpoint: backend.Addr().String(), Insecure: true, Protocol: "grpc"}, pods, rollouts, nodes)
	if err != nil || n != len(pods)+len(rollouts)+len(nodes) {
		t.Errorf("ExportOTLP = %d, %v; want %d traces exported", n, err, len(pods)+len(rollouts)+len(nodes))
	}
}
