package otlp

import (
	"math"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/readyspan/readyspan/phases"
)

// scopeName is the instrumentation scope of every span readyspan reconstructs.
const scopeName = "github.com/readyspan/readyspan"

// scope is that scope as OTLP states it, shared by every request (nothing writes to it).
var scope = &commonpb.InstrumentationScope{Name: scopeName}

// spanFlags are the W3C trace flags of every span (sampled), with the bit that says whether
// the parent is remote known (it never is: a trace is rebuilt whole).
const spanFlags = uint32(0x01) | uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK)

// resources caches one OTLP resource per service name: each phase is reported as the component
// that owns it, so trace viewers colour the waterfall by component. Every resource also carries
// what is said of the exporting process (the shard, when several split the cluster). A
// resource is converted once and shared by every request that needs it.
type resources struct {
	process   []attribute.KeyValue
	byService map[string]*resourcepb.Resource
}

func newResources(process map[string]string) *resources {
	r := &resources{byService: map[string]*resourcepb.Resource{}}
	for k, v := range process {
		r.process = append(r.process, attribute.String(k, v))
	}
	return r
}

// get is the resource of a service: its attributes as the SDK's resource orders and dedupes
// them (by key), readyspan's said of the process after service.name.
func (r *resources) get(service string) *resourcepb.Resource {
	if res, ok := r.byService[service]; ok {
		return res
	}
	attrs := append([]attribute.KeyValue{semconv.ServiceName(validUTF8(service))}, r.process...)
	set := resource.NewWithAttributes(semconv.SchemaURL, attrs...)
	res := &resourcepb.Resource{}
	for it := set.Iter(); it.Next(); {
		kv := it.Attribute()
		res.Attributes = append(res.Attributes, &commonpb.KeyValue{Key: string(kv.Key),
			Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: kv.Value.AsString()}}})
	}
	r.byService[service] = res
	return res
}

// resourceSpans is the body of one OTLP export request for the spans of a batch of traces: a
// ResourceSpans per service, in the order services first appear, each with readyspan's one
// scope and its spans in the order given. It is what the OpenTelemetry SDK's conversion of
// the same spans gives (TestRequestMatchesSDK) without the SDK's span snapshots and the copies
// it makes of every attribute on the way: the messages of a request are cut from a few blocks
// (requestBlocks) rather than allocated one by one.
func resourceSpans(traces []traceSpans, res *resources) []*tracepb.ResourceSpans {
	return new(requestBlocks).request(traces, res)
}

// request is resourceSpans with its messages cut from bl's blocks, which it sizes first. The
// request is valid until bl.release.
func (bl *requestBlocks) request(traces []traceSpans, res *resources) []*tracepb.ResourceSpans {
	bl.reserve(traces)
	var out []*tracepb.ResourceSpans
	var scopes []*tracepb.ScopeSpans // out[i]'s one ScopeSpans
	var services []string            // out[i]'s service
	for _, t := range traces {
		for i := range t.spans {
			s := &t.spans[i]
			k := 0
			for k < len(services) && services[k] != s.Service {
				k++
			}
			if k == len(services) {
				ss := &tracepb.ScopeSpans{Scope: scope, Spans: []*tracepb.Span{}}
				out = append(out, &tracepb.ResourceSpans{Resource: res.get(s.Service), ScopeSpans: []*tracepb.ScopeSpans{ss}, SchemaUrl: semconv.SchemaURL})
				scopes, services = append(scopes, ss), append(services, s.Service)
			}
			scopes[k].Spans = append(scopes[k].Spans, bl.span(t.id, s))
		}
	}
	return out
}

// traceSpans is a trace's spans with its ID, as queued and sent: a span does not hold the ID of
// the trace it is part of.
type traceSpans struct {
	id    phases.TraceID
	spans []phases.Span
}

// requestBlocks holds the messages of one request, allocated together: a span's fixed parts,
// every attribute's key-value, value and typed value, and the span and trace IDs' bytes.
type requestBlocks struct {
	spans    []tracepb.Span
	statuses []tracepb.Status
	ids      []byte
	kvs      []commonpb.KeyValue
	kvPtrs   []*commonpb.KeyValue
	values   []commonpb.AnyValue
	strs     []commonpb.AnyValue_StringValue
	ints     []commonpb.AnyValue_IntValue
	floats   []commonpb.AnyValue_DoubleValue
	bools    []commonpb.AnyValue_BoolValue
	// bounds is scratch for a span's bound attributes (phases.Span.BoundAttrs).
	bounds [8]phases.Attr
}

