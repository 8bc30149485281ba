package phases

import (
	"strconv"
	"time"
)

// Source says where a timestamp came from. Sources differ in precision and in whose clock they
// read, so every span records the source of its start and of its end (by its name, String).
// It is a small number rather than its name so that a stamp, a bound or a point holds no pointer
// for it: a trace's observations and spans hold a few hundred of them, all of which the garbage
// collector would otherwise follow. The zero Source is none.
type Source uint8

const (
	// SourceEventTime is an events.k8s.io eventTime or series.lastObservedTime (MicroTime, 1 µs),
	// stamped by the emitting component.
	SourceEventTime Source = iota + 1
	// SourceEventName is the hex UnixNano suffix of an Event's metadata.name (1 ns), stamped by
	// the emitting component when it built the event. Not an API contract, but how names are made.
	SourceEventName
	// SourceWatch is readyspan's own receive time of the watch event that first showed the change.
	// It is an upper bound: the change happened before readyspan saw it.
	SourceWatch
	// SourceStatus is a status field (condition lastTransitionTime, startTime, container
	// startedAt): whole seconds, truncated, on the writer's clock.
	SourceStatus
	// SourceMetadata is creationTimestamp or a managedFields time: whole seconds, apiserver clock.
	SourceMetadata
	// SourceEventSeconds is a core/v1 firstTimestamp/lastTimestamp: whole seconds.
	SourceEventSeconds
	// SourceMessage is a duration stated in an event message (the kubelet's "in 4.778s").
	SourceMessage
	// SourceAudit is a kube-apiserver audit log stage timestamp (MicroTime, 1 µs, apiserver
	// clock): requestReceivedTimestamp and the ResponseComplete stageTimestamp.
	SourceAudit
	// SourceDerived means the boundary was taken from a neighbouring boundary because nothing
	// observed it; such spans also carry readyspan.time.observed=false.
	SourceDerived
	// SourceComponentSpan is a component's own span (kube-apiserver, kubelet, containerd), as
	// it exported it over OTLP (1 ns, the component's clock): a joined span's start and end.
	SourceComponentSpan
)

// String is the source's name, as spans record it (readyspan.time.source.*): event-time,
// event-name, watch, status, metadata, event-seconds, message, audit or derived.
func (s Source) String() string {
	if name, ok := sourceValue(s).(string); ok {
		return name
	}
	return "source(" + strconv.Itoa(int(s)) + ")"
}

// Precision is the resolution of a source, as recorded on spans.
func (s Source) Precision() time.Duration {
	switch s {
	case SourceEventName, SourceComponentSpan:
		return time.Nanosecond
	case SourceEventTime, SourceAudit:
		return time.Microsecond
	case SourceWatch, SourceMessage:
		return time.Millisecond
	case SourceStatus, SourceMetadata, SourceEventSeconds:
		return time.Second
	}
	return 0
}

// rank orders sources by how much a boundary should trust them: sub-second sources stamped at
// the moment of the change first, then the watch receive time, then whole-second fields.
func (s Source) rank() uint8 {
	switch s {
	case SourceEventTime, SourceEventName, SourceAudit, SourceComponentSpan:
		return 0
	case SourceMessage:
		return 1
	case SourceWatch:
		return 2
	case SourceStatus, SourceMetadata, SourceEventSeconds:
		return 3
	}
	return 4
}

// Stamp is one observation of a boundary. Its time is an Instant, not a time.Time: a Pod's
// observation holds a hundred stamps or so, each made, compared and resolved as a number, and a
// stamp of 16 bytes with no pointer in it is half the size of one with a time.Time.
type Stamp struct {
	At     Instant
	Source Source
}

// StampOf is an observation of t by src.
func StampOf(t time.Time, src Source) Stamp { return Stamp{At: InstantOf(t), Source: src} }

// Time is the stamp's time (Instant.Time).
func (s Stamp) Time() time.Time { return s.At.Time() }

// Instant is a point in time as nanoseconds since the Unix epoch, 0 for none: a time.Time's
// wall-clock reading without its location or monotonic reading, which no observation needs
// (every output states times in UTC). A time beyond ±nanoBound of 1970, which only a
// malformed object states (a year 3000), is held at the bound: it still orders after (or
// before) every real time, where UnixNano would wrap it around.
type Instant int64

// InstantOf is t as an Instant; the zero time.Time (and the epoch itself) is none.
func InstantOf(t time.Time) Instant {
	if t.IsZero() {
		return 0
	}
	return Instant(nanoOf(t))
}

// InstantOfNano is n nanoseconds since the epoch as an Instant, held within ±nanoBound.
func InstantOfNano(n int64) Instant { return Instant(min(max(n, -nanoBound), nanoBound)) }

// Time is the instant as a time.Time in the local location, as the API's times are decoded;
// the zero time.Time for none.
func (i Instant) Time() time.Time {
	if i == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(i))
}

// Sub is i − j.
func (i Instant) Sub(j Instant) time.Duration { return time.Duration(i - j) }

// IsZero reports whether the instant is none.
func (i Instant) IsZero() bool { return i == 0 }

// Times holds every observation of one boundary; Resolve picks the best.
type Times []Stamp

// Add records an observation; zero times are ignored so callers need no checks.
func (t *Times) Add(at time.Time, src Source) {
	t.AddInstant(InstantOf(at), src)
}

