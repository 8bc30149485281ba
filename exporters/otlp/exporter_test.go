package otlp

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"sync"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
)

type counts struct {
	mu               sync.Mutex
	exported, errors int
	dropped          map[string]int
}

func (c *counts) TraceExported() { c.mu.Lock(); c.exported++; c.mu.Unlock() }
func (c *counts) ExportError()   { c.mu.Lock(); c.errors++; c.mu.Unlock() }
func (c *counts) TraceDropped(r string) {
	c.mu.Lock()
	if c.dropped == nil {
		c.dropped = map[string]int{}
	}
	c.dropped[r]++
	c.mu.Unlock()
}

// flaky fails its first n exports, like a backend that is down and comes back.
type flaky struct {
	mu    sync.Mutex
	fails int
	got   []sentSpan
}

func (f *flaky) Start(context.Context) error { return nil }
func (f *flaky) Stop(context.Context) error  { return nil }

func (f *flaky) GetSpans() []sentSpan {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.got
}

func (f *flaky) UploadTraces(ctx context.Context, rs []*tracepb.ResourceSpans) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fails > 0 {
		f.fails--
		return errors.New("connection refused")
	}
	f.got = append(f.got, flatten(cloneRequest(rs))...)
	return nil
}

// sentSpan is a span as an OTLP request carries it, with its resource's service.name.
type sentSpan struct {
	*tracepb.Span
	service string
}

// flatten lists the spans of a request, each with its service.
// cloneRequest is a copy of a request for a client that keeps it: the exporter reuses the
// request's messages once UploadTraces returns.
func cloneRequest(rs []*tracepb.ResourceSpans) []*tracepb.ResourceSpans {
	out := make([]*tracepb.ResourceSpans, len(rs))
	for i, r := range rs {
		out[i] = proto.Clone(r).(*tracepb.ResourceSpans)
	}
	return out
}

func flatten(rs []*tracepb.ResourceSpans) []sentSpan {
	var out []sentSpan
	for _, r := range rs {
		service := ""
		for _, kv := range r.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range r.ScopeSpans {
			for _, s := range ss.Spans {
				out = append(out, sentSpan{s, service})
			}
		}
	}
	return out
}

func testTrace(uid string) *phases.Trace {
	t0 := time.Date(2026, 11, 30, 8, 41, 34, 0, time.UTC)
	p := &phases.Pod{UID: uid, Name: "web-1", Namespace: "default", Root: phases.RootBarePod}
	p.Created.Add(t0, phases.SourceMetadata)
	p.Scheduled.Add(t0.Add(40*time.Millisecond), phases.SourceEventTime)
	p.ContainersReady.Add(t0.Add(2*time.Second), phases.SourceWatch)
	p.Ready.Add(t0.Add(2100*time.Millisecond), phases.SourceWatch)
	return phases.Build(p, phases.Options{})
}

func TestExporterRetriesUntilBackendIsUp(t *testing.T) {
	mem := &flaky{fails: 2}
	st := &counts{}
	e := NewWithClient(mem, Config{InitialBackoff: time.Millisecond}, st, nil)
	e.Start(context.Background())
	tr := testTrace("9cade20b-81ea-4be9-bdc9-d3f2d8d8b69f")
	e.Export(tr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := e.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	spans := mem.GetSpans()
	if len(spans) != len(tr.Spans) {
		t.Fatalf("exported %d spans, want %d", len(spans), len(tr.Spans))
	}
	if st.exported != 1 || st.errors != 2 {
		t.Fatalf("exported=%d errors=%d, want 1 and 2", st.exported, st.errors)
	}
	root := spans[0]
	if got := hex.EncodeToString(root.TraceId); got != "9cade20b81ea4be9bdc9d3f2d8d8b69f" {
		t.Fatalf("trace ID %s, want the Pod UID", got)
	}
	services := map[string]bool{}
	for _, s := range spans {
		services[s.service] = true
	}
	for _, want := range []string{"readyspan", "kubectl", "kube-apiserver", "kube-scheduler", "kubelet"} {
		if !services[want] {
			t.Errorf("no span with service.name %q (have %v)", want, services)
		}
	}
}

// A rollout goes out like a Pod trace, and span links reach the backend: a rollout's Pod to the
// Pod's own trace, and back.
func TestExportRolloutLinks(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 8, 41, 34, 0, time.UTC)
	r := &rollout.Rollout{Workload: rollout.Workload{Kind: rollout.Deployment, Name: "web", Namespace: "default", UID: "5d3c7a30-0f45-4c36-9e0b-9d1f7d1c2a11"},
		Kind: rollout.KindUpdate, Generation: 2, Outcome: rollout.OutcomeComplete, Strategy: rollout.Strategy{Partition: -1}}
	r.Start.Add(t0, phases.SourceWatch)
	r.Complete.Add(t0.Add(3*time.Second), phases.SourceWatch)
	np := rollout.NewPod{UID: "9cade20b-81ea-4be9-bdc9-d3f2d8d8b69f", Name: "web-1"}
	np.Created.Add(t0.Add(50*time.Millisecond), phases.SourceWatch)
	np.Ready.Add(t0.Add(2*time.Second), phases.SourceWatch)
	r.NewPods = []rollout.NewPod{np}
	tr := rollout.Build(r)

	mem := &flaky{}
	st := &counts{}
	e := NewWithClient(mem, Config{}, st, nil)
	e.Start(context.Background())
	e.ExportRollout(tr)
	if err := e.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := mem.GetSpans()
	if len(got) != len(tr.Spans) || st.exported != 1 {
		t.Fatalf("%d spans (%d traces) reached the backend, want %d spans of 1 trace", len(got), st.exported, len(tr.Spans))
	}
	var links int
	podTrace, podRoot := phases.TraceIDFor(np.UID), phases.SpanIDFor(np.UID, phases.RootSpanName)
	for _, s := range got {
		if s.Name != rollout.PodSpanName {
			continue
		}
		for _, l := range s.Links {
			if bytes.Equal(l.TraceId, podTrace[:]) && bytes.Equal(l.SpanId, podRoot[:]) {
				links++
			}
		}
	}
	if links != 1 {
		t.Errorf("the rollout's Pod span carries %d links to the Pod's trace, want 1", links)
	}
}
