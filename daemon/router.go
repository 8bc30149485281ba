package daemon

import (
	"github.com/readyspan/readyspan/leader"
	"github.com/readyspan/readyspan/node"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/rollout/tracker"
	"github.com/readyspan/readyspan/tracer"
)

// Exporter takes finished traces. It must not block the correlator's goroutine: queue, bound
// and count what it drops.
type Exporter interface {
	ExportPod(*phases.Trace)
	ExportRollout(*rollout.Trace)
	ExportNode(*node.Trace)
}

// router hands every finished trace to the exporters in one way for Pods and rollouts: to the
// ones every replica feeds (the UI shows what this replica reconstructed, leading or not) at
// once, and to the ones only the leader feeds (OTLP, the trace metrics) through the leader gate.
// Shards need no step here: the Watcher admits only this shard's objects, so every trace that
// reaches the router is this shard's.
type router struct {
	gate         *leader.Gate
	leaderOnly   []Exporter
	everyReplica []Exporter
}

// exportPod is the gate's sink: the leader's export of a Pod trace (the gate holds a standby's
// back for a handover, and replays what a new leader owes).
func (r *router) exportPod(t *phases.Trace) {
	for _, e := range r.leaderOnly {
		e.ExportPod(t)
	}
}

// pod routes a finished Pod trace (the correlator's Sink).
func (r *router) pod(t *phases.Trace) {
	for _, e := range r.everyReplica {
		e.ExportPod(t)
	}
	r.gate.Offer(t)
}

// rollout routes a finished rollout trace (the rollout tracker's Sink), node a node's startup
// trace (the correlator's NodeSink). Both have deterministic IDs, so one a new leader exports
// again merges with the first in the backend: the gate need not hold them.
func (r *router) rollout(t *rollout.Trace) { routeKeyed(r, t, Exporter.ExportRollout) }
func (r *router) node(t *node.Trace)       { routeKeyed(r, t, Exporter.ExportNode) }

// routeKeyed hands a trace with a deterministic ID to every replica's exporters, and to the
// leader's while this replica leads.
func routeKeyed[T any](r *router, t T, export func(Exporter, T)) {
	for _, e := range r.everyReplica {
		export(e, t)
	}
	if !r.gate.Leading() {
		return
	}
	for _, e := range r.leaderOnly {
		export(e, t)
	}
}

func (r *router) sinks() (tracer.Sink, tracker.Sink, tracer.NodeSink) {
	return tracer.SinkFunc(r.pod), tracker.SinkFunc(r.rollout), tracer.NodeSinkFunc(r.node)
}

// The exporters, as the router sees them.
type (
	// exportFuncs adapts an exporter whose methods have other names.
	exportFuncs struct {
		pod     func(*phases.Trace)
		rollout func(*rollout.Trace)
		node    func(*node.Trace) // nil: the exporter takes no node traces
	}
)

func (e exportFuncs) ExportPod(t *phases.Trace)      { e.pod(t) }
func (e exportFuncs) ExportRollout(t *rollout.Trace) { e.rollout(t) }
func (e exportFuncs) ExportNode(t *node.Trace) {
	if e.node != nil {
		e.node(t)
	}
}
