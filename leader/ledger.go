package leader

import (
	"time"

	"github.com/readyspan/readyspan/phases"
)

// RecentWindow is how long exported UIDs and standby traces are remembered, and how far back a
// replica that may take over traces Pods it finds already Ready.
const RecentWindow = 2 * time.Minute

// ledger remembers recent exports and, while standing by, what would have been exported; it
// decides what a new leader owes. It does no locking: Gate serializes it.
type ledger struct {
	exported []stamped // UIDs this process exported, oldest first
	standby  []standbyTrace
	// prevAlive is when the previous leader was last known alive, set at takeover: a Pod this
	// process found already Ready is owed only if it became Ready after that, and not in skip
	// (what the previous leader said it exported last).
	prevAlive time.Time
	skip      map[string]bool
}

type stamped struct {
	uid string
	at  time.Time
}

type standbyTrace struct {
	t  *phases.Trace
	at time.Time
}

func (l *ledger) noteExported(uid string, now time.Time) {
	l.exported = append(l.exported, stamped{uid, now})
	for len(l.exported) > 0 && now.Sub(l.exported[0].at) > RecentWindow {
		l.exported = l.exported[1:]
	}
}

func (l *ledger) keepStandby(t *phases.Trace, now time.Time) {
	l.standby = append(l.standby, standbyTrace{t, now})
	for len(l.standby) > 0 && now.Sub(l.standby[0].at) > RecentWindow {
		l.standby = l.standby[1:]
	}
}

// takeOver returns the standby traces of Pods that became Ready after the previous leader
// last proved it was alive, and forgets the rest.
func (l *ledger) takeOver(prevAlive time.Time, skip map[string]bool) []*phases.Trace {
	l.prevAlive, l.skip = prevAlive, skip
	var out []*phases.Trace
	for _, s := range l.standby {
		if l.owed(s.t) {
			out = append(out, s.t)
		}
	}
	l.standby = nil
	return out
}

// owed reports whether a leader should export a trace: always without leader election; after
// a takeover, unless the previous leader exported it: it says so in its handover when it
// stopped gracefully, else it is assumed to have exported what became Ready (or ended) before
// it was last alive.
func (l *ledger) owed(t *phases.Trace) bool {
	if l.skip != nil {
		// The previous leader said what it exported: everything else recent is owed. (Its
		// view can lag: a Pod Ready just before it stopped may not have reached it.)
		return !l.skip[t.Pod.UID]
	}
	return l.prevAlive.IsZero() || readySeen(t).After(l.prevAlive)
}

// readySeen is when this process saw the Pod turn Ready. For a Pod that was Ready when it
// started, only the whole-second condition time is known: the latest moment it can stand for
// is used, so an ambiguous second leads to a duplicate (the same trace IDs) rather than a loss.
// Traces that did not end Ready count from when they ended.
func readySeen(t *phases.Trace) time.Time {
	var status time.Time
	for _, s := range t.Pod.Ready {
		switch s.Source {
		case phases.SourceWatch:
			return s.Time()
		case phases.SourceStatus:
			status = s.Time().Add(time.Second - time.Nanosecond)
		}
	}
	if !status.IsZero() {
		return status
	}
	return t.Root().End
}

// record is what to leave behind when stopping at now: the UIDs exported within RecentWindow.
func (l *ledger) record(now time.Time) Record {
	r := Record{StoppedAt: now.UTC()}
	for _, e := range l.exported {
		if now.Sub(e.at) <= RecentWindow {
			r.Exported = append(r.Exported, e.uid)
		}
	}
	return r
}
