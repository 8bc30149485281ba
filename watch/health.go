package watch

import (
	"context"
	"fmt"
	"time"
)

// An outage is the apiserver not answering, or one resource's list and watch failing, since a
// moment; readiness reports it once it has lasted longer than the grace below, so one lost answer
// or a watch closed and reopened at once is not an outage.
type outage struct {
	since time.Time
	err   string
}

// outageGrace is how long the apiserver may not answer, or a list and watch fail, before
// /readyz says so: two of FollowReachability's probes, and longer than a reflector's first
// retries (800 ms, doubling) after a closed connection.
var outageGrace = 10 * time.Second

// FollowReachability asks ping (the apiserver's version, as at start) every interval until ctx
// ends, and remembers since when it has failed: a readyspan cut off from the apiserver is not
// ready, although its informers only find out when their connections time out.
func (w *Watcher) FollowReachability(ctx context.Context, every time.Duration, ping func(context.Context) error) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		asked := time.Now() // an outage starts with the question it left unanswered, not its timeout
		err := ping(ctx)
		if ctx.Err() != nil {
			return
		}
		w.mu.Lock()
		switch {
		case err == nil:
			if !w.unreachable.since.IsZero() {
				w.log.Info("Apiserver answers again", "after", time.Since(w.unreachable.since).Round(time.Millisecond).String())
			}
			w.unreachable = outage{}
		case w.unreachable.since.IsZero():
			w.unreachable = outage{since: asked, err: err.Error()}
			w.log.Warn("Apiserver does not answer", "err", err.Error())
		default:
			w.unreachable.err = err.Error()
		}
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// watchFailed remembers that a resource's list or watch failed, from the first failure on.
func (w *Watcher) watchFailed(r Resource, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if o, ok := w.failing[r]; ok {
		o.err = err.Error()
		w.failing[r] = o
		return
	}
	w.failing[r] = outage{since: time.Now(), err: err.Error()}
}

// watchWorks forgets a resource's failures, a refusal included: a list completed or a watch
// opened. (Once per request, not once per object received: a resource the refusal hid may
// well be empty.)
func (w *Watcher) watchWorks(r Resource) {
	w.mu.Lock()
	delete(w.failing, r)
	delete(w.forbidden, string(r))
	w.mu.Unlock()
}

// outageProblem is the readiness line for the oldest outage past the grace, or "". Holds w.mu.
func (w *Watcher) outageProblem(now time.Time) string {
	if o := w.unreachable; !o.since.IsZero() && now.Sub(o.since) >= outageGrace {
		return fmt.Sprintf("the apiserver has not answered for %s: %s", now.Sub(o.since).Round(time.Second), o.err)
	}
	var oldest Resource
	for r, o := range w.failing {
		if oldest == "" || o.since.Before(w.failing[oldest].since) {
			oldest = r
		}
	}
	if o, ok := w.failing[oldest]; ok && now.Sub(o.since) >= outageGrace {
		return fmt.Sprintf("listing and watching %s has failed for %s: %s", oldest, now.Sub(o.since).Round(time.Second), o.err)
	}
	return ""
}