// AddInstant is Add for a time held as an Instant.
func (t *Times) AddInstant(at Instant, src Source) {
	if at == 0 {
		return
	}
	for _, s := range *t {
		if s.Source == src && s.At == at {
			return
		}
	}
	*t = append(*t, Stamp{At: at, Source: src})
}

// AddFirst records an observation of a source only if that source has none yet: the first
// watch event that showed a change is the one that bounds it.
func (t *Times) AddFirst(at time.Time, src Source) {
	t.AddFirstInstant(InstantOf(at), src)
}

// AddFirstInstant is AddFirst for a time held as an Instant.
func (t *Times) AddFirstInstant(at Instant, src Source) {
	if at == 0 {
		return
	}
	for _, s := range *t {
		if s.Source == src {
			return
		}
	}
	*t = append(*t, Stamp{At: at, Source: src})
}

// Known reports whether anything observed the boundary.
func (t Times) Known() bool { return len(t) > 0 }

// consistencySlack is how far a precise stamp may fall outside the window a whole-second or
// watch stamp allows before it is treated as wrong (a different clock, a stale event).
const consistencySlack = 1500 * time.Millisecond

// Resolve returns the most precise observation that agrees with the others. A whole-second
// stamp s says the change happened in [s, s+1s); a watch stamp w says it happened before w.
// A precise stamp outside those windows (beyond consistencySlack) is skipped, and the next best
// is taken, so one skewed clock cannot drag a boundary far from the other evidence.
func (t Times) Resolve() (Stamp, bool) {
	switch len(t) {
	case 0:
		return Stamp{}, false
	case 1:
		return t[0], true // nothing to disagree with
	}
	// The candidates, most trusted first. A boundary has a handful of stamps: they are ordered
	// on the stack, by a stable insertion sort of their positions, each source ranked and each
	// time read as nanoseconds once, so resolving allocates nothing.
	var buf [resolveOnStack]rankedStamp
	c := buf[:0]
	if len(t) > len(buf) {
		c = make([]rankedStamp, 0, len(t))
	}
	for i := range t {
		c = append(c, rankedStamp{at: int32(i), rank: t[i].Source.rank(), nano: int64(t[i].At)})
	}
	for i := 1; i < len(c); i++ {
		for j := i; j > 0 && c[j].trustedBefore(c[j-1]); j-- {
			c[j], c[j-1] = c[j-1], c[j]
		}
	}
	for _, cand := range c {
		if consistent(cand, c, t) {
			return t[cand.at], true
		}
	}
	return t[c[0].at], true
}

// nanoBound bounds what nanoOf returns, either side of 1970 (about 146 years): far enough for
// any time a clock states, near enough that two such values, their difference and a few
// seconds of slack or precision stay within int64.
const nanoBound = 1<<62 - 1<<40

// nanoOf is t in nanoseconds since the epoch, held within ±nanoBound (Instant).
func nanoOf(t time.Time) int64 {
	s := t.Unix()
	switch {
	case s > nanoBound/int64(time.Second):
		return nanoBound
	case s < -nanoBound/int64(time.Second):
		return -nanoBound
	}
	return s*int64(time.Second) + int64(t.Nanosecond()) // UnixNano, the seconds read once
}

// resolveOnStack is how many stamps of one boundary Resolve orders without allocating; more are
// ordered all the same, on the heap.
const resolveOnStack = 8

// rankedStamp is a stamp for Resolve: its position in the Times, the rank of its source and its
// time in nanoseconds since the epoch (the Instant). A boundary's stamps are compared with each other
// pairwise, and comparing time.Times (and offsetting them by the slack) cost more than the rest
// of resolving.
type rankedStamp struct {
	nano int64
	at   int32 // its position in the Times
	rank uint8
}

// trustedBefore orders stamps for Resolve: by the rank of their source, then earliest first.
func (a rankedStamp) trustedBefore(b rankedStamp) bool {
	if a.rank != b.rank {
		return a.rank < b.rank
	}
	return a.nano < b.nano
}

// consistent reports whether cand falls inside the windows the less trusted stamps allow.
func consistent(cand rankedStamp, all []rankedStamp, t Times) bool {
	for _, o := range all {
		if o.rank <= cand.rank {
			continue
		}
		switch t[o.at].Source {
		case SourceWatch:
			if cand.nano > o.nano+int64(consistencySlack) {
				return false
			}
		case SourceStatus, SourceMetadata, SourceEventSeconds:
			if cand.nano < o.nano-int64(consistencySlack) || cand.nano > o.nano+int64(time.Second+consistencySlack) {
				return false
			}
		}
	}
	return true
}

// Earliest returns the earliest observation of any source (used for lower bounds).
func (t Times) Earliest() (Stamp, bool) {
	if len(t) == 0 {
		return Stamp{}, false
	}
	best := t[0]
	for _, s := range t[1:] {
		if s.At < best.At {
			best = s
		}
	}
	return best, true
}

// Shift returns the observations of one source moved by d (clock-skew correction).
func (t Times) Shift(src Source, d time.Duration) Times {
	if d == 0 {
		return t
	}
	out := make(Times, len(t))
	for i, s := range t {
		if s.Source == src {
			s.At = InstantOf(s.Time().Add(d))
		}
		out[i] = s
	}
	return out
}
