package phases

// The scheduling phase: the scheduler's attempts and the waits that are not the scheduler's
// (gates, volume binding, a node being added), preemption and its links.

import (
	"time"
)

// scheduling adds to the scheduling phase (drawn as phase) what it holds: the scheduler's
// failed attempts as events, the node it nominated, links to the Pods preempted for this one,
// and the waits that were not the scheduler's: a scheduling gate, a new node.
func (b *builder) scheduling(parent int, phase interval) {
	p := b.pod
	sp := &b.trace.Spans[parent]
	for _, o := range p.SchedulingFailure {
		sp.AddEvent(occurrenceEvent("FailedScheduling", o))
	}
	if p.NominatedNode != "" {
		sp.Attrs = append(sp.Attrs, Attr{AttrNominatedNode, p.NominatedNode})
	}
	for _, v := range p.Victims {
		sp.AddLink(podLink(v, linkVictim))
	}
	from := phase.start
	if p.Gated {
		from = b.gated(parent, phase)
	}
	if !b.waitingForNode(parent, phase, from) {
		for _, o := range p.Autoscaler {
			sp.AddEvent(occurrenceEvent(o.Reason, o))
		}
	}
	sortEvents(b.trace.Spans[parent].Events())
}

// Link relations (AttrLinkRelation) of the links between a preemptor's and its victims' traces.
const (
	linkVictim      = "preemption_victim"
	linkPreemptedBy = "preempted_by"
)

// podLink links to the root of another Pod's trace.
func podLink(ref PodRef, relation string) Link {
	as := []Attr{{AttrLinkRelation, relation}, {AttrPodUID, ref.UID}}
	if ref.Name != "" {
		as = append(as, Attr{AttrPodName, ref.Name}, Attr{AttrNamespace, ref.Namespace})
	}
	return Link{TraceID: TraceIDFor(ref.UID), SpanID: SpanIDFor(ref.UID, RootSpanName), Attrs: as}
}

// gated draws scheduling.gated, from the Pod's creation to the removal of its last scheduling
// gate, and returns where the scheduler could start: the removal as drawn. A removal nobody saw
// (the watch missed the version without gates) ends at the scheduler's first attempt, or at
// the phase's end, and says it was not observed.
func (b *builder) gated(parent int, phase interval) point {
	p := b.pod
	end := resolve(p.GatesRemoved)
	if !end.observed {
		end = derived(phase.end.t)
		if first, ok := firstAttempt(p); ok && first < end.t {
			end = derived(first)
		}
	}
	i, drawn := b.draw(spanHead{Name: SpanSchedulingGated, Path: SpanSchedulingGated, Service: ServiceScheduler}, parent, phase.start, end)
	b.waited(WaitGated, drawn)
	if by := p.GatesRemovedBy; by != "" {
		b.trace.Spans[i].Attrs = append(b.trace.Spans[i].Attrs, Attr{AttrGatesRemovedBy, by})
	}
	return drawn.end
}

// waited keeps a wait drawn for the summary, when both its ends were observed.
func (b *builder) waited(kind string, drawn interval) {
	if drawn.start.observed && drawn.end.observed {
		b.waits = append(b.waits, Wait{Kind: kind, Duration: drawn.end.t.Sub(drawn.start.t)})
	}
}

// firstAttempt is the earliest precise stamp of the scheduler's attempts: its first failure or
// the bind.
func firstAttempt(p *Pod) (Instant, bool) {
	var first Instant
	for _, o := range p.SchedulingFailure {
		if o.Time.Source.rank() == 0 && (first == 0 || o.Time.At < first) {
			first = o.Time.At
		}
	}
	for _, s := range p.Scheduled {
		if s.Source.rank() == 0 && (first == 0 || s.At < first) {
			first = s.At
		}
	}
	return first, first != 0
}

