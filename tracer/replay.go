package tracer

import (
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/watch"
)

// Replay feeds deltas to a correlator as the live watch would, running the deadlines at each
// receive time, and flushes the Pods still starting at the end as in-progress. It returns a
// warning for each trace whose recorded timestamps contradict each other (phases.Trace.TimeWarnings): such
// a recording replays, but its figures are not to be believed, and a person should be told.
func Replay(c *Correlator, deltas []watch.Delta) []string {
	var warnings []string
	sink := c.sink
	c.sink = SinkFunc(func(tr *phases.Trace) {
		warnings = append(warnings, tr.TimeWarnings()...)
		sink.Export(tr)
	})
	defer func() { c.sink = sink }()
	for _, d := range deltas {
		if !d.Recv.IsZero() {
			c.Tick(d.Recv)
		}
		c.Handle(d)
	}
	c.Flush(phases.OutcomeInProgress)
	return warnings
}
