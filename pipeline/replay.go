package pipeline

import (
	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/watch"
)

// Replay rebuilds the traces of a recording offline: its deltas through the correlator as the
// live watch would have fed them, the deadlines run at each receive time, and the Pods still
// starting at the end flushed as in progress. A replay traces the Pods already Ready when the
// recording began (Backfill) and exports at once (no Settle: nothing arrives late). It returns
// a warning for each trace whose recorded times contradict each other.
func Replay(o Options, deltas []watch.Delta, s Sinks) []string {
	o.Trace.Backfill, o.Trace.Settle = true, 0
	corr := correlator(o, Env{}, s)
	if corr == nil {
		return nil
	}
	return tracer.Replay(corr, deltas)
}