// waitingForNode draws scheduling.waiting_for_node when the Pod waited for a node to be added:
// an autoscaler said it would add one (TriggeredScaleUp, Karpenter's Nominated), or the Pod was
// bound to a Node created after it. The wait starts at the first sign that no node fitted (the
// scheduler's first failed attempt after from, or the autoscaler's first event) and ends when the
// new Node turned Ready; a Pod still waiting when its trace ended waits to the phase's end. It
// reports whether it drew the span (which then holds the autoscaler's events).
func (b *builder) waitingForNode(parent int, phase interval, from point) bool {
	p := b.pod
	autoscaler, triggered := "", false
	for _, o := range p.Autoscaler {
		switch o.Reason {
		case "TriggeredScaleUp":
			autoscaler, triggered = ServiceClusterAutoscaler, true
		case "Nominated":
			autoscaler, triggered = ServiceKarpenter, true
		case "NotTriggerScaleUp":
			if autoscaler == "" {
				autoscaler = ServiceClusterAutoscaler
			}
		}
	}
	bound := resolve(p.Scheduled).observed
	if p.NewNode == nil && (!triggered || bound) {
		return false // no node was added for it, or it found room on one that was there
	}
	// The first sign, at or after from: a failed attempt, an autoscaler's event.
	start := point{}
	consider := func(o Occurrence) {
		if o.Time.At == 0 || o.Time.At < from.t {
			return
		}
		if !start.observed || o.Time.At < start.t {
			start = point{t: o.Time.At, src: o.Time.Source, observed: true}
		}
	}
	for _, o := range p.SchedulingFailure {
		consider(o)
	}
	for _, o := range p.Autoscaler {
		consider(o)
	}
	if !start.observed {
		start = from
	}
	end, node := nodeWaitEnd(p, derived(phase.end.t))
	service := ServiceScheduler
	if autoscaler != "" {
		service = autoscaler
	}
	i, drawn := b.draw(spanHead{Name: SpanSchedulingWaitingForNode, Path: SpanSchedulingWaitingForNode, Service: service}, parent, start, end)
	b.waited(WaitNode, drawn)
	sp := &b.trace.Spans[i]
	if node != nil {
		nodeWaitAttrs(sp, node)
	}
	if autoscaler != "" {
		sp.Attrs = append(sp.Attrs, Attr{AttrAutoscaler, autoscaler})
	}
	for _, o := range p.Autoscaler {
		sp.AddEvent(occurrenceEvent(o.Reason, o))
	}
	sortEvents(sp.Events())
	if node != nil {
		b.nodeSteps(i, node, drawn, service)
	}
	return true
}

// nodeWaitEnd is where a Pod's wait for a new node ends, its phase's end (phaseEnd) where no
// Ready of the Node it was bound to was observed, and that Node as the wait reads it. The
// scheduler binds to a Node once it is Ready, its network up and its startup taints gone
// (Karpenter's registration removes its own): the wait ends at the last of them that came before
// the bind.
func nodeWaitEnd(p *Pod, phaseEnd point) (point, *NodeSeen) {
	n := p.NewNode
	if n == nil {
		return phaseEnd, nil
	}
	end, ready := phaseEnd, resolve(n.Ready)
	if !ready.observed {
		return end, n
	}
	end = ready
	bind := resolve(p.Scheduled)
	if untainted := resolve(n.TaintsRemoved); untainted.observed && bind.observed && untainted.t > bind.t &&
		untainted.t.Sub(bind.t) <= consistencySlack && ready.t < bind.t {
		// The watch showed the Node's last startup taint gone just after the scheduler bound
		// the Pod to it, which it could not do before: the Node's event came later than the
		// Pod's. The bind bounds the removal better. (Seen long after, the taint was one the
		// Pod tolerates.)
		n = nodeUntaintedAt(n, p.Scheduled)
	}
	var registered Times
	if n.Claim != nil {
		registered = n.Claim.Registered
	}
	for _, t := range [...]Times{n.NetworkReady, n.TaintsRemoved, registered} {
		if at := resolve(t); at.observed && at.t > end.t && (!bind.observed || at.t <= bind.t) {
			end = at
		}
	}
	return end, n
}

