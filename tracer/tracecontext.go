package tracer

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/tracecontext"
)

// noteTraceContext reads a Pod's tracing.k8s.io/traceparent when this version (p) gives it a
// value the version before did not (prev: "" for a Pod seen first): a refused one is counted,
// once per value, and the first valid one is the context its trace's root links to. The first,
// not the latest: the value written with the Pod's creation is what caused it, and a component
// may write its own later (KEP-5927's scheduler, when it binds the Pod), whose span is part of
// the startup, not its cause. Without one, the rollout tracker links the trace to its rollout's
// context (tracker.PodTrace).
func (c *Correlator) noteTraceContext(ps *tracked, prev string, p *corev1.Pod) {
	v := p.Annotations[tracecontext.Annotation]
	if v == "" || v == prev || c.cfg.IgnoreTraceContext {
		return
	}
	ctx, reason, ok := tracecontext.Parse(v)
	switch {
	case !ok && c.contextIgnored != nil:
		c.contextIgnored.TraceContextIgnored(reason)
	case ok && ps.traceContext == nil:
		ps.traceContext = &phases.TraceContext{Context: ctx, Source: phases.TraceContextPod, Relation: phases.TraceContextLink}
	}
}
