// Package pipeline builds readyspan's one data path for every command: a source of Deltas (the
// live watch and audit log, a recording, or explain's snapshot of the API), the correlator,
// and the sinks that take what it finishes. The commands fill Options from their flags and check
// them once (Validate); the wiring is here, as kube-state-metrics keeps pkg/options apart from
// pkg/app, so that live, replay and explain cannot drift apart in how they correlate.
//
// Live builds the pipeline of the commands that watch (readyspan run through package daemon,
// watch, record); Replay feeds a recording through it; Explain feeds a snapshot of what the API
// still holds. What a trace goes on to (a terminal, the daemon's router, a report) is the
// caller's Sinks.
package pipeline

import (
	"fmt"
	"log/slog"

	"k8s.io/client-go/kubernetes"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout/tracker"
	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/watch"
)

// Options are what a pipeline is built from: plain data, filled from flags and checked by
// Validate before anything is built.
type Options struct {
	// Trace tunes the correlator: deadlines, backfill, settle time, MaxInFlight. Its Rollouts
	// field is ignored: rollout traces go to Sinks.Rollouts.
	Trace tracer.Config
	// Watch is what a live pipeline watches: namespaces, the Pods' selector, the encoding, the
	// shard.
	Watch watch.Config
	// AuditLog is a kube-apiserver audit log a live pipeline follows into the same stream; ""
	// for none.
	AuditLog string
	// Webhooks has a live pipeline watch the admission webhook configurations too, for what
	// takes the names of webhooks from the components' spans.
	Webhooks bool
}

// Validate checks the options before any work: a pipeline that would fail later says so now.
func (o *Options) Validate() error {
	if o.Watch.Encoding != "" { // "" is watch.DefaultEncoding
		if _, err := watch.ParseEncoding(string(o.Watch.Encoding)); err != nil {
			return fmt.Errorf("--watch-encoding: %w", err)
		}
	}
	if o.Trace.MaxInFlight < 0 {
		return fmt.Errorf("--max-in-flight must not be negative, got %d", o.Trace.MaxInFlight)
	}
	return nil
}

// Metrics count what a pipeline observes of itself: the correlator's deltas, drops and Pods in
// each phase, and the watch's failures (readyspan's Prometheus metrics).
type Metrics interface {
	tracer.Stats
	watch.Errors
}

// Env is what a pipeline is built with beside its Options: the apiserver it reads and where its
// own counts and logs go. Any field may be zero where the pipeline does not read the cluster.
type Env struct {
	Client kubernetes.Interface
	Host   string // the apiserver, as messages name it
	// Metrics is nil for none.
	Metrics Metrics
	// Log is nil for none.
	Log *slog.Logger
	// AuditFailed is told when the audit log cannot be read: each command words it its own
	// way.
	AuditFailed func(error)
}

// Sinks take what a pipeline produces; each may be nil. They must not block: the correlator
// waits for them.
type Sinks struct {
	// Pods takes each finished Pod trace.
	Pods tracer.Sink
	// Rollouts takes each finished rollout trace.
	Rollouts tracker.Sink
	// Nodes takes each finished node startup trace (nil: Node startups are not traced).
	Nodes tracer.NodeSink
	// Deltas sees each delta of a live pipeline before the correlator does (a recording). A
	// live pipeline with Deltas alone builds no correlator.
	Deltas func(watch.Delta)
}

// correlator is the one place a pipeline's correlator is built: o.Trace feeding the sinks. It
// is nil when no sink takes traces.
func correlator(o Options, env Env, s Sinks) *tracer.Correlator {
	if s.Pods == nil && s.Rollouts == nil && s.Nodes == nil {
		return nil
	}
	cfg := o.Trace
	cfg.Rollouts, cfg.Nodes = s.Rollouts, s.Nodes
	pods := s.Pods
	if pods == nil {
		pods = tracer.SinkFunc(func(*phases.Trace) {})
	}
	return tracer.New(cfg, pods, env.Metrics, env.Log)
}