// reserve sizes the blocks for a batch: one pass counting what the request will hold. A block
// large enough already is reused. (Were a count short, append would move a block and the
// messages cut from it before would stay where they were, whole: only the one allocation
// would be lost.)
func (bl *requestBlocks) reserve(traces []traceSpans) {
	var attrs, strs, ints, floats, bools, ids, n int
	var buf [8]phases.Attr
	count := func(as []phases.Attr) {
		for _, a := range as {
			switch a.Value.(type) {
			case string:
				strs++
			case int64, int:
				ints++
			case float64:
				floats++
			case bool:
				bools++
			default:
				continue
			}
			attrs++
		}
	}
	for _, t := range traces {
		for i := range t.spans {
			s := &t.spans[i]
			n++
			ids += 16 + 8 + 8 + 24*len(s.Links()) // trace, span and parent IDs; each link's trace and span
			count(s.BoundAttrs(buf[:0]))
			count(s.Attrs)
			for _, e := range s.Events() {
				count(e.Attrs)
			}
			for _, l := range s.Links() {
				count(l.Attrs)
			}
		}
	}
	bl.spans, bl.statuses, bl.ids = block(bl.spans, n), block(bl.statuses, n), block(bl.ids, ids)
	bl.kvs, bl.kvPtrs, bl.values = block(bl.kvs, attrs), block(bl.kvPtrs, attrs), block(bl.values, attrs)
	bl.strs, bl.ints = block(bl.strs, strs), block(bl.ints, ints)
	bl.floats, bl.bools = block(bl.floats, floats), block(bl.bools, bools)
}

// block is b emptied, or a new block when b cannot hold n.
func block[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, 0, n)
	}
	return b[:0]
}

// maxSpareBlockBytes bounds the blocks an exporter keeps between requests: those of a full
// batch of ordinary Pod traces (64 of the real captures' take 1.2 MB), not those of larger
// traces.
const maxSpareBlockBytes = 2 << 20

// release zeroes what the last request used, so that the blocks hold on to no trace, and keeps
// them for the next one when they are within maxSpareBlockBytes. The request must no longer be
// read: the client has marshalled it.
func (bl *requestBlocks) release() {
	clear(bl.spans)
	clear(bl.statuses)
	clear(bl.kvs)
	clear(bl.kvPtrs)
	clear(bl.values)
	clear(bl.strs)
	if bl.capBytes() > maxSpareBlockBytes {
		*bl = requestBlocks{}
		return
	}
	// ids, ints, floats and bools hold no pointers: they are overwritten.
	bl.spans, bl.statuses, bl.ids, bl.kvs, bl.kvPtrs = bl.spans[:0], bl.statuses[:0], bl.ids[:0], bl.kvs[:0], bl.kvPtrs[:0]
	bl.values, bl.strs, bl.ints, bl.floats, bl.bools = bl.values[:0], bl.strs[:0], bl.ints[:0], bl.floats[:0], bl.bools[:0]
}

func (bl *requestBlocks) capBytes() int {
	return cap(bl.spans)*int(unsafe.Sizeof(tracepb.Span{})) + cap(bl.statuses)*int(unsafe.Sizeof(tracepb.Status{})) +
		cap(bl.ids) + cap(bl.kvs)*int(unsafe.Sizeof(commonpb.KeyValue{})) + cap(bl.kvPtrs)*8 +
		cap(bl.values)*int(unsafe.Sizeof(commonpb.AnyValue{})) + cap(bl.strs)*16 + (cap(bl.ints)+cap(bl.floats)+cap(bl.bools))*8
}

func (bl *requestBlocks) span(trace phases.TraceID, s *phases.Span) *tracepb.Span {
	bl.spans = append(bl.spans, tracepb.Span{})
	sp := &bl.spans[len(bl.spans)-1]
	sp.TraceId = bl.bytes(trace[:])
	sp.SpanId = bl.bytes(s.SpanID[:])
	if !s.ParentSpanID.IsZero() {
		sp.ParentSpanId = bl.bytes(s.ParentSpanID[:])
	}
	sp.Flags = spanFlags
	sp.Name = validUTF8(s.Name)
	sp.Kind = tracepb.Span_SPAN_KIND_INTERNAL
	sp.StartTimeUnixNano = unixNano(s.Start)
	sp.EndTimeUnixNano = unixNano(s.End)
	bl.statuses = append(bl.statuses, tracepb.Status{})
	st := &bl.statuses[len(bl.statuses)-1]
	switch s.Status {
	case phases.StatusOK:
		st.Code = tracepb.Status_STATUS_CODE_OK
	case phases.StatusError:
		st.Code, st.Message = tracepb.Status_STATUS_CODE_ERROR, validUTF8(s.StatusMessage)
	}
	sp.Status = st
	sp.Attributes = bl.attributes(s.BoundAttrs(bl.bounds[:0]), s.Attrs)
	if len(s.Events()) > 0 {
		sp.Events = make([]*tracepb.Span_Event, len(s.Events()))
		for i, e := range s.Events() {
			sp.Events[i] = &tracepb.Span_Event{Name: validUTF8(e.Name), TimeUnixNano: unixNano(e.Time), Attributes: bl.attributes(e.Attrs, nil)}
		}
	}
	if len(s.Links()) > 0 {
		sp.Links = make([]*tracepb.Span_Link, len(s.Links()))
		for i, l := range s.Links() {
			sp.Links[i] = &tracepb.Span_Link{TraceId: bl.bytes(l.TraceID[:]), SpanId: bl.bytes(l.SpanID[:]),
				Attributes: bl.attributes(l.Attrs, nil), Flags: spanFlags}
		}
	}
	return sp
}

