package pipeline

import "github.com/readyspan/readyspan/tracer"

// Live is the pipeline of the commands that watch the cluster: the informers and the audit log
// (the Source) feeding the correlator, and the correlator feeding the sinks.
type Live struct {
	// Source is the cluster side; its steps (Reachable, Start, Run) are separate because each
	// command interleaves its own work with them (serving /readyz, printing).
	Source *tracer.Source
	// Correlator is nil when no sink takes traces (readyspan record).
	Correlator *tracer.Correlator
}

// NewLive builds a live pipeline; nothing talks to the cluster until its Source starts.
func NewLive(o Options, env Env, s Sinks) *Live {
	corr := correlator(o, env, s)
	src := tracer.NewSource(tracer.SourceConfig{
		Client: env.Client, Host: env.Host, Watch: o.Watch, Errs: env.Metrics, Log: env.Log,
		AuditLog: o.AuditLog, AuditFailed: env.AuditFailed,
		Webhooks:   o.Webhooks,
		Correlator: corr,
		Tap:        s.Deltas,
	})
	return &Live{Source: src, Correlator: corr}
}