// nodeWaitAttrs names on the wait the Node the Pod waited for, its creation and Ready, its
// NodeClaim and NodePool, and links to its startup trace.
func nodeWaitAttrs(sp *Span, n *NodeSeen) {
	sp.Attrs = append(sp.Attrs, Attr{AttrNodeName, n.Name})
	if created := resolve(n.Created); created.observed {
		sp.Attrs = append(sp.Attrs, Attr{AttrNodeCreated, created.t.Time().UTC().Format(time.RFC3339Nano)})
	}
	if ready := resolve(n.Ready); ready.observed {
		sp.Attrs = append(sp.Attrs, Attr{AttrNodeReady, ready.t.Time().UTC().Format(time.RFC3339Nano)})
	}
	if key := n.startupKey(); n.Traced && key != "" {
		sp.AddLink(Link{TraceID: TraceIDFor(key), SpanID: SpanIDFor(key, NodeRootSpanName), Attrs: []Attr{{AttrLinkRelation, LinkNodeStartup}}})
	}
	if c := n.Claim; c != nil {
		sp.Attrs = append(sp.Attrs, Attr{AttrNodeClaimName, c.Name})
		if c.NodePool != "" {
			sp.Attrs = append(sp.Attrs, Attr{AttrNodePool, c.NodePool})
		}
	}
}

// nodeUntaintedAt is the Node with its startup taints gone at the given time.
func nodeUntaintedAt(n *NodeSeen, at Times) *NodeSeen {
	c := *n
	c.TaintsRemoved = at
	return &c
}

// nodeStep is one step of a new Node's startup a Pod waited through, ending at its boundary.
type nodeStep struct {
	name string
	end  Times
}

// nodeSteps draws the steps of the new Node's startup inside the Pod's wait for it, one after
// the other in the order the documented chain runs them: with a Karpenter NodeClaim, its
// decision (the NodeClaim created), the launch (Launched), the instance (the Node created), the
// registration (Registered); without one, the provisioning up to the Node created; then the
// kubelet's Ready, the network and the startup taints. Each runs from where the last one drawn
// ended to its boundary, so they cover the wait with no gap or overlap; a boundary not observed,
// or stamped at or before the previous one (a Node's Ready stated in whole seconds, in the
// second it was created), adds no step, its time within the one before.
func (b *builder) nodeSteps(parent int, n *NodeSeen, wait interval, provisioner string) {
	var steps [7]nodeStep
	k := 0
	if c := n.Claim; c != nil {
		steps[0], steps[1], steps[2], steps[3] = nodeStep{SpanNodeDecision, c.Created}, nodeStep{SpanNodeLaunch, c.Launched},
			nodeStep{SpanNodeInstance, n.Created}, nodeStep{SpanNodeRegistration, c.Registered}
		k = 4
	} else {
		steps[0], k = nodeStep{SpanNodeProvisioning, n.Created}, 1
	}
	steps[k], steps[k+1], steps[k+2] = nodeStep{SpanNodeKubeletReady, n.Ready}, nodeStep{SpanNodeNetwork, n.NetworkReady},
		nodeStep{SpanNodeStartupTaints, n.TaintsRemoved}
	from := wait.start
	for _, s := range steps[:k+3] {
		to := resolve(s.end)
		if !to.observed || to.t <= from.t || to.t > wait.end.t {
			continue
		}
		b.add(spanHead{Name: s.name, Path: SpanSchedulingWaitingForNode + "/" + s.name, Service: nodeStepService(s.name, provisioner)}, parent, from, to)
		from = to
	}
}

// nodeStepService is the component a step of a new Node's startup waits on; provisioner is the
// wait's (the autoscaler whose events the Pod carries, else the scheduler).
func nodeStepService(step, provisioner string) string {
	switch step {
	case SpanNodeDecision, SpanNodeLaunch, SpanNodeRegistration:
		return ServiceKarpenter
	case SpanNodeProvisioning:
		return provisioner
	case SpanNodeInstance:
		return ServiceCloudProvider
	case SpanNodeKubeletReady:
		return ServiceKubelet
	case SpanNodeNetwork:
		return ServiceCNI
	}
	return ServiceNodeAgents
}
