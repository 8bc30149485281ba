package tracker

import (
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/tracecontext"
)

// The tracing.k8s.io/traceparent annotation of a workload (docs/trace-context.md) belongs to
// the rollout it was written for: the value is new with the write that started the rollout (a
// manifest that carries it), or appears while the rollout runs (kubectl apply, then kubectl
// annotate). The rollout's root is then the annotated span's child, in its trace: the pipeline
// that wrote it waits on this very rollout, so a child is true to the timing. A value unchanged
// since before the change (an earlier rollout's, a GitOps tool applying an old manifest again)
// did not cause the rollout: the root only links to it (KEP-5915's rule for asynchronous work),
// so a later rollout is never put under a pipeline's long-finished trace.

// contextOf reads a workload's traceparent when it changed (changed: the value differs from the
// workload's previous view, or the workload is seen first), counting a value refused; an
// unchanged value is read again without being counted twice. ok is false for no valid context.
func (r *Tracker) contextOf(v string, changed bool) (tracecontext.Context, bool) {
	if v == "" || r.cfg.IgnoreTraceContext {
		return tracecontext.Context{}, false
	}
	c, reason, ok := tracecontext.Parse(v)
	if !ok && changed && r.cfg.ContextIgnored != nil {
		r.cfg.ContextIgnored.TraceContextIgnored(reason)
	}
	return c, ok
}

// startContext is the context of a rollout the workload's view v starts: its child when the
// value was written with the change (writtenFor), else linked.
func (r *Tracker) startContext(v string, writtenFor, changed bool) phases.TraceContext {
	c, ok := r.contextOf(v, changed)
	if !ok {
		return phases.TraceContext{}
	}
	rel := phases.TraceContextLink
	if writtenFor {
		rel = phases.TraceContextChild
	}
	return phases.TraceContext{Context: c, Source: phases.TraceContextWorkload, Relation: rel}
}

// adoptContext takes a context written while the rollout runs: its child, unless the rollout's
// trace ID was handed out already (a Pod's trace links to it, or the rollout it superseded
// does), which it must keep; then the context is only linked, and a child context the rollout
// has already stays.
func (a *activeRollout) adoptContext(c tracecontext.Context) {
	tc := phases.TraceContext{Context: c, Source: phases.TraceContextWorkload, Relation: phases.TraceContextChild}
	if a.traceID != (phases.TraceID{}) {
		if a.obs.TraceContext.Relation == phases.TraceContextChild {
			return
		}
		tc.Relation = phases.TraceContextLink
	}
	a.obs.TraceContext = tc
}

// fixTraceID is the rollout's trace ID (rollout.Rollout.TraceID) and its root's span ID, decided
// the first time something refers to them and kept from then on.
func (a *activeRollout) fixTraceID() (phases.TraceID, phases.SpanID) {
	if a.traceID == (phases.TraceID{}) {
		obs := a.obs
		obs.Attempt = a.attempt
		a.traceID = obs.TraceID()
		a.rootSpanID = rollout.RootSpanIDFor(obs.Workload.UID, obs.Generation, a.attempt)
	}
	return a.traceID, a.rootSpanID
}

// podFollows links a Pod's trace to its rollout's context, when the Pod has no valid context of
// its own (whose link phases.Build drew already): never as its child, since a Pod's trace ID is
// its UID. The Pod's observation holds it too, so a stage that draws the trace again from it
// (the last mile's) keeps the link.
func podFollows(tr *phases.Trace, a *activeRollout) {
	if a.obs.TraceContext.IsZero() || tr.Pod == nil || !tr.Pod.TraceContext.IsZero() {
		return
	}
	tc := a.obs.TraceContext
	tc.Relation = phases.TraceContextLink
	tr.Pod.TraceContext = tc
	tc.Apply(&tr.Spans[0])
}
