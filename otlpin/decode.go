package otlpin

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/readyspan/readyspan/phases"
)

// Bounds on what is kept of one received span: every string comes from outside, and is held.
const (
	maxAttrs    = 32
	maxKeyLen   = 128
	maxValueLen = 512
	maxNameLen  = 256
)

// reservedPrefix is readyspan's attribute namespace: a sender's attributes in it are dropped at
// the door, so what a view or an export shows under it is always readyspan's own.
const reservedPrefix = "readyspan."

// Decode turns one OTLP request already in memory into component spans (DecodeMessage on its
// encoding): for a replay or a test.
func Decode(req *collectortrace.ExportTraceServiceRequest) []phases.ComponentSpan {
	b, err := proto.Marshal(req)
	if err != nil {
		return nil
	}
	var out []phases.ComponentSpan
	_ = DecodeMessage(b, func(chunk []phases.ComponentSpan) { out = append(out, chunk...) })
	return out
}

// chunkSpans is how many spans DecodeMessage hands on at a time: what decoding holds besides
// the request's bytes, whatever their number, and what the store files under one hold of its
// lock.
const chunkSpans = 256

// DecodeMessage reads an encoded ExportTraceServiceRequest straight into component spans,
// handing them to emit chunkSpans at a time (emit must copy what it keeps: the chunk is
// reused). The resource's service.name says the component (ServiceAPIServer, ServiceKubelet,
// ServiceContainerd, or "other"); string, integer, boolean and double attributes are kept, at
// most maxAttrs of them, every string cut to its bound at a rune boundary, and none in
// readyspan's namespace; the request's other fields (events, links, arrays, …) are skipped
// without being built. Reading the wire format directly, rather than unmarshalling the whole
// request first, bounds what decoding costs by what is kept: a request of a million tiny
// attributes or spans allocates a chunk's worth at a time. Malformed protobuf and invalid UTF-8
// in a string are refused, as proto.Unmarshal would, after the chunks before the fault.
func DecodeMessage(b []byte, emit func([]phases.ComponentSpan)) error {
	chunk := make([]phases.ComponentSpan, 0, chunkSpans)
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num != 1 {
			return nil
		}
		if typ != protowire.BytesType {
			return errWireType("resource_spans")
		}
		return decodeResourceSpans(v, func(sp phases.ComponentSpan) {
			chunk = append(chunk, sp)
			if len(chunk) == chunkSpans {
				emit(chunk)
				clear(chunk)
				chunk = chunk[:0]
			}
		})
	})
	if len(chunk) > 0 {
		emit(chunk)
	}
	return err
}

// decodeResourceSpans reads one ResourceSpans: its resource (wherever it comes in the message)
// first, then its spans.
func decodeResourceSpans(b []byte, out func(phases.ComponentSpan)) error {
	service := ""
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num != 1 {
			return nil
		}
		if typ != protowire.BytesType {
			return errWireType("resource")
		}
		return fields(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
			if num != 1 {
				return nil
			}
			if typ != protowire.BytesType {
				return errWireType("resource.attributes")
			}
			key, val, err := decodeKeyValue(v)
			if err == nil && key == "service.name" {
				if s, ok := val.(string); ok {
					service = s
				}
			}
			return err
		})
	})
	if err != nil {
		return err
	}
	comp := component(service)
	return fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num != 2 {
			return nil
		}
		if typ != protowire.BytesType {
			return errWireType("scope_spans")
		}
		return fields(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
			if num != 2 {
				return nil
			}
			if typ != protowire.BytesType {
				return errWireType("spans")
			}
			sp, err := decodeSpan(comp, v)
			if err == nil {
				out(sp)
			}
			return err
		})
	})
}

// Field numbers of opentelemetry.proto.trace.v1.Span.
const (
	fieldTraceID    = 1
	fieldSpanID     = 2
	fieldParentID   = 4
	fieldName       = 5
	fieldStart      = 7
	fieldEnd        = 8
	fieldAttributes = 9
	fieldStatus     = 15
)

