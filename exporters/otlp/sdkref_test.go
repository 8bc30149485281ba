package otlp

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/rollout/tracker"
	"github.com/readyspan/readyspan/tracer"
)

// The OpenTelemetry SDK's way to an OTLP request, as readyspan went before resourceSpans: its
// spans as the SDK's read-only spans, which the OTLP exporter converts. It is the reference
// the request readyspan builds is held to.

// sdkRequest is the request the SDK's OTLP exporter makes of spans.
func sdkRequest(t *testing.T, traces []traceSpans, process map[string]string) []*tracepb.ResourceSpans {
	t.Helper()
	res := &sdkResources{byService: map[string]*resource.Resource{}}
	for k, v := range process {
		res.process = append(res.process, attribute.String(k, v))
	}
	var ro []sdktrace.ReadOnlySpan
	for _, tr := range traces {
		ro = append(ro, sdkReadOnly(tr, res)...)
	}
	c := &captureClient{}
	if err := otlptrace.NewUnstarted(c).ExportSpans(context.Background(), ro); err != nil {
		t.Fatal(err)
	}
	return c.got
}

type captureClient struct{ got []*tracepb.ResourceSpans }

func (*captureClient) Start(context.Context) error { return nil }
func (*captureClient) Stop(context.Context) error  { return nil }
func (c *captureClient) UploadTraces(_ context.Context, rs []*tracepb.ResourceSpans) error {
	c.got = append(c.got, cloneRequest(rs)...)
	return nil
}

type sdkResources struct {
	process   []attribute.KeyValue
	byService map[string]*resource.Resource
}

func (r *sdkResources) get(service string) *resource.Resource {
	if res, ok := r.byService[service]; ok {
		return res
	}
	attrs := append([]attribute.KeyValue{semconv.ServiceName(validUTF8(service))}, r.process...)
	res := resource.NewWithAttributes(semconv.SchemaURL, attrs...)
	r.byService[service] = res
	return res
}

func sdkReadOnly(tr traceSpans, res *sdkResources) []sdktrace.ReadOnlySpan {
	stubs := make(tracetest.SpanStubs, 0, len(tr.spans))
	for i := range tr.spans {
		s := &tr.spans[i]
		sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID(tr.id), SpanID: trace.SpanID(s.SpanID), TraceFlags: trace.FlagsSampled})
		var parent trace.SpanContext
		if !s.ParentSpanID.IsZero() {
			parent = trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID(tr.id), SpanID: trace.SpanID(s.ParentSpanID), TraceFlags: trace.FlagsSampled})
		}
		stub := tracetest.SpanStub{
			Name: validUTF8(s.Name), SpanContext: sc, Parent: parent, SpanKind: trace.SpanKindInternal,
			StartTime: s.Start, EndTime: s.End, Attributes: sdkAttributes(s.AllAttrs()),
			Resource: res.get(s.Service), InstrumentationScope: instrumentation.Scope{Name: scopeName},
		}
		switch s.Status {
		case phases.StatusOK:
			stub.Status = sdktrace.Status{Code: codes.Ok}
		case phases.StatusError:
			stub.Status = sdktrace.Status{Code: codes.Error, Description: validUTF8(s.StatusMessage)}
		}
		for _, e := range s.Events() {
			stub.Events = append(stub.Events, sdktrace.Event{Name: validUTF8(e.Name), Time: e.Time, Attributes: sdkAttributes(e.Attrs)})
		}
		for _, l := range s.Links() {
			stub.Links = append(stub.Links, sdktrace.Link{
				SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID(l.TraceID), SpanID: trace.SpanID(l.SpanID), TraceFlags: trace.FlagsSampled}),
				Attributes:  sdkAttributes(l.Attrs),
			})
		}
		stubs = append(stubs, stub)
	}
	return stubs.Snapshots()
}

func sdkAttributes(as []phases.Attr) []attribute.KeyValue {
	out := make([]attribute.KeyValue, 0, len(as))
	for _, a := range as {
		k := validUTF8(a.Key)
		switch v := a.Value.(type) {
		case string:
			out = append(out, attribute.String(k, validUTF8(v)))
		case int64:
			out = append(out, attribute.Int64(k, v))
		case int:
			out = append(out, attribute.Int(k, v))
		case float64:
			out = append(out, attribute.Float64(k, v))
		case bool:
			out = append(out, attribute.Bool(k, v))
		}
	}
	return out
}

// byService orders a request's ResourceSpans by service name: the SDK lists them in a map's
// order.
func byService(rs []*tracepb.ResourceSpans) []*tracepb.ResourceSpans {
	service := func(r *tracepb.ResourceSpans) string {
		for _, kv := range r.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				return kv.GetValue().GetStringValue()
			}
		}
		return ""
	}
	out := slices.Clone(rs)
	slices.SortFunc(out, func(a, b *tracepb.ResourceSpans) int {
		sa, sb := service(a), service(b)
		switch {
		case sa < sb:
			return -1
		case sa > sb:
			return 1
		}
		return 0
	})
	return out
}

