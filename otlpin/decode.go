package otlpin

import (
	"strconv"
	"time"
	"unicode/utf8"
	"unique"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/readyspan/readyspan/phases"
)

// Bounds on what is kept of one received span: every string comes from outside, and is held.
const (
	maxAttrs    = 32
	maxKeyLen   = 128
	maxValueLen = 512
	maxNameLen  = 256
)

// Decode turns one OTLP request into component spans: the resource's service.name says the
// component (ServiceAPIServer, ServiceKubelet, ServiceContainerd, or "other"); string,
// integer, boolean and double attributes are kept, at most maxAttrs of them, every string
// cut to its bound at a rune boundary.
func Decode(req *collectortrace.ExportTraceServiceRequest) []phases.ComponentSpan {
	var out []phases.ComponentSpan
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		comp := component(service)
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				out = append(out, decodeSpan(comp, sp))
			}
		}
	}
	return out
}

func decodeSpan(comp string, sp *tracepb.Span) phases.ComponentSpan {
	c := phases.ComponentSpan{
		Service: comp,
		Name:    bound(sp.GetName(), maxNameLen),
		Start:   time.Unix(0, int64(sp.GetStartTimeUnixNano())).UTC(),
		End:     time.Unix(0, int64(sp.GetEndTimeUnixNano())).UTC(),
	}
	if id := sp.GetTraceId(); len(id) == len(c.TraceID) {
		copy(c.TraceID[:], id)
	}
	if id := sp.GetSpanId(); len(id) == len(c.SpanID) {
		copy(c.SpanID[:], id)
	}
	if id := sp.GetParentSpanId(); len(id) == len(c.Parent) {
		copy(c.Parent[:], id)
	}
	if sp.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR {
		c.Error, c.StatusMessage = true, bound(sp.GetStatus().GetMessage(), maxValueLen)
	}
	for _, a := range sp.GetAttributes() {
		if len(c.Attrs) == maxAttrs {
			break
		}
		if v, ok := value(a.GetValue()); ok {
			c.Attrs = append(c.Attrs, phases.Attr{Key: intern(bound(a.GetKey(), maxKeyLen)), Value: v})
		}
	}
	return c
}

func value(v *commonpb.AnyValue) (any, bool) {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		v := bound(x.StringValue, maxValueLen)
		if len(v) <= maxInternedValue {
			v = intern(v)
		}
		return v, true
	case *commonpb.AnyValue_IntValue:
		return x.IntValue, true
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue, true
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue, true
	}
	return nil, false
}

// bound cuts s to at most n bytes at a rune boundary and makes it valid UTF-8 (a span's
// strings go out again over OTLP, whose strings must be).
func bound(s string, n int) string {
	if len(s) > n {
		cut := n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…(" + strconv.Itoa(len(s)) + " bytes)"
	}
	if !utf8.ValidString(s) {
		s = string([]rune(s)) // invalid bytes become U+FFFD
	}
	return s
}

// maxInternedValue is the longest string attribute value interned: the short ones repeat from
// span to span (a method, a status, an address, a resource), the long ones (URLs, audit IDs,
// keys) rarely do.
const maxInternedValue = 48

// intern returns the canonical copy of s. A held span's keys and short values are mostly the
// same few strings; interned, each is held once for all spans instead of once per span, and
// dropped by the runtime when no span holds it (a hostile sender cannot grow a table).
func intern(s string) string { return unique.Make(s).Value() }
