package phases

// The kubelet phase: volumes, the sandbox, and each container's pull, create, start, hooks,
// probes and restarts.

import (
	"strings"
	"time"
)

// kubelet adds the sandbox, init containers and per-container steps. The kubelet works through
// a Pod in order (sandbox, each init container to completion, then each app container: pull,
// create, start, postStart), so each step starts where the one before it ended.
func (b *builder) kubelet(parent int, bound point) {
	p := b.pod
	sp := &b.trace.Spans[parent]
	for _, o := range p.PodWarnings {
		sp.AddEvent(occurrenceEvent(o.Reason, o))
	}
	sortEvents(sp.Events())
	if sp.Status != StatusError && b.outcome != OutcomeReady {
		// The last failure the kubelet phase showed: a volume's, or the sandbox's.
		var last *Occurrence
		if len(p.PodWarnings) > 0 {
			last = &p.PodWarnings[len(p.PodWarnings)-1]
		}
		if v := lastVolumeFailure(p); v != nil && (last == nil || v.Time.At >= last.Time.At) {
			last = v
		}
		if last != nil {
			sp.Status, sp.StatusMessage = StatusError, last.Reason+": "+last.Message
		}
	}
	sandbox := resolve(p.SandboxReady)
	if len(p.Containers) > 0 {
		// The sandbox was ready before the kubelet's first event about a container, which
		// follows it at once: a whole-second condition is placed at that event when it falls
		// in the condition's second (narrow.go). The status that says so is written
		// asynchronously and may reach readyspan later than the event: a receive time after
		// it gives way to it.
		first := firstStep(&p.Containers[0])
		sandbox = narrow(sandbox, []point{bound}, []point{first}, placeAtNext)
		sandbox = earlierBound(sandbox, first)
		if !first.observed && sandbox.observed && p.SandboxReadyLate {
			// No event about a container, and the condition was not reported before the
			// kubelet went on to the containers: it bounds the sandbox from above only.
			sandbox = derived(sandbox.t)
		}
	}
	sbEnd := orEnd(sandbox, b.drawn[parent].end)
	if sandbox.src == SourceDerived {
		sbEnd = sandbox
	}
	sbStart := bound
	sb, sandboxDrawn := b.draw(spanHead{Name: SpanKubeletSandbox, Path: SpanKubeletSandbox, Service: ServiceKubelet}, parent, sbStart, sbEnd)
	for _, o := range p.PodWarnings {
		if o.Reason == "FailedCreatePodSandBox" || o.Reason == "NetworkNotReady" {
			s := &b.trace.Spans[sb]
			s.AddEvent(occurrenceEvent(o.Reason, o))
			if !sandbox.observed {
				s.Status, s.StatusMessage = StatusError, o.Reason
			}
		}
	}
	if v := lastVolumeFailure(p); v != nil && !sandbox.observed {
		s := &b.trace.Spans[sb]
		if s.Status != StatusError {
			s.Status, s.StatusMessage = StatusError, v.Reason
		}
	}
	sbEnd = sandboxDrawn.end
	sbEnd.observed = sandbox.observed
	b.volumes(sb, sandboxDrawn.start, sbEnd)
	turn := sandboxDrawn.end
	for i := range p.Containers {
		var next *Container
		if i+1 < len(p.Containers) {
			next = &p.Containers[i+1]
		}
		turn = b.container(parent, &p.Containers[i], next, turn)
	}
}

// firstStep is the earliest precise (event) observation of a container's steps: an upper
// bound for anything the kubelet finished before turning to it.
func firstStep(c *Container) point {
	var out point
	for _, t := range []Times{c.PullStarted, c.PullFinished, c.Created, c.Started} {
		for _, s := range t {
			if s.Source.rank() > 0 {
				continue
			}
			if !out.observed || s.At < out.t {
				out = point{t: s.At, src: s.Source, observed: true}
			}
		}
	}
	return out
}

// earlierBound returns the earlier of an observation and an upper bound on it, when the bound
// is earlier (a watch time that arrived after the next step's own event).
func earlierBound(p, bound point) point {
	if bound.observed && (!p.observed || bound.t < p.t) && p.src != SourceEventName && p.src != SourceEventTime {
		if !p.observed {
			return p
		}
		return bound
	}
	return p
}

func orEnd(p point, t Instant) point {
	if p.observed {
		return p
	}
	return derived(t)
}

// containerSteps are a container's steps, each resolved once from its observations.
type containerSteps struct {
	pullStarted, pullFinished point // Pulling, Pulled
	created, started          point
	postStartDone             point // the postStart hook returned (see hookEnd)
	startupDone               point // the startup probe passed
	readyAt                   point // the readiness probe passed
	finished                  point // an init container exited
	restarted                 point // the latest run after a restart started
}

