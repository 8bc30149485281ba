package agent

import (
	"sync"
	"time"

	"github.com/readyspan/readyspan/phases"
)

// item is one span waiting for the receiver: a Change or a heartbeat, already in the contract's
// terms (name, attributes, time), so the queue holds no reference to the watcher's values.
type item struct {
	name  string
	attrs []phases.Attr
	at    time.Time
}

// queue holds the spans waiting for the receiver, oldest first, at most max of them: past the
// bound the oldest goes and is counted, so a receiver that is down costs bounded memory and
// never slows the watcher. A batch being sent is out of the queue; a failed batch goes back to
// its head (putBack), where the bound may drop it.
type queue struct {
	mu      sync.Mutex
	items   []item
	max     int
	closed  bool
	failing bool          // exports are failing: a drop's reason is DropExportFailed
	wake    chan struct{} // something was queued, or the queue closed
	dropped func(reason string, n int)
}

func newQueue(max int, dropped func(reason string, n int)) *queue {
	return &queue{max: max, wake: make(chan struct{}, 1), dropped: dropped}
}

// push queues spans without ever blocking; it reports how many are queued after it.
func (q *queue) push(its ...item) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		q.dropped(DropShutdown, len(its))
		return len(q.items)
	}
	q.items = append(q.items, its...)
	q.trim()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return len(q.items)
}

// putBack returns a failed batch to the head of the queue, ahead of what came meanwhile, and
// drops the oldest past the bound.
func (q *queue) putBack(batch []item) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.failing = true
	q.items = append(batch[:len(batch):len(batch)], q.items...)
	q.trim()
}

// trim drops the oldest items past the bound. Called with mu held.
func (q *queue) trim() {
	over := len(q.items) - q.max
	if over <= 0 {
		return
	}
	reason := DropQueueFull
	if q.failing {
		reason = DropExportFailed
	}
	clear(q.items[:over])
	q.items = q.items[over:]
	q.dropped(reason, over)
}

// take removes up to n of the oldest items; none when the queue is empty.
func (q *queue) take(n int) []item {
	q.mu.Lock()
	defer q.mu.Unlock()
	n = min(n, len(q.items))
	if n == 0 {
		return nil
	}
	batch := make([]item, n)
	copy(batch, q.items)
	clear(q.items[:n])
	q.items = q.items[n:]
	return batch
}

// setFailing records whether the receiver is failing, for the reason of later drops.
func (q *queue) setFailing(f bool) {
	q.mu.Lock()
	q.failing = f
	q.mu.Unlock()
}

// close refuses further spans; the sender drains what is queued.
func (q *queue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// drain counts everything still queued as dropped for reason and empties the queue.
func (q *queue) drain(reason string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := len(q.items)
	if n > 0 {
		q.dropped(reason, n)
	}
	q.items = nil
	return n
}

func (q *queue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

func (q *queue) isClosed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closed
}
