package phases

import "github.com/readyspan/readyspan/tracecontext"

// What a tracing.k8s.io/traceparent annotation is to a trace (docs/trace-context.md): the
// object that carried it, the root's relation to it, and the link's relation.
const (
	TraceContextWorkload = "workload"
	TraceContextPod      = "pod"
	TraceContextChild    = "child"
	TraceContextLink     = "link"
	LinkTraceContext     = "trace_context"
)

// TraceContext is a traceparent annotation that applies to a trace: the span it names, which
// object carried it (Source) and whether the trace's root is that span's child or links to it
// (Relation). The zero value applies nothing.
type TraceContext struct {
	tracecontext.Context
	Source   string
	Relation string
}

// IsZero reports whether no context applies.
func (c TraceContext) IsZero() bool { return c.Context.IsZero() }

// TraceID is the context's trace: the trace a child root belongs to.
func (c TraceContext) TraceID() TraceID { return TraceID(c.Context.TraceID) }

// Apply marks root with the context: its parent is the context's span (child), or it links
// to it (link), and it says which and where the context came from. The caller chose the
// trace ID: a child root is in the context's trace.
func (c TraceContext) Apply(root *Span) {
	if c.IsZero() {
		return
	}
	root.Attrs = append(root.Attrs, Attr{AttrTraceContextSource, c.Source}, Attr{AttrTraceContextRelation, c.Relation})
	if c.Relation == TraceContextChild {
		root.ParentSpanID = SpanID(c.SpanID)
		return
	}
	root.AddLink(Link{TraceID: c.TraceID(), SpanID: SpanID(c.SpanID), Attrs: []Attr{{AttrLinkRelation, LinkTraceContext}}})
}
