package tracer

import (
	"context"
	"time"

	"github.com/readyspan/readyspan/watch"
)

// DeadlineTick is how often the correlator runs the rollouts' deadlines, prunes and publishes
// its gauges. A Pod's own deadlines (its settle time, the endpoints wait, stuck and failed) wake
// the loop at their moment, without waiting for a tick.
const DeadlineTick = 200 * time.Millisecond

// Loop feeds the watcher's deltas to the correlator, wakes it when a Pod's deadline comes
// (NextDue), runs its other deadlines and gauges every tick, and hands each delta to tap (the
// recorder) first. It returns when ctx ends.
func Loop(ctx context.Context, deltas <-chan watch.Delta, c *Correlator, tick time.Duration, tap func(watch.Delta)) {
	t := time.NewTicker(tick)
	defer t.Stop()
	due := time.NewTimer(time.Hour)
	defer due.Stop()
	var armed time.Time // the due time the timer is set for, zero when it is idle
	for {
		select {
		case <-ctx.Done():
			return
		case d := <-deltas:
			if tap != nil {
				tap(d)
			}
			if c != nil {
				c.Handle(d)
			}
		case now := <-t.C:
			if c != nil {
				c.Tick(now)
			}
		case now := <-due.C:
			armed = time.Time{}
			if c != nil {
				c.RunDue(now)
			}
		}
		if c == nil {
			continue
		}
		if next := c.NextDue(); !next.Equal(armed) {
			armed = next
			wait := time.Hour // nothing due: the timer idles
			if !next.IsZero() {
				wait = max(time.Until(next), 0)
			}
			due.Reset(wait)
		}
	}
}