// resolveSteps resolves a container's steps. An init container's exit is narrowed by the next
// container's first event (following is nil for the last container).
func resolveSteps(c *Container, following *Container) containerSteps {
	st := containerSteps{
		pullStarted: resolve(c.PullStarted), pullFinished: resolve(c.PullFinished),
		created: resolve(c.Created), started: resolve(c.Started),
		startupDone: resolve(c.StartupDone), readyAt: resolve(c.ReadyAt), finished: resolve(c.Finished),
		restarted: resolve(c.Restarted),
	}
	var next point
	if following != nil {
		next = firstStep(following)
	}
	if c.Init && !c.Sidecar && following != nil {
		// It exited just before the next container's first event.
		st.finished = narrow(st.finished, []point{st.started, st.created}, []point{next}, placeAtNext)
		st.finished = earlierBound(st.finished, next)
	}
	if c.HasPostStart && st.started.observed {
		st.postStartDone = hookEnd(c, &st, next)
	}
	return st
}

// hookEnd is when a container's postStart hook returned. The kubelet runs the hook right after
// Started and turns to nothing else until it returns: not to the next container (whose first
// event follows within milliseconds), not to the status (it reports the container running only
// afterwards). So the end is the earliest of what shows it: the kubelet's FailedPostStartHook
// event, the next container's first event, the first status with the container running, or,
// later still, the probes' results. Each is an upper bound; the kubelet states the end of a hook
// that succeeded nowhere in the API, so for the last container it is a watch time.
func hookEnd(c *Container, st *containerSteps, next point) point {
	end := resolve(c.PostStartDone)
	for _, p := range []point{next, st.startupDone, st.readyAt} {
		if p.observed && p.t >= st.started.t && (!end.observed || p.t < end.t) {
			end = p
		}
	}
	return end
}

// containerSpan is a container being drawn: what was observed, its resolved steps, and the
// span its steps go in.
type containerSpan struct {
	c     *Container
	steps containerSteps
	span  int    // the container's span
	path  string // the container's span path, which its steps' paths extend
	// name and image are the container's name and image as attribute values, converted once
	// for the several spans that state them.
	name, image any
	// podEnd is the kubelet phase's end: where a step that never finished ends.
	podEnd Instant
}

// container adds one container's span and its steps, starting at turn (when the kubelet got
// to it), and returns when the next container's turn starts.
func (b *builder) container(parent int, c *Container, following *Container, turn point) point {
	name := SpanContainer
	if c.Init && !c.Sidecar {
		name = SpanContainerInit
	} else if c.Sidecar {
		name = SpanContainerSidecar
	}
	ctr := &containerSpan{c: c, steps: resolveSteps(c, following), path: name + "/" + c.Name, podEnd: b.drawn[parent].end,
		name: c.Name, image: c.Image}
	st := &ctr.steps

	// The container's own span runs from its turn to its last observed step.
	cEnd := turn
	for _, pt := range []point{st.pullStarted, st.pullFinished, st.created, st.started, st.postStartDone, st.startupDone, st.readyAt, st.finished} {
		cEnd = later(cEnd, pt)
	}
	// One that neither got ready nor exited, and failed or belongs to a Pod that did not get
	// Ready, was still at it when the trace ended.
	failed := len(c.PullFailures) > 0 || len(c.Failures) > 0
	if !(st.readyAt.observed || st.finished.observed) && (failed || b.outcome != OutcomeReady) {
		cEnd = derived(ctr.podEnd)
	}
	ctr.span = b.add(spanHead{Name: name, Path: ctr.path, Service: ServiceKubelet}, parent, turn, cEnd)
	cs := &b.trace.Spans[ctr.span]
	cs.Attrs = append(cs.Attrs, Attr{AttrContainerName, ctr.name}, Attr{AttrImageName, ctr.image})
	if c.Restarts > 0 {
		cs.Attrs = append(cs.Attrs, Attr{AttrRestarts, int64(c.Restarts)})
	}
	for _, o := range c.Failures {
		cs.AddEvent(occurrenceEvent(o.Reason, o))
	}
	for _, o := range c.Unhealthy {
		cs.AddEvent(occurrenceEvent("Unhealthy", o))
	}
	sortEvents(cs.Events())
	if len(c.Failures) > 0 && !(st.readyAt.observed || st.finished.observed) {
		last := c.Failures[len(c.Failures)-1]
		cs.Status, cs.StatusMessage = StatusError, last.Reason
	}

	afterPull := b.pull(ctr, turn)
	b.steps(ctr, afterPull)
	b.restarts(ctr)
	b.probes(ctr)
	if c.Init && !c.Sidecar {
		// An init container runs to completion before the kubelet turns to the next one.
		b.step(ctr, SpanRun, st.started, st.finished)
		if st.finished.observed {
			return st.finished
		}
		if st.started.observed {
			return st.started
		}
		return turn
	}
	// The kubelet does not wait for an app container or a sidecar beyond starting it and
	// running its postStart hook.
	if c.HasPostStart && st.postStartDone.observed {
		return st.postStartDone
	}
	if next := later(st.started, st.created); next.observed {
		return next
	}
	return turn
}

