package phases

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"strings"
	"time"
)

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
	// A new node's startup: the node autoscalers, the cloud that boots the instance, the CNI
	// that brings its network up, the agents that remove its startup taints.
	ServiceKarpenter         = "karpenter"
	ServiceClusterAutoscaler = "cluster-autoscaler"
	ServiceCloudProvider     = "cloud-provider"
	ServiceCNI               = "cni"
	ServiceNodeAgents        = "node-agents"
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
// stand), in place: a trace ID is derived for every Pod, so without building the dashless copy,
// and each digit's value read from a table (a switch per digit was ~1,400 instructions a UID).
func uuidBytes(uid string) (TraceID, bool) {
	var id TraceID
	k, hi, half := 0, byte(0), false // bytes done; the high digit read, when half a byte is
	for i := 0; i < len(uid); i++ {
		c := uid[i]
		if c == '-' {
			continue
		}
		v := hexDigits[c]
		if v == notHexDigit || k == len(id) {
			return TraceID{}, false
		}
		if !half {
			hi, half = v<<4, true
			continue
		}
		id[k], half = hi|v, false
		k++
	}
	return id, k == len(id) && !half
}

// hexDigits is the value of each hex digit, either case, as encoding/hex reads it; notHexDigit
// for every other byte.
var hexDigits = func() (t [256]byte) {
	for c := range t {
		t[c] = notHexDigit
	}
	for v, c := range "0123456789abcdef" {
		t[c] = byte(v)
	}
	for v, c := range "ABCDEF" {
		t[c] = byte(10 + v)
	}
	return t
}()

const notHexDigit = 0xff

// SpanIDFor derives a span ID from the Pod UID and the span's path (name plus container), so a
// restarted readyspan, or a second replica, produces the same IDs for the same Pod. The hash is
// 64-bit FNV-1a of UID, NUL, path, its bits spread by SplitMix64's finaliser: a span ID is
// derived for every span of every trace, and it needs to be stable and distinct within a trace,
// not secret (SHA-256 was a sixth of drawing a trace).
func SpanIDFor(uid, path string) SpanID { return spanIDSeedFor(uid).spanID(path) }

// spanIDSeed is the hash's state after a UID and the NUL: the spans of one trace share it, and
// each hashes only its path from there.
type spanIDSeed uint64

const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

func spanIDSeedFor(uid string) spanIDSeed {
	h := uint64(fnvOffset64)
	for i := 0; i < len(uid); i++ {
		h = (h ^ uint64(uid[i])) * fnvPrime64
	}
	return spanIDSeed(h * fnvPrime64) // the NUL between UID and path
}

func (seed spanIDSeed) spanID(path string) SpanID {
	h := uint64(seed)
	for i := 0; i < len(path); i++ {
		h = (h ^ uint64(path[i])) * fnvPrime64
	}
	h = mix64(h)
	if h == 0 {
		h = 1 // the zero ID means "no parent"
	}
	var id SpanID
	binary.BigEndian.PutUint64(id[:], h)
	return id
}

// mix64 is SplitMix64's finaliser: every input bit changes about half the output bits.
func mix64(h uint64) uint64 {
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

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
	SpanID        SpanID
	ParentSpanID  SpanID
	Start         time.Time
	End           time.Time
	Status        StatusCode
	StatusMessage string
	// StartBound and EndBound say where the span's start and end came from. A span drawn from
	// observations (every span of a Pod's trace) has both; one that states its bounds in its
	// attributes itself (a rollout's) has neither: Source is zero.
	StartBound, EndBound Bound
	Attrs                []Attr
	// notes are the span's events and links (Events, Links, AddEvent, AddLink), nil when it has
	// neither, as nearly every span has: two slices inline were a fifth of every span, and the
	// spans are most of what reconstructing a Pod's startup allocates. A copy of a span shares
	// them until DropNotes.
	notes *spanNotes
}

type spanNotes struct {
	events []Event
	links  []Link
}

// Events are the span's events: points in time on it.
func (s *Span) Events() []Event {
	if s.notes == nil {
		return nil
	}
	return s.notes.events
}

// Links are the span's links to spans of other traces.
func (s *Span) Links() []Link {
	if s.notes == nil {
		return nil
	}
	return s.notes.links
}

// AddEvent appends events to the span's.
func (s *Span) AddEvent(es ...Event) {
	if len(es) > 0 {
		s.noted().events = append(s.noted().events, es...)
	}
}

// AddLink appends links to the span's.
func (s *Span) AddLink(ls ...Link) {
	if len(ls) > 0 {
		s.noted().links = append(s.noted().links, ls...)
	}
}

// DropNotes removes the span's events and links: a copy of a span that is to have its own.
func (s *Span) DropNotes() { s.notes = nil }

func (s *Span) noted() *spanNotes {
	if s.notes == nil {
		s.notes = new(spanNotes)
	}
	return s.notes
}