// bytes is a copy of b in the ID block.
func (bl *requestBlocks) bytes(b []byte) []byte {
	at := len(bl.ids)
	bl.ids = append(bl.ids, b...)
	return bl.ids[at:len(bl.ids):len(bl.ids)]
}

// attributes converts two lists of attributes into one OTLP list, nil when empty, as the SDK
// does: a value of a type OTLP has no scalar for is left out. first is a span's bounds (or an
// event's or link's attributes, then nil): an attribute of then whose key a bound states is
// left out, so that the one value sent is readyspan's (phases.BoundShadows).
func (bl *requestBlocks) attributes(first, then []phases.Attr) []*commonpb.KeyValue {
	at := len(bl.kvPtrs)
	for k, list := range [2][]phases.Attr{first, then} {
		for _, a := range list {
			if k == 1 && phases.BoundShadows(first, a.Key) {
				continue
			}
			bl.values = append(bl.values, commonpb.AnyValue{})
			v := &bl.values[len(bl.values)-1]
			switch x := a.Value.(type) {
			case string:
				bl.strs = append(bl.strs, commonpb.AnyValue_StringValue{StringValue: validUTF8(x)})
				v.Value = &bl.strs[len(bl.strs)-1]
			case int64:
				bl.ints = append(bl.ints, commonpb.AnyValue_IntValue{IntValue: x})
				v.Value = &bl.ints[len(bl.ints)-1]
			case int:
				bl.ints = append(bl.ints, commonpb.AnyValue_IntValue{IntValue: int64(x)})
				v.Value = &bl.ints[len(bl.ints)-1]
			case float64:
				bl.floats = append(bl.floats, commonpb.AnyValue_DoubleValue{DoubleValue: x})
				v.Value = &bl.floats[len(bl.floats)-1]
			case bool:
				bl.bools = append(bl.bools, commonpb.AnyValue_BoolValue{BoolValue: x})
				v.Value = &bl.bools[len(bl.bools)-1]
			default:
				bl.values = bl.values[:len(bl.values)-1]
				continue
			}
			bl.kvs = append(bl.kvs, commonpb.KeyValue{Key: validUTF8(a.Key), Value: v})
			bl.kvPtrs = append(bl.kvPtrs, &bl.kvs[len(bl.kvs)-1])
		}
	}
	if len(bl.kvPtrs) == at {
		return nil
	}
	return bl.kvPtrs[at:len(bl.kvPtrs):len(bl.kvPtrs)]
}

// unixNano is t in OTLP's unsigned nanoseconds since 1970. A component's span joined into a
// trace keeps the component's times, whatever its clock said, and those need not fit: a time
// before 1970 (the zero time.Time among them) is sent as 0, OTLP's "unknown", as the SDK sends
// it; one after the last nanosecond an int64 holds (2262-04-11) as that nanosecond, the most a
// backend that reads the field as signed (Jaeger) takes. time.Time.UnixNano is undefined out of
// that range (it wraps: the year 2600 came out as 2016).
func unixNano(t time.Time) uint64 {
	switch {
	case t.Before(epoch):
		return 0
	case t.After(lastUnixNano):
		return math.MaxInt64
	}
	return uint64(t.UnixNano())
}

var (
	epoch        = time.Unix(0, 0)
	lastUnixNano = time.Unix(0, math.MaxInt64)
)

// validUTF8 replaces invalid UTF-8 with U+FFFD. OTLP's protobuf strings must be valid UTF-8:
// one bad byte (a container's termination message, an Event written over protobuf) makes the
// whole request fail to marshal, and with it every other trace of the batch.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