// pull adds the image pull: Pulling → Pulled (includes waiting behind other pulls), with the
// pure transfer the kubelet states as a child ending at Pulled. It returns where creating the
// container starts: after the pull, or nowhere observed when the pull failed.
func (b *builder) pull(ctr *containerSpan, turn point) point {
	c, pullStart, pullEnd := ctr.c, ctr.steps.pullStarted, ctr.steps.pullFinished
	ps := pullStart
	if !ps.observed {
		ps = turn // already present: the check starts when the kubelet gets to the container
		if c.Cache == "warm" && pullEnd.observed && (turn.src == SourceStatus || turn.src == SourceMetadata || !turn.observed) {
			ps = derived(pullEnd.t) // a whole-second turn would invent up to a second of pulling
		}
	}
	pe := pullEnd
	pullFailed := len(c.PullFailures) > 0 && !pullEnd.observed
	if pullFailed {
		pe = derived(ctr.podEnd)
	}
	// Every failed attempt counts, whether or not a pull span can be drawn.
	b.failedPulls += c.FailedPulls
	if pe.observed || pullFailed || ps.observed {
		if !pe.observed && !pullFailed {
			pe = derived(ps.t)
		}
		pi := b.add(spanHead{Name: SpanImagePull, Path: ctr.path + "/image_pull", Service: ServiceKubelet}, ctr.span, ps, pe)
		sp := &b.trace.Spans[pi]
		sp.Attrs = append(sp.Attrs, Attr{AttrContainerName, ctr.name}, Attr{AttrImageName, ctr.image})
		if c.Cache != "" {
			sp.Attrs = append(sp.Attrs, Attr{AttrImageCache, c.Cache})
		}
		if c.ImageSize > 0 {
			sp.Attrs = append(sp.Attrs, Attr{AttrImageSize, c.ImageSize})
		}
		if c.PullTotal > 0 {
			sp.Attrs = append(sp.Attrs, Attr{AttrPullTotal, float64(c.PullTotal) / float64(time.Millisecond)})
		}
		for _, o := range c.PullFailures {
			sp.AddEvent(occurrenceEvent(o.Reason, o))
		}
		sortEvents(sp.Events())
		if pullFailed {
			last := c.PullFailures[len(c.PullFailures)-1]
			sp.Status, sp.StatusMessage = StatusError, last.Reason
			cs := &b.trace.Spans[ctr.span]
			cs.Status, cs.StatusMessage = StatusError, last.Reason
		}
		b.pulls = append(b.pulls, drawnPull{c: c, pulling: pullStart, pulled: pullEnd})
		if c.PullTransfer > 0 && pullEnd.observed {
			ts := point{t: pullEnd.t - Instant(c.PullTransfer), src: SourceMessage, observed: true}
			ti := b.add(spanHead{Name: SpanImagePullTransfer, Path: ctr.path + "/image_pull/transfer", Service: ServiceKubelet}, pi, ts, pullEnd)
			t := &b.trace.Spans[ti]
			t.Attrs = append(t.Attrs, Attr{AttrContainerName, ctr.name}, Attr{AttrImageName, ctr.image}, Attr{AttrPullTransfer, float64(c.PullTransfer) / float64(time.Millisecond)})
		}
	}
	if pullFailed {
		return point{}
	}
	return later(pe, ps)
}

// steps adds creating and starting the container, from afterPull on, and its postStart hook.
func (b *builder) steps(ctr *containerSpan, afterPull point) {
	st := &ctr.steps
	b.step(ctr, SpanCreate, afterPull, st.created)
	b.step(ctr, SpanStart, st.created, st.started)
	if ctr.c.HasPostStart && st.started.observed {
		// The hook runs synchronously after Started, until hookEnd.
		end := st.postStartDone
		if !end.observed {
			end = derived(ctr.podEnd) // still running when the trace ended
		}
		i := b.add(spanHead{Name: SpanPostStart, Path: ctr.path + "/post_start", Service: ServiceKubelet}, ctr.span, st.started, end)
		sp := &b.trace.Spans[i]
		sp.Attrs = append(sp.Attrs, Attr{AttrContainerName, ctr.name})
		for _, o := range ctr.c.Failures {
			if o.Reason == "FailedPostStartHook" {
				sp.AddEvent(occurrenceEvent(o.Reason, o))
				sp.Status, sp.StatusMessage = StatusError, o.Reason
				break // the first run's hook; later runs' failures are on the restart
			}
		}
	}
}