// captureTraces are every Pod and rollout trace the tracer rebuilds from the real captures.
func captureTraces(t *testing.T) []traceSpans {
	t.Helper()
	var traces []traceSpans
	matches, _ := filepath.Glob(filepath.Join("..", "..", "tracer", "testdata", "real-node", "run*"))
	for _, dir := range matches {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			continue
		}
		deltas, err := tracer.Kinds.LoadRecording(dir)
		if err != nil {
			t.Fatal(err)
		}
		c := tracer.New(tracer.Config{Backfill: true, Rollouts: tracker.SinkFunc(func(r *rollout.Trace) { traces = append(traces, traceSpans{r.TraceID, r.Spans}) })},
			tracer.SinkFunc(func(tr *phases.Trace) { traces = append(traces, traceSpans{tr.TraceID, tr.Spans}) }), nil, nil)
		tracer.Replay(c, deltas)
	}
	return traces
}

// The exporter cuts each request from the blocks of the one before: every request is what
// fresh blocks make of its batch, and released blocks hold nothing of the request before.
func TestRequestBlocksReused(t *testing.T) {
	traces := captureTraces(t)
	res := newResources(map[string]string{"readyspan.shard": "0/2"})
	marshal := func(rs []*tracepb.ResourceSpans) []byte {
		b, err := proto.Marshal(&coltracepb.ExportTraceServiceRequest{ResourceSpans: rs})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var bl requestBlocks
	at := 0
	for i, size := range []int{3, 1, 6, 2, 5, len(traces)} {
		batch := traces[at%len(traces) : min(at%len(traces)+size, len(traces))]
		at += size
		want := marshal(resourceSpans(batch, res))
		if got := marshal(bl.request(batch, res)); !bytes.Equal(got, want) {
			t.Errorf("request %d (%d traces) from reused blocks differs from one of fresh blocks", i, len(batch))
		}
		bl.release()
		spans, kvs := bl.spans[:cap(bl.spans)], bl.kvs[:cap(bl.kvs)]
		for j := range spans {
			if sp := &spans[j]; sp.Name != "" || sp.Attributes != nil || sp.TraceId != nil {
				t.Fatalf("request %d: a released span block still holds %q", i, sp.Name)
			}
		}
		for j := range kvs {
			if kv := &kvs[j]; kv.Key != "" || kv.Value != nil {
				t.Fatalf("request %d: a released attribute block still holds %q", i, kv.Key)
			}
		}
	}
}

// TestRequestMatchesSDK holds the request readyspan builds to the one the OpenTelemetry SDK
// builds of the same spans, message for message: every Pod and rollout trace the tracer
// rebuilds from the real captures, in batches as the exporter sends them, a shard's resource
// attribute, and a trace with what the captures lack (invalid UTF-8, every attribute type,
// events with attributes, an error status, a value of a type OTLP has no scalar for).
func TestRequestMatchesSDK(t *testing.T) {
	traces := captureTraces(t)
	odd := testTrace("9cade20b-81ea-4be9-bdc9-d3f2d8d8b69f")
	root := &odd.Spans[0]
	root.Name, root.Status, root.StatusMessage = "pod.startup \xff", phases.StatusError, "Failed \xc3"
	all := []phases.Attr{{Key: "s", Value: "exit \xff\xfe"}, {Key: "i", Value: int64(-3)}, {Key: "n", Value: 7},
		{Key: "f", Value: 1.5}, {Key: "b", Value: true}, {Key: "k\xff", Value: "v"}, {Key: "unsupported", Value: time.Second}}
	root.Attrs = append(root.Attrs, all...)
	root.AddEvent(phases.Event{Name: "Failed", Time: root.Start, Attrs: all}, phases.Event{Name: "bare", Time: root.End})
	traces = append(traces, traceSpans{odd.TraceID, odd.Spans})
	var links, errs int
	for _, tr := range traces {
		for _, s := range tr.spans {
			links += len(s.Links())
			if s.Status == phases.StatusError {
				errs++
			}
		}
	}
	if len(traces) < 10 || links == 0 || errs == 0 {
		t.Fatalf("%d traces, %d links, %d error spans: too little to compare", len(traces), links, errs)
	}
	process := map[string]string{"readyspan.shard": "0/2"}
	for at := 0; at < len(traces); at += DefaultBatchSize {
		batch := traces[at:min(at+DefaultBatchSize, len(traces))]
		want := byService(sdkRequest(t, batch, process))
		got := byService(resourceSpans(batch, newResources(process)))
		if len(got) != len(want) {
			t.Fatalf("batch at %d: %d resources, the SDK %d", at, len(got), len(want))
		}
		for i := range got {
			if proto.Equal(want[i], got[i]) {
				continue
			}
			ws, gs := flatten(want[i:i+1]), flatten(got[i:i+1])
			for k := range min(len(ws), len(gs)) {
				if !proto.Equal(ws[k].Span, gs[k].Span) {
					t.Fatalf("batch at %d, service %s, span %d: the SDK's\n%s\nreadyspan's\n%s", at, ws[k].service, k,
						prototext.Format(ws[k].Span), prototext.Format(gs[k].Span))
				}
			}
			t.Fatalf("batch at %d: resource %d differs from the SDK's: %d spans, the SDK %d\n%s\n%s", at, i, len(gs), len(ws),
				prototext.Format(want[i].Resource), prototext.Format(got[i].Resource))
		}
	}
	t.Logf("%d traces compared, %d links, %d error spans", len(traces), links, errs)
}
