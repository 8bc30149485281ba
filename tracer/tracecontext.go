package tracer

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/tracecontext"
)

// podTraceContext is the Pod's own tracing.k8s.io/traceparent (a controller may write it, as
// KEP-5915 proposes), which its trace's root links to; zero when it has none, an invalid one,
// or the annotations are not read. Without one the rollout tracker links the trace to its
// rollout's context instead (tracker.PodTrace).
func (c *Correlator) podTraceContext(p *corev1.Pod) phases.TraceContext {
	v := p.Annotations[tracecontext.Annotation]
	if v == "" || c.cfg.IgnoreTraceContext {
		return phases.TraceContext{}
	}
	ctx, _, ok := tracecontext.Parse(v)
	if !ok {
		return phases.TraceContext{}
	}
	return phases.TraceContext{Context: ctx, Source: phases.TraceContextPod, Relation: phases.TraceContextLink}
}

// noteTraceContext counts a Pod's traceparent refused, once for each value it is given: prev is
// the value of the version before (or "" for a Pod seen first).
func (c *Correlator) noteTraceContext(prev string, p *corev1.Pod) {
	v := p.Annotations[tracecontext.Annotation]
	if v == "" || v == prev || c.cfg.IgnoreTraceContext || c.contextIgnored == nil {
		return
	}
	if _, reason, ok := tracecontext.Parse(v); !ok {
		c.contextIgnored.TraceContextIgnored(reason)
	}
}
