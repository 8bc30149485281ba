package node

import (
	"time"

	"github.com/readyspan/readyspan/phases"
)

// Span names of a node's trace: the root, its steps one after the other, and one span per
// DaemonSet Pod under the last step.
const (
	RootSpanName       = phases.NodeRootSpanName
	SpanLaunch         = "node.launch"
	SpanInstance       = "node.instance"
	SpanRegistration   = "node.registration"
	SpanKubeletReady   = "node.kubelet_ready"
	SpanNetwork        = "node.network"
	SpanStartupTaints  = "node.startup_taints"
	SpanInitialization = "node.initialization"
	SpanDaemonSets     = "node.daemonsets"
	SpanDaemonPod      = "node.daemonset_pod"
)

// Steps are the steps of a node's startup in the order the documented chain runs them; a
// Summary's Steps are indexed the same way.
var Steps = [numSteps]string{SpanLaunch, SpanInstance, SpanRegistration, SpanKubeletReady, SpanNetwork,
	SpanStartupTaints, SpanInitialization, SpanDaemonSets}

const numSteps = 8

// Trace is a node's startup trace.
type Trace struct {
	TraceID phases.TraceID
	Startup *Startup
	Spans   []phases.Span
	Summary Summary
}

// Root returns the node.startup span.
func (t *Trace) Root() *phases.Span { return &t.Spans[0] }

// Summary holds the figures metrics and the terminal are made of.
type Summary struct {
	Provisioner string
	Outcome     Outcome
	// Duration is the root's: from the decision (the NodeClaim created), or the Node's
	// creation, to its last step.
	Duration time.Duration
	// Steps is each step's time, in Steps order; Drawn says which were drawn (observed).
	Steps [numSteps]time.Duration
	Drawn [numSteps]bool
}

// Build turns an observed node startup into its trace. It does not modify s.
func Build(s *Startup) *Trace {
	var claimUID string
	if s.Claim != nil {
		claimUID = s.Claim.UID
	}
	key := phases.NodeStartupKey(claimUID, s.UID)
	t := &Trace{TraceID: TraceIDFor(claimUID, s.UID), Startup: s}
	start, ok := startOf(s)
	if !ok {
		start = phases.Stamp{Source: phases.SourceDerived}
	}
	steps := stepsOf(s, start, ok)
	end := start
	for _, st := range steps {
		if st.Source != phases.SourceDerived && st.end.At > end.At {
			end = st.end
		}
	}
	if s.Outcome != OutcomeReady && !s.End.IsZero() && phases.InstantOf(s.End) > end.At {
		end = phases.Stamp{At: phases.InstantOf(s.End), Source: phases.SourceDerived}
	}
	root := phases.Span{Name: RootSpanName, Path: RootSpanName, Service: phases.ServiceReadyspan,
		SpanID: phases.SpanIDFor(key, RootSpanName), Start: start.Time(), End: end.Time(),
		StartBound: phases.BoundFrom(start), EndBound: phases.BoundFrom(end)}
	root.Attrs = rootAttrs(s)
	switch s.Outcome {
	case OutcomeReady:
		root.Status = phases.StatusOK
	case OutcomeStuck, OutcomeDeleted:
		root.Status, root.StatusMessage = phases.StatusError, s.Reason
	}
	for _, w := range s.Waiters {
		root.AddLink(phases.Link{TraceID: phases.TraceIDFor(w.UID), SpanID: phases.SpanIDFor(w.UID, phases.RootSpanName),
			Attrs: []phases.Attr{{Key: phases.AttrLinkRelation, Value: LinkWaited}, {Key: phases.AttrPodName, Value: w.Namespace + "/" + w.Name}}})
	}
	t.Spans = append(t.Spans, root)
	t.Summary = Summary{Provisioner: s.Provisioner, Outcome: s.Outcome, Duration: end.Time().Sub(start.Time())}
	if t.Summary.Duration < 0 {
		t.Summary.Duration = 0
	}
	for i, st := range steps {
		if st.Source == phases.SourceDerived {
			continue
		}
		sp := phases.Span{Name: Steps[i], Path: RootSpanName + "/" + Steps[i], Service: serviceOf(Steps[i], s.Provisioner),
			SpanID: phases.SpanIDFor(key, RootSpanName+"/"+Steps[i]), ParentSpanID: root.SpanID,
			Start: st.start.Time(), End: st.end.Time(), StartBound: phases.BoundFrom(st.start), EndBound: phases.BoundFrom(st.end)}
		t.Summary.Steps[i], t.Summary.Drawn[i] = sp.End.Sub(sp.Start), true
		t.Spans = append(t.Spans, sp)
		if Steps[i] == SpanDaemonSets {
			t.Spans = append(t.Spans, daemonPodSpans(key, sp.SpanID, st.start, s.DaemonPods)...)
		}
	}
	return t
}

