package daemon

import (
	"context"
	"time"
)

// stageLoop drives a stage that holds traces between the correlator and the router: its own
// goroutine runs the stage's step every tick, and at once when a trace arrives (wake), so the
// correlator never waits for it.
type stageLoop struct{ kick chan struct{} }

func newStageLoop() stageLoop { return stageLoop{kick: make(chan struct{}, 1)} }

// wake has the loop step soon; it never blocks.
func (l stageLoop) wake() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// run calls step(false) every tick and after each wake until ctx ends.
func (l stageLoop) run(ctx context.Context, tick time.Duration, step func(all bool)) {
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-l.kick:
		}
		step(false)
	}
}
