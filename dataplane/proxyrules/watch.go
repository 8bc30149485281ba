package proxyrules

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/google/nftables"

	"github.com/readyspan/readyspan/dataplane"
)

// Options configure a Watcher.
type Options struct {
	Node string // the Changes' Node
	// Poll is the period of re-reading when the kernel's change notifications cannot be
	// subscribed to; 0 means 100ms.
	Poll time.Duration
	Log  *slog.Logger // nil: slog.Default()
}

// Watcher reports every change of the rotation sets.
type Watcher struct {
	o    Options
	conn *nftables.Conn
	r    *reader
	// open subscribes to change notifications; a field so that tests can make it fail.
	open func() (*monitor, error)

	mu   sync.Mutex
	mode string
	n    int
}

// NewWatcher opens the netlink connection the Watcher reads through.
func NewWatcher(o Options) (*Watcher, error) {
	if o.Poll <= 0 {
		o.Poll = 100 * time.Millisecond
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	c, err := nftables.New(nftables.AsLasting())
	if err != nil {
		return nil, fmt.Errorf("nftables netlink: %w", err)
	}
	return &Watcher{o: o, conn: c, r: newReader(c), open: openMonitor}, nil
}

// Current is the last snapshot's mode and endpoint count (for the heartbeat).
func (w *Watcher) Current() (mode string, endpoints int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mode, w.n
}

// Run reads once (the initial set is not reported as changes), then on every ruleset change
// re-reads, diffs and calls out with the Changes, until ctx ends.
//
// Each kube-proxy sync is one nftables transaction, which the kernel announces to subscribers
// when it commits; a Change's At is when that announcement arrived (the earliest one not yet
// read, when several came during a read) and its Precision is how long after that the read that
// saw it ended: the rules changed within [At, At+Precision], give or take the kernel's delivery
// (microseconds). Without notifications (the subscription failed), the rules are re-read every
// Poll; At is then the end of the read that saw a change and Precision the time since the start
// of the read before it.
//
// A read takes several netlink dumps (tables, chains, each service chain, each map), so it may
// straddle a transaction; that transaction's announcement then triggers another read, which
// corrects anything the mixed one reported. A read that fails is retried on the next
// announcement (an interrupted dump means another transaction came) or poll.
func (w *Watcher) Run(ctx context.Context, out func([]dataplane.Change)) error {
	if w.conn != nil {
		defer func() { _ = w.conn.CloseLasting() }()
	}
	// Subscribe before the first read, so no change between the two is lost.
	m, err := w.open()
	if err != nil {
		w.o.Log.Warn("nftables change notifications unavailable; polling", "poll", w.o.Poll, "err", err)
	} else {
		defer m.close()
	}
	cur, err := w.r.read()
	if err != nil {
		return err
	}
	w.publish(cur)
	w.o.Log.Info("kube-proxy rules read", "mode", cur.Mode, "endpoints", len(cur.Endpoints),
		"notified", m != nil)
	if cur.Mode == "" && legacyNAT(procIPTablesNames) {
		w.o.Log.Warn("no kube-proxy rules in nftables, but an iptables-legacy nat table exists: " +
			"kube-proxy in iptables mode with iptables-legacy is not observable here")
	}
	if m == nil {
		return w.poll(ctx, cur, out)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-m.wake:
		}
		at, ok, merr := m.take()
		if merr != nil {
			w.o.Log.Warn("nftables change notifications stopped; polling", "err", merr)
			return w.poll(ctx, cur, out)
		}
		if !ok {
			continue
		}
		next, err := w.r.read()
		if err != nil {
			// The next notification retries; until one comes the last snapshot stands.
			w.o.Log.Warn("reading kube-proxy rules", "err", err)
			continue
		}
		cur = w.apply(cur, next, at, time.Since(at), out)
	}
}

// procIPTablesNames lists the host network namespace's iptables-legacy (x_tables) tables.
const procIPTablesNames = "/proc/net/ip_tables_names"

// legacyNAT reports whether an iptables-legacy nat table exists: the cheap sign that kube-proxy
// may be writing rules that nftables netlink cannot show.
func legacyNAT(path string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if l == "nat" {
			return true
		}
	}
	return false
}

// poll re-reads every Options.Poll.
func (w *Watcher) poll(ctx context.Context, cur Snapshot, out func([]dataplane.Change)) error {
	t := time.NewTicker(w.o.Poll)
	defer t.Stop()
	prev := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		start := time.Now()
		next, err := w.r.read()
		if err != nil {
			w.o.Log.Warn("reading kube-proxy rules", "err", err)
			continue
		}
		end := time.Now()
		cur = w.apply(cur, next, end, end.Sub(prev), out)
		prev = start
	}
}

// apply reports the changes from cur to next and makes next current.
func (w *Watcher) apply(cur, next Snapshot, at time.Time, precision time.Duration, out func([]dataplane.Change)) Snapshot {
	w.publish(next) // first, so that Current agrees with the changes out is told of
	if ch := diff(w.o.Node, cur, next, at, precision); len(ch) > 0 {
		out(ch)
	}
	return next
}

func (w *Watcher) publish(s Snapshot) {
	w.mu.Lock()
	w.mode, w.n = s.Mode, len(s.Endpoints)
	w.mu.Unlock()
}
