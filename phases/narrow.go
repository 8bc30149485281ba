package phases

import "time"

// Whole-second stamps (condition lastTransitionTime, container startedAt, creationTimestamp,
// core/v1 event times) are truncated: a stamp t says the change happened in [t, t+1s). Where
// readyspan has no receive time to go by (explain, --backfill, a recording without receive
// times), such a stamp is a boundary only after it is narrowed by the precise stamps around it
// (event-name, event-time, audit: stamped when the thing happened, to the µs or better):
//
//   - from below by the latest precise boundary that must come before it;
//   - from above by the earliest precise stamp that must come after it.
//
// The boundary is then placed, by one of two rules:
//
//   - placeAtNext, for a kubelet step the kubelet's next event follows at once (the sandbox,
//     before the first container's first event; an init container's exit, before the next
//     container's first event): at that event, when it falls inside the interval. Against the
//     kubelet's own CRI spans, the sandbox turned ready 0.8–13.5 ms before the kubelet's next
//     container event (the image check, and for a cold image the pull-intent record, lie
//     between), so the next event is where the step ended, give or take those milliseconds.
//   - placeEarliest, for everything else (the components after it do not act at once: the
//     scheduler, the kubelet's first sync, the readiness probe): at the start of the interval,
//     the earliest moment the evidence allows, which is the stamp itself unless a precise
//     boundary before it is later.
//
// Either way the width of the interval is kept with the boundary and recorded on the spans it
// bounds (readyspan.time.uncertainty.start_ms / end_ms): the truth lies in that window. When
// the interval is empty, the stamps disagree (clocks of different components); the stamp is
// kept as it is, with a second of uncertainty, and the order check says whether the
// disagreement is beyond what precision and skew explain.

// placement is where a narrowed boundary goes inside its interval.
type placement int

const (
	placeEarliest placement = iota
	placeAtNext
)

// precise reports whether a boundary was stamped at the moment it happened, to the µs or
// better: it can bound a whole-second stamp.
func precise(p point) bool {
	return p.observed && p.src.rank() == 0 && p.uncertainty == 0
}

// narrow places a whole-second stamp inside [t, t+1s) ∩ [after, before], where after is the
// latest precise point among those that must precede it and before the earliest precise point
// among those that must follow it. Other points are returned as they are.
func narrow(p point, preceding, following []point, place placement) point {
	if !p.observed || p.src.Precision() != time.Second {
		return p
	}
	lower, upper := p.t, p.t+Instant(time.Second)
	for _, q := range preceding {
		if precise(q) && q.t > lower {
			lower = q.t
		}
	}
	boundedByNext := false
	for _, q := range following {
		if precise(q) && q.t < upper {
			upper, boundedByNext = q.t, true
		}
	}
	if upper < lower {
		p.uncertainty = time.Second
		return p
	}
	p.t = lower
	if place == placeAtNext && boundedByNext {
		p.t = upper
	}
	p.uncertainty = time.Duration(upper - lower)
	return p
}

// earliestPrecise is the earliest precise stamp of a container's steps: an upper bound for
// anything the kubelet did before turning to the container.
func earliestPrecise(cs []Container) point {
	var out point
	for i := range cs {
		if f := firstStep(&cs[i]); f.observed && (!out.observed || f.t < out.t) {
			out = f
		}
	}
	return out
}

// latestPrecise is the latest precise stamp of any container's steps: a lower bound for the
// containers being ready.
func latestPrecise(cs []Container) point {
	var out point
	for i := range cs {
		c := &cs[i]
		for _, t := range []Times{c.PullStarted, c.PullFinished, c.Created, c.Started} {
			for _, s := range t {
				if s.Source.rank() == 0 && (!out.observed || s.At > out.t) {
					out = point{t: s.At, src: s.Source, observed: true}
				}
			}
		}
	}
	return out
}