// restarts adds the restarts of a container the kubelet killed and started again (a failed
// liveness or startup probe, a failed postStart hook): from the first kill, as its Killing event
// states it, to the start of its latest run, or to the trace's end if it did not run again. The
// span names why, and counts the restarts; each Killing is an event on it.
func (b *builder) restarts(ctr *containerSpan) {
	c, st := ctr.c, &ctr.steps
	if c.Restarts == 0 {
		return
	}
	var kills []Occurrence
	for _, o := range c.Failures {
		if o.Reason == "Killing" {
			kills = append(kills, o)
		}
	}
	if len(kills) == 0 {
		return
	}
	first := point{t: kills[0].Time.At, src: kills[0].Time.Source, observed: !kills[0].Time.At.IsZero()}
	for _, k := range kills[1:] {
		if !k.Time.At.IsZero() && (!first.observed || k.Time.At < first.t) {
			first = point{t: k.Time.At, src: k.Time.Source, observed: true}
		}
	}
	if !first.observed {
		return
	}
	end := st.restarted
	if !end.observed || end.t < first.t {
		end = derived(ctr.podEnd)
	}
	i := b.add(spanHead{Name: SpanRestart, Path: ctr.path + "/restart", Service: ServiceKubelet}, ctr.span, first, end)
	sp := &b.trace.Spans[i]
	sp.Attrs = append(sp.Attrs, Attr{AttrContainerName, ctr.name}, Attr{AttrRestarts, int64(c.Restarts)},
		Attr{AttrRestartReason, restartReason(kills[0].Message)})
	for _, k := range kills {
		sp.AddEvent(occurrenceEvent("Killing", k))
	}
	if !st.restarted.observed && b.outcome != OutcomeReady && b.outcome != OutcomeInProgress {
		sp.Status, sp.StatusMessage = StatusError, "not running again"
	}
}

// restartReason is why the kubelet killed a container, from its Killing message: `Container %s
// failed liveness probe, will be restarted`, `… failed startup probe, …`, `FailedPostStartHook`;
// "killed" for another message, which its Killing event on the span carries whole.
func restartReason(msg string) string {
	switch {
	case strings.Contains(msg, " failed liveness probe"):
		return "liveness probe failed"
	case strings.Contains(msg, " failed startup probe"):
		return "startup probe failed"
	case msg == "FailedPostStartHook":
		return "postStart hook failed"
	}
	return "killed"
}

// probes adds the startup probe, until it passed, and the readiness probe, until it passed or,
// for a Pod that did not get Ready, until the trace ended.
func (b *builder) probes(ctr *containerSpan) {
	c, st := ctr.c, &ctr.steps
	if c.HasStartupProbe {
		b.step(ctr, SpanStartupProbe, st.started, st.startupDone)
	}
	if !c.HasReadinessProbe {
		return
	}
	rs := st.started
	if c.HasStartupProbe {
		rs = later(st.started, st.startupDone) // readiness is probed once startup passed
	}
	if st.restarted.observed && st.readyAt.observed && st.restarted.t <= st.readyAt.t {
		rs = later(rs, st.restarted) // the run that got ready is the latest
	}
	switch {
	case st.readyAt.observed:
		b.step(ctr, SpanReadiness, rs, st.readyAt)
	case st.started.observed && b.outcome != OutcomeReady:
		// Never passed: the probe ran until the trace ended.
		i := b.add(spanHead{Name: SpanReadiness, Path: ctr.path + "/readiness", Service: ServiceKubelet}, ctr.span, rs, derived(ctr.podEnd))
		sp := &b.trace.Spans[i]
		sp.Attrs = append(sp.Attrs, Attr{AttrContainerName, ctr.name})
		for _, o := range c.Unhealthy {
			sp.AddEvent(occurrenceEvent("Unhealthy", o))
		}
		if len(c.Unhealthy) > 0 && b.outcome != OutcomeInProgress {
			sp.Status, sp.StatusMessage = StatusError, "readiness probe failing"
		}
	}
}

// step adds one step of a container that was observed to end; an unobserved start is taken to
// be its end.
func (b *builder) step(ctr *containerSpan, name string, s, e point) {
	if !e.observed {
		return
	}
	if !s.observed {
		s = derived(e.t)
	}
	i := b.add(spanHead{Name: name, Path: ctr.path + "/" + strings.TrimPrefix(name, "container."), Service: ServiceKubelet}, ctr.span, s, e)
	b.trace.Spans[i].Attrs = append(b.trace.Spans[i].Attrs, Attr{AttrContainerName, ctr.name})
}
