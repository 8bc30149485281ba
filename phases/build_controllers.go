package phases

// The controllers phase: the workload controllers' steps from the user's request to the Pod's
// creation, and the cause of a replacement. Every kind is drawn by the same rules: the chain
// is data (Pod.Controllers), so a new workload kind adds nothing here.

// rootAt is the place in the chain of the workload whose change started it, -1 for a Pod no
// workload readyspan reads started.
func (p *Pod) rootAt() int {
	for i := range p.Controllers {
		if RootOf(p.Controllers[i].Kind) == p.Root {
			return i
		}
	}
	return -1
}

// handoff is the workload that the root workload's controller created or scaled for the Pod
// (a Deployment's ReplicaSet, a CronJob's Job), nil when the root is the Pod's own
// controller. When it was reached is a boundary of the chain (timeline).
func (p *Pod) handoff() *Controller {
	if at := p.rootAt(); at >= 0 && at+1 < len(p.Controllers) {
		return &p.Controllers[at+1]
	}
	return nil
}

// handoffReached is when the handoff was reached, nil for none.
func (p *Pod) handoffReached() Times {
	if h := p.handoff(); h != nil {
		return h.Reached
	}
	return nil
}

// scaledByChange: the root workload's change scaled the workload below it (a Deployment's
// ReplicaSet), so a client's request started the chain even when readyspan could not name
// the client. A workload that is the Pod's own controller states its cause (Pod.Cause).
func (p *Pod) scaledByChange() bool { return p.Cause == CauseNone && p.handoff() != nil }

// controllers draws one step per workload from the root of the chain down: each from where
// the one above handed down (the root request persisted, for the first) to where it handed
// down in turn, the last to the Pod created. reached is the handoff as the timeline resolved
// it; a later step's reach is resolved here.
func (b *builder) controllers(parent int, persisted, created, reached point) {
	p := b.pod
	at := p.rootAt()
	if at < 0 {
		return
	}
	from := persisted
	for i := at; i < len(p.Controllers); i++ {
		step := ControllerStep(p.Controllers[i].Kind)
		if i == len(p.Controllers)-1 {
			b.workloadStep(parent, step, from, created)
			return
		}
		to := reached
		if i > at {
			to = resolve(p.Controllers[i+1].Reached)
		}
		if !to.observed {
			to = derived(from.t)
		}
		b.add(spanHead{Name: step, Path: step, Service: ServiceController}, parent, from, to)
		// A reach before the step's start (two components' clocks) is clamped by add, which
		// says so; the next step starts where this one was drawn to end.
		to.t = max(to.t, from.t)
		from = to
	}
}

// workloadStep draws a workload controller's step: from what gave it reason to create the Pod
// (its trigger; the root request's persistence when the trigger is that request or unstated)
// to the Pod created. A trigger after the Pod's creation (clocks of two components) is clamped
// to it by add, which says so.
func (b *builder) workloadStep(parent int, name string, from, created point) {
	if t := resolve(b.pod.Trigger); t.observed && t.t > from.t {
		from = t
	} else if !t.observed && b.pod.Cause != CauseNone && b.pod.Cause != CauseChange && b.pod.Cause != CauseSchedule {
		// The cause is known (a replacement, a predecessor) but not when it came.
		from.observed, from.src = false, SourceDerived
	}
	i := b.add(spanHead{Name: name, Path: name, Service: ServiceController}, parent, from, created)
	b.causeAttrs(i)
}

// causeAttrs names the cause of a controller's step on its span.
func (b *builder) causeAttrs(i int) {
	p := b.pod
	if p.Cause == CauseNone {
		return
	}
	sp := &b.trace.Spans[i]
	sp.Attrs = append(sp.Attrs, Attr{AttrCause, string(p.Cause)})
	if p.CauseObject != "" {
		sp.Attrs = append(sp.Attrs, Attr{AttrCausePod, p.CauseObject})
	}
}
