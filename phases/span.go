package phases

import (
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// Phase names, in causal order. Every trace has all six.
const (
	PhaseSubmit      = "submit"
	PhaseAPIServer   = "apiserver"
	PhaseControllers = "controllers"
	PhaseScheduling  = "scheduling"
	PhaseKubelet     = "kubelet"
	PhaseStatus      = "status"
)

// Phases lists the six phases in order.
var Phases = []string{PhaseSubmit, PhaseAPIServer, PhaseControllers, PhaseScheduling, PhaseKubelet, PhaseStatus}

// RootSpanName is the name of the span that covers the whole startup.
const RootSpanName = "pod.startup"

// Service names: the component that owns each phase, so trace viewers colour by component.
const (
	ServiceReadyspan  = "readyspan"
	ServiceAPIServer  = "kube-apiserver"
	ServiceController = "kube-controller-manager"
	ServiceScheduler  = "kube-scheduler"
	ServiceKubelet    = "kubelet"
	ServiceClient     = "kubectl"
)

// TraceID is a 16-byte trace ID; SpanID an 8-byte span ID.
type (
	TraceID [16]byte
	SpanID  [8]byte
)

func (t TraceID) String() string { return hex.EncodeToString(t[:]) }
func (s SpanID) String() string  { return hex.EncodeToString(s[:]) }

// IsZero reports whether the span ID is unset (a root span's parent).
func (s SpanID) IsZero() bool { return s == SpanID{} }

// TraceIDFor derives the trace ID from a Pod UID: the UUID's 16 bytes, so the trace ID is the
// UID without dashes. A UID that is not a UUID is hashed, still deterministically.
func TraceIDFor(uid string) TraceID {
	if id, ok := uuidBytes(uid); ok {
		return id
	}
	var id TraceID
	sum := sha256.Sum256([]byte(uid))
	copy(id[:], sum[:16])
	return id
}

// uuidBytes decodes the 32 hex digits of a UID once its dashes are dropped (wherever they
// stand), in place: a trace ID is derived for every Pod, so without building the dashless copy.
func uuidBytes(uid string) (TraceID, bool) {
	var id TraceID
	n := 0 // hex digits decoded
	for i := 0; i < len(uid); i++ {
		if uid[i] == '-' {
			continue
		}
		v, ok := hexValue(uid[i])
		if !ok || n == 2*len(id) {
			return TraceID{}, false
		}
		id[n/2] |= v << (4 * (1 - n%2))
		n++
	}
	return id, n == 2*len(id)
}

// hexValue is the value of one hex digit, either case, as encoding/hex reads it.
func hexValue(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// SpanIDFor derives a span ID from the Pod UID and the span's path (name plus container), so a
// restarted readyspan, or a second replica, produces the same IDs for the same Pod.
func SpanIDFor(uid, path string) SpanID {
	// The hash input is built in a buffer on the stack: a span ID is derived for every span.
	var buf [spanIDInputOnStack]byte
	in := append(append(append(buf[:0], uid...), 0), path...)
	sum := sha256.Sum256(in)
	var id SpanID
	copy(id[:], sum[:8])
	if id.IsZero() {
		id[7] = 1
	}
	return id
}

// spanIDInputOnStack is the longest UID and path SpanIDFor hashes without allocating: a UUID
// and the longest container step path, with room to spare. Longer ones are hashed all the same.
const spanIDInputOnStack = 192

// StatusCode is a span's outcome.
type StatusCode int

const (
	StatusUnset StatusCode = iota
	StatusOK
	StatusError
)

// Attr is one span attribute. Value is a string, int64, float64 or bool.
type Attr struct {
	Key   string
	Value any
}

// Event is a point in time on a span (a FailedScheduling attempt, a probe failure).
type Event struct {
	Name  string
	Time  time.Time
	Attrs []Attr
}

// Link points from a span to a span of another trace: a rollout's Pod to the Pod's own trace,
// and back.
type Link struct {
	TraceID TraceID
	SpanID  SpanID
	Attrs   []Attr
}

// Span is one reconstructed interval. Path is unique within the trace and seeds the span ID.
type Span struct {
	Name          string
	Path          string
	Service       string
	TraceID       TraceID
	SpanID        SpanID
	ParentSpanID  SpanID
	Start         time.Time
	End           time.Time
	Status        StatusCode
	StatusMessage string
	Attrs         []Attr
	Events        []Event
	Links         []Link
}

// Duration is End − Start.
func (s *Span) Duration() time.Duration { return s.End.Sub(s.Start) }

// Attr returns the value of the attribute key, or nil.
func (s *Span) Attr(key string) any {
	for _, a := range s.Attrs {
		if a.Key == key {
			return a.Value
		}
	}
	return nil
}

// Trace is the reconstruction of one Pod's startup: the root span first, then its descendants
// in start order.
type Trace struct {
	TraceID TraceID
	Pod     *Pod
	Spans   []Span
	Summary Summary
}

// Root returns the pod.startup span.
func (t *Trace) Root() *Span { return &t.Spans[0] }

// Phase returns the span of a phase by name, or nil.
func (t *Trace) Phase(name string) *Span {
	for i := range t.Spans {
		if t.Spans[i].Name == name && t.Spans[i].ParentSpanID == t.Spans[0].SpanID {
			return &t.Spans[i]
		}
	}
	return nil
}

// Find returns the first span with the given path, or nil.
func (t *Trace) Find(path string) *Span {
	for i := range t.Spans {
		if t.Spans[i].Path == path {
			return &t.Spans[i]
		}
	}
	return nil
}