// drawnStep is one step as drawn: from where the step before ended to its own boundary; Source
// is SourceDerived for a step not drawn.
type drawnStep struct {
	start, end phases.Stamp
	Source     phases.Source
}

// stepsOf lays the observed steps end to end from the decision: each from the last drawn end to
// its own boundary. A boundary not observed, or at or before the one before it (a KWOK or a
// cloud Node stating Ready in the second it was created), draws no step: its time lies in the
// step before.
func stepsOf(s *Startup, from phases.Stamp, ok bool) [numSteps]drawnStep {
	var ends [numSteps]phases.Times
	if c := s.Claim; c != nil {
		ends[0], ends[2] = c.Launched, c.Registered
	}
	ends[1], ends[3], ends[4], ends[5] = s.Created, s.Ready, s.NetworkReady, s.TaintsRemoved
	if c := s.Claim; c != nil {
		ends[6] = c.Initialized
	}
	ends[7] = daemonPodsReady(s.DaemonPods)
	var out [numSteps]drawnStep
	for i := range out {
		out[i].Source = phases.SourceDerived
		to, tok := ends[i].Resolve()
		if !ok || !tok || to.At <= from.At {
			continue
		}
		out[i] = drawnStep{start: from, end: to, Source: to.Source}
		from = to
	}
	return out
}

// startOf is where a node's startup starts: its NodeClaim's creation (the decision), else the
// Node's.
func startOf(s *Startup) (phases.Stamp, bool) {
	if s.Claim != nil {
		if c, ok := s.Claim.Created.Resolve(); ok {
			return c, true
		}
	}
	return s.Created.Resolve()
}

// daemonPodsReady is when the last of the DaemonSet Pods turned Ready, none if any is not.
func daemonPodsReady(pods []DaemonPod) phases.Times {
	var last phases.Stamp
	for _, p := range pods {
		r, ok := p.Ready.Resolve()
		if !ok {
			return nil
		}
		if r.At > last.At {
			last = r
		}
	}
	if last.At == 0 {
		return nil
	}
	return phases.Times{last}
}

// daemonPodSpans draws each DaemonSet Pod from the step's start to its Ready, linked to its own
// trace.
func daemonPodSpans(key string, parent phases.SpanID, start phases.Stamp, pods []DaemonPod) []phases.Span {
	out := make([]phases.Span, 0, len(pods))
	for _, p := range pods {
		r, ok := p.Ready.Resolve()
		if !ok {
			continue
		}
		path := RootSpanName + "/" + SpanDaemonPod + "/" + p.UID
		sp := phases.Span{Name: SpanDaemonPod, Path: path, Service: phases.ServiceKubelet,
			SpanID: phases.SpanIDFor(key, path), ParentSpanID: parent, Start: start.Time(), End: r.Time(),
			StartBound: phases.BoundFrom(start), EndBound: phases.BoundFrom(r),
			Attrs: []phases.Attr{{Key: phases.AttrPodName, Value: p.Name}, {Key: phases.AttrNamespace, Value: p.Namespace},
				{Key: phases.AttrDaemonSetName, Value: p.DaemonSet}}}
		if sp.End.Before(sp.Start) {
			sp.End = sp.Start
		}
		sp.AddLink(phases.Link{TraceID: phases.TraceIDFor(p.UID), SpanID: phases.SpanIDFor(p.UID, phases.RootSpanName)})
		out = append(out, sp)
	}
	return out
}

// rootAttrs are the root's: the Node, its provisioner and NodeClaim, its outcome.
func rootAttrs(s *Startup) []phases.Attr {
	a := []phases.Attr{{Key: phases.AttrNodeName, Value: s.Name}, {Key: phases.AttrNodeOutcome, Value: string(s.Outcome)}}
	if s.Provisioner != "" {
		a = append(a, phases.Attr{Key: phases.AttrAutoscaler, Value: s.Provisioner})
	}
	if c := s.Claim; c != nil {
		a = append(a, phases.Attr{Key: phases.AttrNodeClaimName, Value: c.Name})
		if c.NodePool != "" {
			a = append(a, phases.Attr{Key: phases.AttrNodePool, Value: c.NodePool})
		}
	}
	if s.Reason != "" {
		a = append(a, phases.Attr{Key: phases.AttrNodeReason, Value: s.Reason})
	}
	return a
}

// serviceOf is the component a step waits on.
func serviceOf(step, provisioner string) string {
	switch step {
	case SpanLaunch, SpanRegistration, SpanInitialization:
		if provisioner != "" {
			return provisioner
		}
		return phases.ServiceKarpenter
	case SpanInstance:
		return phases.ServiceCloudProvider
	case SpanKubeletReady, SpanDaemonSets:
		return phases.ServiceKubelet
	case SpanNetwork:
		return phases.ServiceCNI
	}
	return phases.ServiceNodeAgents
}