func decodeSpan(comp string, b []byte) (phases.ComponentSpan, error) {
	c := phases.ComponentSpan{Service: comp}
	var start, end uint64
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error {
		switch num {
		case fieldTraceID, fieldSpanID, fieldParentID:
			if typ != protowire.BytesType {
				return errWireType("span id")
			}
			switch {
			case num == fieldTraceID && len(v) == len(c.TraceID):
				copy(c.TraceID[:], v)
			case num == fieldSpanID && len(v) == len(c.SpanID):
				copy(c.SpanID[:], v)
			case num == fieldParentID && len(v) == len(c.Parent):
				copy(c.Parent[:], v)
			}
		case fieldName:
			s, err := text(typ, v, "name")
			c.Name = bound(s, maxNameLen)
			return err
		case fieldStart, fieldEnd:
			if typ != protowire.Fixed64Type {
				return errWireType("span time")
			}
			if num == fieldStart {
				start = n
			} else {
				end = n
			}
		case fieldAttributes:
			if typ != protowire.BytesType {
				return errWireType("attributes")
			}
			key, val, err := decodeKeyValue(v)
			if err != nil || val == nil || len(c.Attrs) == maxAttrs || strings.HasPrefix(key, reservedPrefix) {
				return err
			}
			c.Attrs = append(c.Attrs, phases.Attr{Key: bound(key, maxKeyLen), Value: val})
		case fieldStatus:
			if typ != protowire.BytesType {
				return errWireType("status")
			}
			return fields(v, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error {
				switch num {
				case 2:
					s, err := text(typ, v, "status.message")
					c.StatusMessage = s
					return err
				case 3:
					if typ != protowire.VarintType {
						return errWireType("status.code")
					}
					c.Error = n == 2 // STATUS_CODE_ERROR
				}
				return nil
			})
		}
		return nil
	})
	if c.Error {
		c.StatusMessage = bound(c.StatusMessage, maxValueLen)
	} else {
		c.StatusMessage = ""
	}
	c.Start, c.End = unixNano(start), unixNano(end)
	return c, err
}

// unixNano reads an OTLP timestamp; one past what a time.Time of int64 nanoseconds holds is
// clamped there, so a hostile or broken clock gives a far time, not a negative one.
func unixNano(n uint64) time.Time {
	if n > math.MaxInt64 {
		n = math.MaxInt64
	}
	return time.Unix(0, int64(n)).UTC()
}

// decodeKeyValue reads a KeyValue: its key, and its value when it is a string, an integer, a
// boolean or a double (nil for any other).
func decodeKeyValue(b []byte) (key string, val any, err error) {
	err = fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		switch num {
		case 1:
			var err error
			key, err = text(typ, v, "key")
			return err
		case 2:
			if typ != protowire.BytesType {
				return errWireType("value")
			}
			return fields(v, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error {
				var err error
				switch num {
				case 1:
					var s string
					s, err = text(typ, v, "string_value")
					val = bound(s, maxValueLen)
				case 2:
					if typ != protowire.VarintType {
						return errWireType("bool_value")
					}
					val = n != 0
				case 3:
					if typ != protowire.VarintType {
						return errWireType("int_value")
					}
					val = int64(n)
				case 4:
					if typ != protowire.Fixed64Type {
						return errWireType("double_value")
					}
					val = math.Float64frombits(n)
				default:
					val = nil // a later field of the oneof wins, as in proto.Unmarshal
				}
				return err
			})
		}
		return nil
	})
	return key, val, err
}

// fields calls f for each field of an encoded message: its number, wire type, and its bytes
// (length-delimited) or number (varint, fixed32, fixed64). Groups and unknown fields are
// checked and skipped.
func fields(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errMalformed(n)
		}
		b = b[n:]
		var (
			v   []byte
			x   uint64
			err error
		)
		switch typ {
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.Fixed64Type:
			x, n = protowire.ConsumeFixed64(b)
		case protowire.Fixed32Type:
			var x32 uint32
			x32, n = protowire.ConsumeFixed32(b)
			x = uint64(x32)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return errMalformed(n)
		}
		b = b[n:]
		if typ == protowire.StartGroupType {
			continue
		}
		if err = f(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}

// text reads a string field, refusing invalid UTF-8 as proto3 does.
func text(typ protowire.Type, v []byte, field string) (string, error) {
	if typ != protowire.BytesType {
		return "", errWireType(field)
	}
	if !utf8.Valid(v) {
		return "", fmt.Errorf("%w: %s: invalid UTF-8", errBadMessage, field)
	}
	return string(v), nil
}

// errBadMessage marks a request that is not a valid encoded ExportTraceServiceRequest.
var errBadMessage = errors.New("not an OTLP ExportTraceServiceRequest")

func errMalformed(n int) error { return fmt.Errorf("%w: %v", errBadMessage, protowire.ParseError(n)) }
func errWireType(field string) error {
	return fmt.Errorf("%w: %s has the wrong wire type", errBadMessage, field)
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
