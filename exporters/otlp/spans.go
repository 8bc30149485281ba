// Package otlp exports readyspan's traces over OTLP (gRPC or HTTP), without ever blocking the
// watch: traces are queued, sent in batches, retried with backoff while the backend is down,
// and dropped (and counted) when the queue is full or retries run out.
package otlp

import (
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/readyspan/readyspan/phases"
)

// scope is the instrumentation scope of every span readyspan reconstructs.
var scope = instrumentation.Scope{Name: "github.com/readyspan/readyspan"}

// resources caches one resource per service name: each phase is reported as the component
// that owns it, so trace viewers colour the waterfall by component. Every resource also carries
// what is said of the exporting process (the shard, when several split the cluster).
type resources struct {
	process   []attribute.KeyValue
	byService map[string]*resource.Resource
}

func newResources(process map[string]string) *resources {
	r := &resources{byService: map[string]*resource.Resource{}}
	for k, v := range process {
		r.process = append(r.process, attribute.String(k, v))
	}
	return r
}

func (r *resources) get(service string) *resource.Resource {
	if res, ok := r.byService[service]; ok {
		return res
	}
	attrs := append([]attribute.KeyValue{semconv.ServiceName(validUTF8(service))}, r.process...)
	res := resource.NewWithAttributes(semconv.SchemaURL, attrs...)
	r.byService[service] = res
	return res
}

// readOnly converts a reconstructed trace's spans to SDK spans with their deterministic IDs
// and their observed (not current) times.
func readOnly(spans []phases.Span, res *resources) []sdktrace.ReadOnlySpan {
	stubs := make(tracetest.SpanStubs, 0, len(spans))
	for i := range spans {
		s := &spans[i]
		sc := trace.NewSpanContext(trace.SpanContextConfig{
			TraceID:    trace.TraceID(s.TraceID),
			SpanID:     trace.SpanID(s.SpanID),
			TraceFlags: trace.FlagsSampled,
		})
		var parent trace.SpanContext
		if !s.ParentSpanID.IsZero() {
			parent = trace.NewSpanContext(trace.SpanContextConfig{
				TraceID:    trace.TraceID(s.TraceID),
				SpanID:     trace.SpanID(s.ParentSpanID),
				TraceFlags: trace.FlagsSampled,
			})
		}
		stub := tracetest.SpanStub{
			Name:                 validUTF8(s.Name),
			SpanContext:          sc,
			Parent:               parent,
			SpanKind:             trace.SpanKindInternal,
			StartTime:            s.Start,
			EndTime:              s.End,
			Attributes:           attributes(s.AllAttrs()),
			Resource:             res.get(s.Service),
			InstrumentationScope: scope,
		}
		switch s.Status {
		case phases.StatusOK:
			stub.Status = sdktrace.Status{Code: codes.Ok}
		case phases.StatusError:
			stub.Status = sdktrace.Status{Code: codes.Error, Description: validUTF8(s.StatusMessage)}
		}
		for _, e := range s.Events {
			stub.Events = append(stub.Events, sdktrace.Event{Name: validUTF8(e.Name), Time: e.Time, Attributes: attributes(e.Attrs)})
		}
		for _, l := range s.Links {
			stub.Links = append(stub.Links, sdktrace.Link{
				SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID(l.TraceID), SpanID: trace.SpanID(l.SpanID), TraceFlags: trace.FlagsSampled}),
				Attributes:  attributes(l.Attrs),
			})
		}
		stubs = append(stubs, stub)
	}
	return stubs.Snapshots()
}

func attributes(as []phases.Attr) []attribute.KeyValue {
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

// validUTF8 replaces invalid UTF-8 with U+FFFD. OTLP's protobuf strings must be valid UTF-8:
// one bad byte (a container's termination message, an Event written over protobuf) makes the
// whole request fail to marshal, and with it every other trace of the batch.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
