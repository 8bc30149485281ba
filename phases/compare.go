package phases

import "time"

// AtOrBefore reports whether a controller's step, by its stamps, came at or before the change
// the other stamps observed (a Pod's creation, its deletion). Steps of one owner can be two
// seconds apart or less (a wave of a rolling update waits for a readiness probe; with room to
// surge the next comes at once), closer than whole-second stamps and a slack for clocks can
// tell: the stamps compared are those of one clock and precision, nanosecond event names (the
// controllers' clock: a ScalingReplicaSet event is stamped after the ReplicaSet's update
// returned, a SuccessfulCreate after the Pod's create did), then readyspan's receive times.
// Only with no such pair are the best stamps compared, a whole second's stamp read as the end
// of its second.
func AtOrBefore(step, change Times) bool {
	if s, c, ok := SamePrecision(step, change); ok {
		return s <= c
	}
	s, sok := step.Resolve()
	c, cok := change.Resolve()
	if !sok || !cok {
		return sok
	}
	latest := c.At
	if c.Source.Precision() == time.Second {
		latest += Instant(time.Second)
	}
	return s.At <= latest
}

// SamePrecision returns the stamps AtOrBefore compares first: of one source, the most precise
// that both have, and whether they have one.
func SamePrecision(step, change Times) (Instant, Instant, bool) {
	for _, src := range [...]Source{SourceEventName, SourceWatch} {
		s, sok := StampFrom(step, src)
		c, cok := StampFrom(change, src)
		if sok && cok {
			return s, c, true
		}
	}
	return 0, 0, false
}

// StampFrom is the earliest stamp of one source.
func StampFrom(t Times, src Source) (Instant, bool) {
	var at Instant
	for _, s := range t {
		if s.Source == src && (at == 0 || s.At < at) {
			at = s.At
		}
	}
	return at, at != 0
}

// FirstOf is the earliest of the stamps, whatever their source: the zero time when there is
// none.
func FirstOf(t Times) time.Time {
	s, _ := t.Earliest()
	return s.Time()
}

// FirstInstant is the stamp Resolve picks as the best, as an instant: zero when there is none.
func FirstInstant(t Times) Instant {
	s, _ := t.Resolve()
	return s.At
}
