// Package tracecontext reads the trace context a CI pipeline or a controller stores on a
// Kubernetes object: the annotation tracing.k8s.io/traceparent (KEP-5915), whose value is a W3C
// Trace Context traceparent. Parsing is strict (W3C Trace Context level 1): anything the spec
// does not accept is refused with one of a small fixed set of reasons, which readyspan counts.
// It imports only the standard library, so the pure models (phases, rollout) can hold a Context.
package tracecontext

import (
	"encoding/hex"
	"strings"
)

// Annotation is the key KEP-5915 reserves for a W3C traceparent on any object.
const Annotation = "tracing.k8s.io/traceparent"

// MaxLen bounds what is read of a value: a version-00 traceparent is 55 bytes, and a future
// version may append fields; anything past this is refused unread.
const MaxLen = 256

// Reason is why a value was ignored: a label value of readyspan_trace_context_ignored_total.
type Reason string

// The reasons, a fixed set (bounded labels).
const (
	// ReasonTooLong: longer than MaxLen.
	ReasonTooLong Reason = "too_long"
	// ReasonMalformed: not the traceparent's shape (length, dashes, lowercase hex).
	ReasonMalformed Reason = "malformed"
	// ReasonVersion: the version ff, which the spec forbids.
	ReasonVersion Reason = "invalid_version"
	// ReasonZeroID: an all-zero trace ID or parent (span) ID, which the spec calls invalid.
	ReasonZeroID Reason = "zero_id"
)

// Reasons lists every Reason, for metrics that pre-declare their label values.
var Reasons = []Reason{ReasonTooLong, ReasonMalformed, ReasonVersion, ReasonZeroID}

// Context is a parsed traceparent: the trace and the span (the parent-id field) that the
// object's writer was in, and its trace flags.
type Context struct {
	TraceID [16]byte
	SpanID  [8]byte
	Flags   byte
}

// IsZero reports whether c is unset.
func (c Context) IsZero() bool { return c.TraceID == [16]byte{} }

// String is c as a version-00 traceparent.
func (c Context) String() string {
	return "00-" + hex.EncodeToString(c.TraceID[:]) + "-" + hex.EncodeToString(c.SpanID[:]) + "-" +
		hex.EncodeToString([]byte{c.Flags})
}

// v00Len is the length of a version-00 traceparent: 2+1+32+1+16+1+2.
const v00Len = 55

// Parse reads a traceparent. Version 00 must be exactly 55 bytes; a higher version is read on
// its first 55 bytes, and anything after them must start with a dash (the spec's rule for
// versions it does not know yet). Only lowercase hex is accepted, as the spec says.
func Parse(s string) (Context, Reason, bool) {
	if len(s) > MaxLen {
		return Context{}, ReasonTooLong, false
	}
	if len(s) < v00Len || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return Context{}, ReasonMalformed, false
	}
	var ver [1]byte
	if !lowerHex(ver[:], s[0:2]) {
		return Context{}, ReasonMalformed, false
	}
	switch {
	case ver[0] == 0xff:
		return Context{}, ReasonVersion, false
	case ver[0] == 0 && len(s) != v00Len:
		return Context{}, ReasonMalformed, false
	case len(s) > v00Len && s[v00Len] != '-':
		return Context{}, ReasonMalformed, false
	}
	var c Context
	var flags [1]byte
	if !lowerHex(c.TraceID[:], s[3:35]) || !lowerHex(c.SpanID[:], s[36:52]) || !lowerHex(flags[:], s[53:55]) {
		return Context{}, ReasonMalformed, false
	}
	c.Flags = flags[0]
	if c.TraceID == [16]byte{} || c.SpanID == [8]byte{} {
		return Context{}, ReasonZeroID, false
	}
	return c, "", true
}

// lowerHex decodes s (exactly 2*len(dst) lowercase hex digits) into dst.
func lowerHex(dst []byte, s string) bool {
	if len(s) != 2*len(dst) {
		return false
	}
	for i := range dst {
		hi, ok1 := nibble(s[2*i])
		lo, ok2 := nibble(s[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

func nibble(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// Bound is what an informer's Transform keeps of an annotation's value: the value itself when
// it is at most MaxLen bytes, else its first MaxLen+1 bytes, so the value held stays bounded
// and Parse still refuses it as too long (and it is counted).
func Bound(v string) string {
	if len(v) > MaxLen {
		return strings.Clone(v[:MaxLen+1]) // a copy: a slice would hold the whole value
	}
	return v
}

// Counter counts the values ignored, by reason.
type Counter interface {
	TraceContextIgnored(reason Reason)
}
