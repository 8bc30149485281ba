package main

import (
	"context"
	"log/slog"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/readyspan/readyspan/tracer"
)

// pipelineConfig is what differs between the commands that watch a cluster (run, watch and
// record): what to watch, where counts and logs go, and who consumes the deltas.
type pipelineConfig struct {
	client kubernetes.Interface
	host   string // the apiserver, as messages name it
	watch  tracer.WatchConfig
	errs   tracer.WatchErrors // counts watch and audit log failures; nil for none
	log    *slog.Logger

	auditLog    string      // kube-apiserver audit log to follow into the same stream; "" for none
	auditFailed func(error) // told when the audit log cannot be read; each command words it its own way

	correlator *tracer.Correlator // nil to only tap the deltas
	tap        func(tracer.Delta) // sees each delta before the correlator; nil for none
}

// pipeline is the cluster side every live command shares: informers turning the cluster into
// deltas, the audit log added to the same stream, and the loop feeding them on. The steps are
// separate because the commands interleave their own work (serving /readyz, printing) with them.
type pipeline struct {
	cfg     pipelineConfig
	watcher *tracer.Watcher
}

// newPipeline sets the informers up; nothing talks to the cluster until start.
func newPipeline(cfg pipelineConfig) *pipeline {
	return &pipeline{cfg: cfg, watcher: tracer.NewWatcher(cfg.client, cfg.watch, cfg.errs, cfg.log)}
}

// reachable tells whether the apiserver answers, in the words every command uses.
func (p *pipeline) reachable(ctx context.Context) error {
	return reachable(ctx, p.cfg.client, p.cfg.host)
}

// start starts the informers and, if asked, follows the audit log; it returns at once.
func (p *pipeline) start(ctx context.Context) {
	p.watcher.Start(ctx)
	if p.cfg.auditLog == "" {
		return
	}
	go func() {
		if err := tracer.TailAudit(ctx, p.cfg.auditLog, p.watcher.Sink(), p.cfg.errs, p.cfg.log); err != nil && p.cfg.auditFailed != nil {
			p.cfg.auditFailed(err)
		}
	}()
}

// startFor is what the terminal commands (watch, record) do: fail at once on an apiserver that
// does not answer, then start, bounded by --for when it is set. The returned context ends with
// the run; cancel it when done.
func (p *pipeline) startFor(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc, error) {
	if err := p.reachable(ctx); err != nil {
		return ctx, func() {}, err
	}
	cancel := context.CancelFunc(func() {})
	if d > 0 {
		ctx, cancel = context.WithTimeout(ctx, d)
	}
	p.start(ctx)
	return ctx, cancel, nil
}

// deadlineTick is how often the correlator runs the rollouts' deadlines, prunes and publishes
// its gauges. A Pod's own deadlines (its settle time, the endpoints wait, stuck and failed) wake
// the loop at their moment, without waiting for a tick.
const deadlineTick = 200 * time.Millisecond

// loop hands every delta to the tap and the correlator until ctx ends.
func (p *pipeline) loop(ctx context.Context) {
	tracer.Loop(ctx, p.watcher.Deltas(), p.cfg.correlator, deadlineTick, p.cfg.tap)
}
