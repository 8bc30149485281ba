package leader

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/clock"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/safetext"
)

// Timings of the handover, fixed: they match how long a stopping leader may take between
// writing its record and releasing the Lease.
const (
	// handoverTimeout bounds reading and writing the handover Lease, so a slow apiserver delays
	// a takeover or a stop by at most this.
	handoverTimeout = 5 * time.Second
	// handoverFresh is how close the record's stop time must be to the Lease's release for the
	// record to be the releasing leader's last word: the same process stamps both, the record
	// at most handoverTimeout before the release.
	handoverFresh = 10 * time.Second
)

// Sink receives the traces the Gate lets through (the exporters).
type Sink interface {
	Export(*phases.Trace)
}

// Metrics receives the Gate's decisions, for readyspan's self metrics.
type Metrics interface {
	SetLeader(bool)
	Dropped(reason string)
}

// Config wires a Gate.
type Config struct {
	// Elected says leader election decides who exports: the Gate starts as a standby and
	// exports once TakeOver is called. Without it the Gate exports everything.
	Elected bool
	// Leases is where the handover record lives (HandoverLeaseName(Lease)); used only when
	// Elected.
	Leases coordinationv1client.LeaseInterface
	Lease  string // name of the leader-election Lease
	Sink   Sink
	// Metrics may be nil.
	Metrics Metrics
	// Clock stamps exports, standby traces and records; nil is the real clock.
	Clock clock.PassiveClock
	// Log may be nil.
	Log *slog.Logger
}

// Gate stands between the correlator and the exporters: a leader exports, a standby keeps what
// it would have exported, and a new leader exports only what its predecessor owed.
type Gate struct {
	cfg     Config
	clock   clock.PassiveClock
	log     *slog.Logger
	started time.Time

	// mu serializes Offer and TakeOver: both export, and a takeover must move the standby
	// buffer to the sink and start leading at once, so no trace falls between the two.
	mu      sync.Mutex
	leading bool
	ledger  ledger
}

// New creates a Gate, leading unless cfg.Elected, and publishes that on cfg.Metrics.
func New(cfg Config) *Gate {
	if cfg.Metrics == nil {
		cfg.Metrics = nopMetrics{}
	}
	g := &Gate{cfg: cfg, clock: cfg.Clock, log: cfg.Log, leading: !cfg.Elected}
	if g.clock == nil {
		g.clock = clock.RealClock{}
	}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	g.started = g.clock.Now()
	cfg.Metrics.SetLeader(g.leading)
	return g
}

// ResumeAfter is how far back a replica under leader election traces Pods it finds already
// Ready (tracer.Config.ResumeAfter): a replica that starts while another leads (the
// replacement of a deleted leader) may be the one that wins the Lease, and then owes what
// turned Ready recently that no leader exported.
func (g *Gate) ResumeAfter() time.Time { return g.started.Add(-RecentWindow) }

// Leading reports whether this process exports.
func (g *Gate) Leading() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.leading
}

// Offer takes a finished trace from the correlator: a leader exports it unless the previous
// leader did; a standby keeps it in case it takes over.
func (g *Gate) Offer(t *phases.Trace) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.leading {
		g.cfg.Metrics.Dropped("not_leader")
		g.ledger.keepStandby(t, g.clock.Now())
		return
	}
	if !g.ledger.owed(t) {
		g.cfg.Metrics.Dropped("exported_by_previous_leader")
		return
	}
	g.sendLocked(t)
}

func (g *Gate) sendLocked(t *phases.Trace) {
	g.cfg.Sink.Export(t)
	g.ledger.noteExported(t.Pod.UID, g.clock.Now())
}

// TakeOver starts leading: it exports the standby traces the previous leader owed, then every
// owed trace offered after. prevAlive is up to when the previous leader exported what was
// Ready, zero for the first leader ever; released says it released the Lease, so the handover
// record it wrote just before is current.
func (g *Gate) TakeOver(ctx context.Context, prevAlive time.Time, released bool) {
	if prevAlive.IsZero() {
		prevAlive = g.started // the first leader ever owes nothing from before it started
	}
	skip := g.previousExports(ctx, prevAlive, released)
	g.mu.Lock()
	defer g.mu.Unlock()
	owed := g.ledger.takeOver(prevAlive, skip)
	for _, t := range owed {
		g.sendLocked(t)
	}
	g.leading = true // under mu: no trace falls between the buffer and the sink
	g.cfg.Metrics.SetLeader(true)
	g.log.Info("Took over exporting", "owedTraces", len(owed), "previousLeaderAlive", prevAlive)
}

// previousExports returns what a gracefully stopped leader exported last, or nil. It writes
// that just before releasing the Lease, so the record is current only if the Lease was
// released about then.
func (g *Gate) previousExports(ctx context.Context, prevAlive time.Time, released bool) map[string]bool {
	if g.cfg.Leases == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, handoverTimeout)
	defer cancel()
	prev, err := readHandover(ctx, g.cfg.Leases, HandoverLeaseName(g.cfg.Lease))
	if err != nil {
		g.log.Warn("Could not read the previous leader's handover", "err", safetext.OneLine(err))
		return nil
	}
	if prev == nil || !released || prev.StoppedAt.Sub(prevAlive).Abs() >= handoverFresh {
		return nil
	}
	return prev.Skip()
}

// StepDown stops exporting; what is offered after goes to the standby buffer.
func (g *Gate) StepDown() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.leading = false
	g.cfg.Metrics.SetLeader(false)
}

// Handover leaves the next leader the UIDs this one exported last, on the handover Lease. Call
// it when stopping, after the last export is flushed and before the Lease is released. It does
// nothing unless this process leads under leader election.
func (g *Gate) Handover(ctx context.Context) error {
	g.mu.Lock()
	leading, r := g.leading, g.ledger.record(g.clock.Now())
	g.mu.Unlock()
	if !g.cfg.Elected || !leading || g.cfg.Leases == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, handoverTimeout)
	defer cancel()
	if err := writeHandover(ctx, g.cfg.Leases, HandoverLeaseName(g.cfg.Lease), r); err != nil {
		return fmt.Errorf("write handover: %w", err)
	}
	return nil
}

// WriteState leaves the next run of this process the UIDs it exported last, in the state file
// at path (the counterpart of Handover without leader election). Call it when stopping, after
// the last export is flushed.
func (g *Gate) WriteState(path string) error {
	g.mu.Lock()
	r := g.ledger.record(g.clock.Now())
	g.mu.Unlock()
	return writeState(path, r)
}

type nopMetrics struct{}

func (nopMetrics) SetLeader(bool) {}
func (nopMetrics) Dropped(string) {}
