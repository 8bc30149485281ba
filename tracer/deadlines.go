package tracer

import (
	"container/heap"
	"time"

	"github.com/readyspan/readyspan/objects"
)

// Between watch events, only time can finish a Pod's trace: the settle time after it was found
// complete, the wait for its endpoints after Ready, --fail-after after a persistent failure,
// --stuck-after after creation. Each in-flight Pod's next such moment (its due time) sits in a
// min-heap, so a tick looks at the Pods whose moment has come and not at all the others: with
// 20,000 Pods in flight a tick that checked every Pod every 200 ms was three quarters of
// readyspan's CPU.

// dueTime is the next moment at which check could finish the Pod without a new watch event,
// zero when there is none (check never finishes it on the clock alone). It follows check
// branch by branch.
func (c *Correlator) dueTime(ps *tracked) time.Time {
	p := ps.Pod()
	if !ps.DeletedAt().IsZero() && !objects.IsReady(p) && ps.AwaitsPreempted() {
		return ps.DeletedAt().Add(preemptedWait)
	}
	if objects.IsReady(p) {
		if _, served := c.endpointReady[p.UID]; served || !c.hasService(ps) {
			if c.cfg.Settle > 0 && !ps.completeAt.IsZero() {
				return ps.completeAt.Add(c.cfg.Settle)
			}
			return time.Time{}
		}
		if !ps.ReadyAt().IsZero() {
			return ps.ReadyAt().Add(c.cfg.EndpointsWait)
		}
		return time.Time{}
	}
	var due time.Time
	if reason, since := ps.Failure(); reason != "" && !since.IsZero() {
		due = since.Add(c.cfg.FailAfter)
	}
	if created, _ := ps.Created().Earliest(); !created.Time().IsZero() {
		if stuck := created.Time().Add(c.cfg.StuckAfter); due.IsZero() || stuck.Before(due) {
			due = stuck
		}
	}
	return due
}

// schedule files the Pod under its due time, or takes it out of the heap when it has none or
// is no longer in flight.
func (c *Correlator) schedule(ps *tracked) {
	due := time.Time{}
	if !ps.exported {
		due = c.dueTime(ps)
	}
	switch {
	case due.IsZero():
		if ps.dueIndex >= 0 {
			heap.Remove(&c.due, ps.dueIndex)
		}
	case ps.dueIndex < 0:
		ps.due = due
		heap.Push(&c.due, ps)
	case !due.Equal(ps.due):
		ps.due = due
		heap.Fix(&c.due, ps.dueIndex)
	}
}

// runDue checks every Pod whose due time is not after now; check files each again.
func (c *Correlator) runDue(now time.Time) {
	for len(c.due) > 0 && !c.due[0].due.After(now) {
		ps := c.due[0]
		heap.Remove(&c.due, 0)
		c.check(ps, now)
	}
}

// dueHeap orders in-flight Pods by due time; each knows its index (tracked.dueIndex, -1
// when not in the heap) so a Pod's time can move or the Pod leave in O(log n).
type dueHeap []*tracked

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h dueHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].dueIndex, h[j].dueIndex = i, j
}

func (h *dueHeap) Push(x any) {
	ps := x.(*tracked)
	ps.dueIndex = len(*h)
	*h = append(*h, ps)
}

func (h *dueHeap) Pop() any {
	old := *h
	ps := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	ps.dueIndex = -1
	return ps
}

// NextDue is the earliest moment the clock alone could finish a trace, zero when no Pod in
// flight has one. The live loop sleeps until then, so a trace is exported when its settle time
// ends rather than on the tick after.
func (c *Correlator) NextDue() time.Time {
	if len(c.due) == 0 {
		return time.Time{}
	}
	return c.due[0].due
}

// RunDue checks the Pods whose moment has come, and nothing else (Tick also runs the
// rollouts' deadlines, prunes and publishes the gauges).
func (c *Correlator) RunDue(now time.Time) {
	if now.After(c.now) {
		c.now = now
	}
	c.runDue(now)
}