// Bound is what a drawn span states about one of its ends: the readyspan.time.* attributes,
// kept as fields because every span of every trace has two (about two thirds of a trace's
// attributes) and an attribute list of them was a tenth of reconstructing a trace. BoundAttrs
// writes them out as attributes; Attr reads them as one. It is 8 bytes: the uncertainty, at
// most a second, is held in nanoseconds in an int32.
type Bound struct {
	uncertainty int32
	// Source is where the time came from: SourceDerived when nothing observed it.
	Source Source
	// Observed is false for a bound taken from a neighbouring boundary.
	Observed bool
}

// Uncertainty is the width of the window the observed time lies in; 0 states none.
func (b Bound) Uncertainty() time.Duration { return time.Duration(b.uncertainty) }

// BoundFrom is what a span end at a resolved stamp states, for a trace drawn outside Build (a
// node's): observed unless the stamp is none or derived, with a whole-second stamp's window.
func BoundFrom(s Stamp) Bound {
	if s.At == 0 || s.Source == 0 || s.Source == SourceDerived {
		return Bound{Source: SourceDerived}
	}
	b := Bound{Source: s.Source, Observed: true}
	if s.Source.Precision() == time.Second {
		b.uncertainty = int32(time.Second)
	}
	return b
}

// maxUncertainty is the widest uncertainty a Bound holds: 2.1 s, beyond the second the widest
// window (a whole-second stamp's) spans.
const maxUncertainty = math.MaxInt32 * time.Nanosecond

// boundAttrsMax is the most attributes BoundAttrs writes: source, precision and uncertainty of
// each end, and observed.
const boundAttrsMax = 7

// BoundAttrs appends the span's bounds to dst as the attributes they stand for: each end's
// source (readyspan.time.source.*), precision (readyspan.time.precision.*) and, when one is
// stated, uncertainty in ms; readyspan.time.observed=false when either end was not observed.
// A span without bounds adds nothing.
func (s *Span) BoundAttrs(dst []Attr) []Attr {
	if s.StartBound.Source == 0 {
		return dst
	}
	dst = append(dst,
		Attr{AttrSourceStart, sourceValue(s.StartBound.Source)},
		Attr{AttrSourceEnd, sourceValue(s.EndBound.Source)},
		Attr{AttrPrecisionStart, precisionOf(s.StartBound.Source)},
		Attr{AttrPrecisionEnd, precisionOf(s.EndBound.Source)},
	)
	if s.StartBound.Observed && s.StartBound.uncertainty > 0 {
		dst = append(dst, Attr{AttrUncertaintyStart, millisValue(s.StartBound.Uncertainty())})
	}
	if s.EndBound.Observed && s.EndBound.uncertainty > 0 {
		dst = append(dst, Attr{AttrUncertaintyEnd, millisValue(s.EndBound.Uncertainty())})
	}
	if (!s.StartBound.Observed || !s.EndBound.Observed) && !hasAttr(s.Attrs, AttrObserved) {
		dst = append(dst, Attr{AttrObserved, false})
	}
	return dst
}

// AllAttrs is every attribute of the span: its bounds' (BoundAttrs), then Attrs but those whose
// key a bound states (BoundShadows): the bounds are readyspan's statement of where the span's
// times came from, and an attribute copied from elsewhere does not override it.
func (s *Span) AllAttrs() []Attr {
	if s.StartBound.Source == 0 {
		return s.Attrs
	}
	out := s.BoundAttrs(make([]Attr, 0, boundAttrsMax+len(s.Attrs)))
	bounds := out[:len(out):len(out)]
	for _, a := range s.Attrs {
		if !BoundShadows(bounds, a.Key) {
			out = append(out, a)
		}
	}
	return out
}

// boundPrefix begins the key of every attribute BoundAttrs writes.
const boundPrefix = "readyspan.time."

// BoundShadows reports whether bounds (what BoundAttrs wrote) state key: an attribute of the
// span's Attrs with that key is not the span's, and a view or an exporter leaves it out.
func BoundShadows(bounds []Attr, key string) bool {
	return len(bounds) > 0 && strings.HasPrefix(key, boundPrefix) && hasAttr(bounds, key)
}

// Duration is End − Start.
func (s *Span) Duration() time.Duration { return s.End.Sub(s.Start) }

// Attr returns the value of the attribute key, or nil, as AllAttrs has it: the bounds, read as
// their attributes, first; else the last value of key in Attrs, the one a map built from
// AllAttrs holds (a copy of a component's span has readyspan's own attributes last).
func (s *Span) Attr(key string) any {
	if s.StartBound.Source != 0 && strings.HasPrefix(key, boundPrefix) {
		var buf [boundAttrsMax]Attr
		for _, a := range s.BoundAttrs(buf[:0]) {
			if a.Key == key {
				return a.Value
			}
		}
	}
	for i := len(s.Attrs) - 1; i >= 0; i-- {
		if s.Attrs[i].Key == key {
			return s.Attrs[i].Value
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
	// Options are the ones it was built with: drawing it again from Pod (a stage that learned
	// more of it) takes the same.
	Options Options
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
