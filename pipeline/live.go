package pipeline

import (
	"context"

	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/watch"
)

// Live is the pipeline of the commands that watch the cluster: the informers and the audit log
// (the Source) feeding the correlator, and the correlator feeding the sinks.
type Live struct {
	// Source is the cluster side; its steps (Reachable, Start) are separate from Run because
	// each command interleaves its own work with them (serving /readyz, printing).
	Source *watch.Source
	// Correlator is nil when no sink takes traces (readyspan record).
	Correlator *tracer.Correlator
	// tap sees each delta before the correlator (Sinks.Deltas); nil for none.
	tap func(watch.Delta)
}

// NewLive builds a live pipeline; nothing talks to the cluster until its Source starts.
func NewLive(o Options, env Env, s Sinks) *Live {
	corr := correlator(o, env, s)
	src := watch.NewSource(watch.SourceConfig{
		Client: env.Client, Kinds: tracer.Kinds, Host: env.Host, Watch: o.Watch, Errs: env.Metrics, Log: env.Log,
		AuditLog: o.AuditLog, AuditFailed: env.AuditFailed,
		Webhooks: o.Webhooks,
	})
	return &Live{Source: src, Correlator: corr, tap: s.Deltas}
}

// Run hands every delta of the Source to the tap and the correlator until ctx ends.
func (l *Live) Run(ctx context.Context) {
	tracer.Loop(ctx, l.Source.Deltas(), l.Correlator, tracer.DeadlineTick, l.tap)
}
