package phases

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Attribute keys readyspan adds to spans (OTel semantic conventions are used where they exist).
const (
	AttrPodName         = "k8s.pod.name"
	AttrPodUID          = "k8s.pod.uid"
	AttrNamespace       = "k8s.namespace.name"
	AttrNodeName        = "k8s.node.name"
	AttrDeploymentName  = "k8s.deployment.name"
	AttrReplicaSetName  = "k8s.replicaset.name"
	AttrStatefulSetName = "k8s.statefulset.name"
	AttrDaemonSetName   = "k8s.daemonset.name"
	AttrJobName         = "k8s.job.name"
	AttrCronJobName     = "k8s.cronjob.name"
	// AttrCause is on a workload controller's step: what gave it reason to create the Pod
	// (Cause); AttrCausePod names the Pod that cause is about.
	AttrCause    = "readyspan.controller.cause"
	AttrCausePod = "readyspan.controller.cause.pod"
	// AttrReplacesPod and AttrReplacesWhy are on the root of a Pod that replaces another
	// (self-healing), which the root also links to.
	AttrReplacesPod = "readyspan.replaces.pod"
	AttrReplacesWhy = "readyspan.replaces.why"
	// AttrLinkRelation says what a link points to: "replaces" (a Pod's predecessor),
	// "preemption_victim" (from a preemptor's scheduling to a Pod preempted for it),
	// "preempted_by" (from a victim to its preemptor), and the rollout model's relations.
	AttrLinkRelation    = "readyspan.link"
	AttrContainerName   = "k8s.container.name"
	AttrRestarts        = "k8s.container.restart_count"
	AttrRestartReason   = "readyspan.restart.reason"
	AttrImageName       = "container.image.name"
	AttrImageSize       = "container.image.size"
	AttrImageCache      = "readyspan.image.cache"
	AttrOutcome         = "readyspan.outcome"
	AttrSourceStart     = "readyspan.time.source.start"
	AttrSourceEnd       = "readyspan.time.source.end"
	AttrPrecisionStart  = "readyspan.time.precision.start"
	AttrPrecisionEnd    = "readyspan.time.precision.end"
	AttrObserved        = "readyspan.time.observed"
	AttrClamped         = "readyspan.clamped"
	AttrApplicable      = "readyspan.phase.applicable"
	AttrRoot            = "readyspan.root"
	AttrClient          = "readyspan.client"
	AttrAttempts        = "readyspan.scheduling.attempts"
	AttrKubeletAhead    = "readyspan.clock.kubelet_ahead_ms"
	AttrSchedulerAhead  = "readyspan.clock.scheduler_ahead_ms"
	AttrControllerAhead = "readyspan.clock.controller_ahead_ms"
	AttrKubeletBehind   = "readyspan.clock.kubelet_behind_ms" // a lower bound (skew.go)
	AttrCurrentPhase    = "readyspan.phase.current"
	// AttrFailureReason is on the root of a trace that did not reach Ready while a failure was
	// current (ErrImagePull, CrashLoopBackOff, …), whatever its outcome: an in-progress or
	// stuck Pod's reason is as much the answer as a failed one's.
	AttrFailureReason = "readyspan.failure.reason"
	AttrPullTransfer  = "readyspan.image.pull.transfer_ms"
	AttrPullTotal     = "readyspan.image.pull.total_ms"
	// AttrInconsistent marks a root span whose stamps put a milestone before one that must
	// precede it, beyond what precision and clock skew explain; AttrInconsistency says which.
	AttrInconsistent  = "readyspan.time.inconsistent"
	AttrInconsistency = "readyspan.time.inconsistency"
	// AttrUncertaintyStart and AttrUncertaintyEnd are the width, in ms, of the window a
	// boundary from a whole-second stamp lies in once narrowed by the precise stamps around it
	// (narrow.go): 1000 when nothing narrowed it. Absent for boundaries stamped precisely.
	AttrUncertaintyStart = "readyspan.time.uncertainty.start_ms"
	AttrUncertaintyEnd   = "readyspan.time.uncertainty.end_ms"
	// AttrNominatedNode is status.nominatedNodeName as the Pod showed it before its bind, on the
	// scheduling phase.
	AttrNominatedNode = "readyspan.scheduling.nominated_node"
	// AttrGatesRemovedBy is the field manager whose write removed the last scheduling gate, when
	// its managedFields entry shows it, on scheduling.gated.
	AttrGatesRemovedBy = "readyspan.scheduling.gates_removed_by"
	// AttrNodeCreated and AttrNodeReady are the new Node's creation and Ready times (RFC 3339,
	// UTC, as resolved from its creationTimestamp, its Ready condition and the watch), on
	// scheduling.waiting_for_node; AttrAutoscaler names the autoscaler whose events the Pod
	// carries (cluster-autoscaler, karpenter).
	AttrNodeCreated = "readyspan.node.created"
	AttrNodeReady   = "readyspan.node.ready"
	AttrAutoscaler  = "readyspan.autoscaler"
	// AttrPreemptedBy and AttrPreemptedByUID are on the root of a Pod the scheduler preempted:
	// the preemptor as namespace/name (when known), and its UID.
	AttrPreemptedBy    = "readyspan.preempted_by"
	AttrPreemptedByUID = "readyspan.preempted_by.uid"
)

// Options tune Build. The zero value is valid.
type Options struct {
	// Stateful marks Pods with volumes other than secret, configMap, downwardAPI, emptyDir or
	// projected; the kubelet excludes them from its SLI and so does readyspan.
	Stateful bool
}

// point is a resolved boundary with where it came from.
type point struct {
	t        Instant
	src      Source
	observed bool
	// uncertainty is the width of the window the boundary lies in, for a whole-second stamp
	// (narrow); 0 for the others.
	uncertainty time.Duration
}

func resolve(t Times) point {
	s, ok := t.Resolve()
	if !ok {
		return point{}
	}
	p := point{t: s.At, src: s.Source, observed: true}
	if s.Source.Precision() == time.Second {
		p.uncertainty = time.Second
	}
	return p
}

func derived(t Instant) point { return point{t: t, src: SourceDerived} }

func later(a, b point) point {
	if !a.observed {
		return b
	}
	if b.observed && b.t > a.t {
		return b
	}
	return a
}

// boundary names a point of the chain the phases run between, in causal order.
type boundary int

const (
	requestSent      boundary = iota // the client sent the request: never observed without client data
	requestReceived                  // the apiserver received it
	requestPersisted                 // it was persisted (Pending)
	podCreated                       // the Pod exists
	podScheduled                     // the Pod is bound to a node
	containersReady                  // the kubelet found every container ready
	podServing                       // Ready reported and, with a Service, in its endpoints
	boundaryCount
)

// phaseSpec is one phase: the boundaries it runs between and the component it belongs to.
type phaseSpec struct {
	name     string
	service  string
	from, to boundary
}

// phaseTable drives the six phases, in the order of Phases (Summary's arrays are indexed
// like it). Each phase ends where the next starts: together they cover the chain.
var phaseTable = [...]phaseSpec{
	{PhaseSubmit, ServiceClient, requestSent, requestReceived},
	{PhaseAPIServer, ServiceAPIServer, requestReceived, requestPersisted},
	{PhaseControllers, ServiceController, requestPersisted, podCreated},
	{PhaseScheduling, ServiceScheduler, podCreated, podScheduled},
	{PhaseKubelet, ServiceKubelet, podScheduled, containersReady},
	{PhaseStatus, ServiceKubelet, containersReady, podServing},
}

// phaseIndex is the position of a phase in phaseTable (and in Phases).
func phaseIndex(name string) int {
	for i, ph := range phaseTable {
		if ph.name == name {
			return i
		}
	}
	panic("phases: no phase " + name)
}

// Build reconstructs the spans of one Pod's startup from what was observed. It reads no clock:
// the same Pod gives the same spans.
func Build(in *Pod, opts Options) *Trace {
	p, skew := correctSkew(in)
	b := &builder{pod: p, trace: &Trace{TraceID: TraceIDFor(p.UID), Pod: in}, outcome: p.Outcome, spanIDs: spanIDSeedFor(p.UID)}
	sc := scratchPool.Get().(*buildScratch)
	defer sc.release(b)
	b.trace.Spans, b.attrBlock, b.parents, b.drawn = make([]Span, 0, max(sc.spans, minSpans)), sc.attrs[:0], sc.parents[:0], sc.drawn[:0]
	if b.outcome == "" { // the tracer leaves it empty for a Pod that got Ready
		b.outcome = OutcomeReady
	}
	tl := b.timeline()
	b.spans(&tl, skew)
	b.finish()
	b.trace.Summary = b.summarize(&tl, opts)
	return b.trace
}

// buildScratch is the working memory of a Build: the block the spans' attributes are cut from
// until finish copies them into the trace, and how many spans the last trace had. It is reused
// from one Build to the next (scratchPool), so drawing a trace allocates little beyond the
// trace itself.
type buildScratch struct {
	attrs []Attr
	// parents and drawn are the builder's: each span's parent's index, and its bounds, as drawn.
	parents []int
	drawn   []drawnBounds
	// spans is the room the next trace's spans are drawn into: the last one's count, so a
	// stream of like Pods draws each without growing the slice.
	spans int
}

// minSpans is the room for spans a Build starts with at least: a Pod with one container has
// about 17.
const minSpans = 16

// maxSpareSpans is the unused room a trace may keep in its spans (finish).
const maxSpareSpans = 4

var scratchPool = sync.Pool{New: func() any { return new(buildScratch) }}

// release keeps what b grew the scratch to and returns it to the pool. It is not cleared: the
// next Build overwrites what it reads, and until then the scratch holds one trace's strings,
// whose clearing was a tenth of a Build.
func (sc *buildScratch) release(b *builder) {
	sc.spans, sc.attrs, sc.parents, sc.drawn = len(b.trace.Spans), b.attrBlock[:0], b.parents[:0], b.drawn[:0]
	scratchPool.Put(sc)
}

// timeline is a Pod's startup as resolved from what was observed, before anything is drawn:
// the spans and the summary are both made from it.
type timeline struct {
	// created and served are the Pod's creation and its serving (Ready and, with a Service,
	// in its endpoints), resolved and narrowed: the startup runs from one to the other.
	created, served point
	// scaled, kubeletDone and ready are resolved and narrowed like the chain's boundaries: the
	// controllers' and the status steps are drawn from them.
	scaled, kubeletDone, ready point
	// chain holds the boundaries, every one set: an unobserved one is derived from the one
	// before it, and those a Pod that did not get Ready never reached are the trace's end.
	// clamped marks the ones moved forward to keep the chain in order.
	chain   [boundaryCount]point
	clamped [boundaryCount]bool
	// rootStart is the first observed boundary, moved to the chain's start.
	rootStart point
	// phases holds each phase's start and end, indexed like phaseTable.
	phases [len(phaseTable)]interval
	// current is the phase (index into phaseTable) a Pod that did not get Ready was in, -1 for
	// one that did; stoppedIn is its name as reported, the tracer's StuckPhase when it named one.
	current   int
	stoppedIn string
	// bareRoot is set when the Pod is the root object: no controller created it.
	bareRoot bool
	attempts int
	// inconsistent describes each milestone the stamps put impossibly early (outOfOrder).
	inconsistent []inconsistency
	// failure and failingSince are the Pod's failure when it did not reach Ready (failureOf):
	// the root span names it and the summary counts it.
	failure      string
	failingSince time.Time
}

// timeline resolves the Pod's boundaries, narrows the whole-second ones, fills the chain and
// cuts it into the phases.
func (b *builder) timeline() timeline {
	p := b.pod
	tl := timeline{current: -1, bareRoot: p.Root == RootBarePod || p.Root == RootController, attempts: attempts(p)}
	tl.failure, tl.failingSince = failureOf(p, b.outcome)

	// The chain of phase boundaries, in causal order. Every stamp of the Pod's creation
	// readyspan can see is an upper bound (the watch, the controller's event after its create
	// returned); so is the scheduler's first attempt, which cannot precede the Pod.
	created := resolve(p.Created)
	for _, o := range p.SchedulingFailure {
		if o.Time.Source.rank() == 0 && created.observed && o.Time.At < created.t {
			created = point{t: o.Time.At, src: o.Time.Source, observed: true}
		}
	}
	persisted := resolve(p.AuditPersisted)
	if !persisted.observed && !tl.bareRoot {
		persisted = resolve(p.RootPersisted)
	}
	if tl.bareRoot {
		// The Pod is the root object: it exists once persisted, and the audit log's answer
		// time says so more precisely than any later observation of it.
		if persisted.observed {
			created = persisted
		} else {
			persisted = created
		}
	}
	kubeletDone := resolve(p.ContainersReady)
	if !kubeletDone.observed {
		kubeletDone = b.lastContainer(func(c *Container) Times { return c.ReadyAt })
	}
	ready := resolve(p.Ready)
	received, scaled, scheduled, endpoints := resolve(p.AuditReceived), resolve(p.ReplicaSetScaled), resolve(p.Scheduled), resolve(p.EndpointsReady)
	tl.inconsistent = b.inconsistencies(received, persisted, scaled, created, scheduled, kubeletDone, ready)

	// Whole-second stamps narrowed by the precise stamps around them (narrow.go). Each is
	// bounded by what must precede it and what must follow it, in causal order: the audit
	// log's receipt, the Deployment change, the scale-up, the Pod, the bind, the kubelet's
	// first event about a container, its last, Ready, the endpoints.
	kubeletFirst, kubeletLast := earliestPrecise(p.Containers), latestPrecise(p.Containers)
	samePoint := persisted == created // a bare Pod: its creation is the root request
	persisted = narrow(persisted, []point{received}, []point{scaled, created, scheduled, kubeletFirst}, placeEarliest)
	scaled = narrow(scaled, []point{received, persisted}, []point{created, scheduled, kubeletFirst}, placeEarliest)
	if samePoint {
		created = persisted
	} else {
		created = narrow(created, []point{received, persisted, scaled}, []point{scheduled, kubeletFirst}, placeEarliest)
	}
	scheduled = narrow(scheduled, []point{received, persisted, scaled, created}, []point{kubeletFirst}, placeEarliest)
	kubeletDone = narrow(kubeletDone, []point{scheduled, kubeletLast}, nil, placeEarliest)
	ready = narrow(ready, []point{scheduled, kubeletLast}, nil, placeEarliest)
	endpoints = narrow(endpoints, []point{scheduled, kubeletLast}, nil, placeEarliest)

	served := ready
	if p.HasService {
		served = later(ready, endpoints)
		if !endpoints.observed {
			served = point{}
		}
	}
	tl.created, tl.served = created, served
	tl.scaled, tl.kubeletDone, tl.ready = scaled, kubeletDone, ready
	tl.chain = [boundaryCount]point{
		requestReceived:  received,
		requestPersisted: persisted,
		podCreated:       created,
		podScheduled:     scheduled,
		containersReady:  kubeletDone,
		podServing:       served,
	}
	fixed := b.stopChain(&tl)
	b.fillChain(&tl, &fixed)
	return tl
}

// stopChain ends the chain of a Pod that did not reach Ready: it was in the phase that starts
// at the last boundary observed, and the boundaries after that phase's start, not reached, are
// the trace's end. It returns which boundaries it set.
func (b *builder) stopChain(tl *timeline) (fixed [boundaryCount]bool) {
	p := b.pod
	chain := &tl.chain
	end := point{t: InstantOf(p.End), src: SourceWatch, observed: !p.End.IsZero()}
	if last := latestObserved(p); b.outcome != OutcomeReady && last > end.t {
		// Nothing gave an end (a snapshot without receive times), or something was seen
		// after it: the trace ends at the last thing observed.
		end = point{t: last, src: SourceDerived, observed: false}
		if !p.End.IsZero() {
			end.observed, end.src = true, SourceWatch
		}
	}
	if b.outcome == OutcomeCompleted {
		// Ran to completion without being seen Ready (a Job's Pod): the kubelet's work ends
		// when the last container started, and the trace at Succeeded; between the two the
		// Pod ran, which is no startup.
		started := b.lastContainer(func(c *Container) Times { return c.Started })
		if started.observed && started.t <= end.t {
			chain[containersReady], fixed[containersReady] = started, true
		} else {
			chain[containersReady], fixed[containersReady] = end, true
		}
		chain[podServing], fixed[podServing] = end, true
		return fixed
	}
	if b.outcome != OutcomeReady {
		// It was in the phase that starts at the last boundary observed; with the final
		// boundary observed all the same (the outcome says otherwise), in the last phase.
		// The boundaries after that phase's start were not reached: they are the trace's end.
		last := requestSent
		for at := requestReceived; at < boundaryCount; at++ {
			if chain[at].observed {
				last = at
			}
		}
		tl.current = len(phaseTable) - 1
		for i, ph := range phaseTable {
			if ph.from == last {
				tl.current = i
			}
		}
		for at := phaseTable[tl.current].from + 1; at < boundaryCount; at++ {
			chain[at], fixed[at] = end, true
		}
		tl.stoppedIn = phaseTable[tl.current].name
		if p.StuckPhase != "" {
			tl.stoppedIn = p.StuckPhase
		}
	}
	return fixed
}

// fillChain gives every boundary a time (an unobserved one takes the previous, the chain's start
// the first observed), keeps them in order, and sets each phase's interval.
func (b *builder) fillChain(tl *timeline, fixed *[boundaryCount]bool) {
	chain := &tl.chain
	// Unobserved boundaries take the previous one (the span then says it was not observed);
	// the chain's start takes the first observed boundary.
	first := point{}
	for _, c := range chain {
		if c.observed {
			first = c
			break
		}
	}
	if !chain[requestSent].observed {
		chain[requestSent] = derived(first.t)
	}
	for at := requestSent + 1; at < boundaryCount; at++ {
		if !chain[at].observed && !fixed[at] {
			chain[at] = derived(chain[at-1].t)
		}
		if chain[at].t < chain[at-1].t {
			chain[at].t = chain[at-1].t
			tl.clamped[at] = true
		}
	}
	tl.rootStart = first
	tl.rootStart.t = chain[requestSent].t

	// Each phase runs between its boundaries. The client's send time is never in the API, so
	// submit is never measured, and without audit data neither is the apiserver phase: their
	// start is a derived boundary, which the span and the summary say.
	for i, ph := range phaseTable {
		tl.phases[i] = interval{start: chain[ph.from], end: chain[ph.to]}
		if ph.name == PhaseStatus {
			// Status starts when the containers have started, while readiness is probed.
			started := b.lastContainer(func(c *Container) Times { return c.Started })
			if started.observed && started.t > chain[podScheduled].t && started.t < tl.phases[i].end.t {
				tl.phases[i].start = started
			}
		}
	}
}

// spans draws the root, the phases and their steps.
func (b *builder) spans(tl *timeline, skew clockSkew) {
	p := b.pod
	root := spanHead{Name: RootSpanName, Path: RootSpanName, Service: ServiceReadyspan, room: rootAttrs}
	rootIdx := b.add(root, -1, tl.rootStart, tl.chain[podServing])
	b.trace.Spans[rootIdx].Attrs = b.podAttrs(b.trace.Spans[rootIdx].Attrs, skew)
	if r := p.Replaces; r != nil && r.UID != "" {
		// The Pod this one replaces: its own trace, whose root span this one's follows from.
		b.trace.Spans[rootIdx].AddLink(podLink(PodRef{Namespace: p.Namespace, Name: r.Name, UID: r.UID}, "replaces"))
	}
	// Each phase is drawn and then its steps, depth first: the order the trace lists its spans
	// in (finish), so that most traces need no reordering.
	var phaseSpan [len(phaseTable)]int // each phase's span, indexed like phaseTable
	for i, ph := range phaseTable {
		var drawn interval
		phaseSpan[i], drawn = b.draw(spanHead{Name: ph.name, Path: ph.name, Service: ph.serviceFor(p)}, rootIdx, tl.phases[i].start, tl.phases[i].end)
		sp := &b.trace.Spans[phaseSpan[i]]
		if tl.clamped[ph.to] {
			sp.Attrs = append(sp.Attrs, Attr{AttrClamped, clampedEnd})
		}
		switch ph.name {
		case PhaseControllers:
			if tl.bareRoot {
				sp.Attrs = append(sp.Attrs, Attr{AttrApplicable, false})
			}
			b.controllers(phaseSpan[i], tl.chain[requestPersisted], tl.chain[podCreated], tl.scaled)
		case PhaseScheduling:
			b.scheduling(phaseSpan[i], drawn)
			b.volumeBinding(phaseSpan[i], tl.chain[podCreated], tl.chain[podScheduled])
		case PhaseKubelet:
			b.kubelet(phaseSpan[i], tl.chain[podScheduled])
		case PhaseStatus:
			b.status(phaseSpan[i], drawn.start, tl.kubeletDone, tl.ready)
		}
	}

	rootSpan := &b.trace.Spans[rootIdx]
	switch b.outcome {
	case OutcomeReady, OutcomeCompleted:
		rootSpan.Status = StatusOK
	case OutcomeInProgress:
		rootSpan.Attrs = append(rootSpan.Attrs, Attr{AttrCurrentPhase, tl.stoppedIn})
	default:
		msg := failureMessage(p, b.outcome, tl.stoppedIn)
		rootSpan.Status, rootSpan.StatusMessage = StatusError, msg
		sp := &b.trace.Spans[phaseSpan[tl.current]]
		sp.Status, sp.StatusMessage = StatusError, msg
		rootSpan.Attrs = append(rootSpan.Attrs, Attr{AttrCurrentPhase, tl.stoppedIn})
	}
	if tl.failure != "" {
		rootSpan.Attrs = append(rootSpan.Attrs, Attr{AttrFailureReason, tl.failure})
	}
	if by := p.PreemptedBy; by != nil {
		if by.Name != "" {
			rootSpan.Attrs = append(rootSpan.Attrs, Attr{AttrPreemptedBy, by.Namespace + "/" + by.Name})
		}
		rootSpan.Attrs = append(rootSpan.Attrs, Attr{AttrPreemptedByUID, by.UID})
		rootSpan.AddLink(podLink(*by, linkPreemptedBy))
	}
	// A Pod is preempted whenever the scheduler needs its room, bound or not: the event goes on
	// the root, not on a phase it may lie beyond.
	for _, o := range p.Preempted {
		rootSpan.AddEvent(occurrenceEvent("Preempted", o))
	}
	rootSpan.Attrs = append(rootSpan.Attrs, Attr{AttrAttempts, int64(tl.attempts)})
	if len(tl.inconsistent) > 0 {
		// The spans are drawn with the boundaries clamped into order; the root says why (and
		// the summary keeps the trace out of the histograms).
		why := make([]string, len(tl.inconsistent))
		for i, x := range tl.inconsistent {
			why[i] = x.why
		}
		rootSpan.Attrs = append(rootSpan.Attrs, Attr{AttrInconsistent, true}, Attr{AttrInconsistency, strings.Join(why, "; ")})
	}
}

// builder accumulates the spans of one trace.
type builder struct {
	pod   *Pod
	trace *Trace
	// spanIDs derives the span IDs from the Pod's UID (SpanIDFor), hashed once per trace.
	spanIDs spanIDSeed
	// outcome is the Pod's, normalised once: the tracer leaves it empty for a Pod that got Ready.
	outcome Outcome
	// pulls are the image pulls drawn, in the order drawn, for the summary to count.
	pulls []drawnPull
	// waits are the scheduling waits drawn observed at both ends, for the summary.
	waits []Wait
	// failedPulls counts the failed pull attempts of every container, drawn or not.
	failedPulls int
	// attrBlock is where the spans' attribute slices are cut from (attrs).
	attrBlock []Attr
	// drawn holds each drawn span's bounds as Instants, for its children to be clamped into.
	drawn []drawnBounds
	// parents holds the index of each drawn span's parent, -1 for the root: finish checks the
	// order the spans were drawn in with it.
	parents []int
}

// Attributes a span is given room for (attrs): what draw states (its bounds are fields, not
// attributes), and what its caller adds after (the root: the Pod's attributes and its outcome's).
const (
	drawnAttrs = 2                   // clamped twice (the bounds are fields: Span.StartBound)
	spanAttrs  = drawnAttrs + 5      // an image pull's five are the most a step adds
	rootAttrs  = drawnAttrs + 14 + 4 // podAttrs; the current phase, attempts, inconsistency
	// attrBlockLen is how many attributes the first block holds: the spans of a Pod with a
	// container or two. A Pod with more grows it, and the scratch keeps the grown one.
	attrBlockLen = 256
)

// attrs returns an empty attribute slice with room for n, cut from the scratch block the spans
// being drawn share, so attributes are appended without allocating; finish copies them into
// the trace. A span that outgrows its room is moved by append, as any slice.
func (b *builder) attrs(n int) []Attr {
	if cap(b.attrBlock)-len(b.attrBlock) < n {
		b.attrBlock = make([]Attr, 0, max(attrBlockLen, 2*cap(b.attrBlock), n))
	}
	at := len(b.attrBlock)
	b.attrBlock = b.attrBlock[:at+n]
	return b.attrBlock[at : at : at+n]
}

// spanHead is what a span is drawn from besides its bounds: its name, path and service, and the
// room for attributes it needs beyond what most spans do (0: spanAttrs). The span itself is
// filled where it is kept, not passed around whole.
type spanHead struct {
	Name, Path, Service string
	room                int
}

// add appends a span between two points, inside its parent (clamping is recorded), and returns
// its index.
func (b *builder) add(h spanHead, parent int, start, end point) int {
	i, _ := b.draw(h, parent, start, end)
	return i
}

// draw is add that also returns the span's bounds as drawn, for a span that begins where this
// one begins or ends.
func (b *builder) draw(h spanHead, parent int, start, end point) (int, interval) {
	b.trace.Spans = append(b.trace.Spans, Span{})
	b.parents = append(b.parents, parent)
	i := len(b.trace.Spans) - 1
	s := &b.trace.Spans[i]
	s.Name, s.Path, s.Service = h.Name, h.Path, h.Service
	s.SpanID = b.spanIDs.spanID(s.Path)
	s.Attrs = b.attrs(max(h.room, spanAttrs))
	if end.t < start.t {
		end.t = start.t
		s.Attrs = append(s.Attrs, Attr{AttrClamped, clampedEnd})
	}
	if parent >= 0 {
		s.ParentSpanID = b.trace.Spans[parent].SpanID
		ps := b.drawn[parent]
		// The parent's end is never before its start, so each bound is moved at most once.
		var startMoved, endMoved bool
		if start.t < ps.start {
			start.t, startMoved = ps.start, true
		}
		if start.t > ps.end {
			start.t, startMoved = ps.end, true
		}
		if end.t > ps.end {
			end.t, endMoved = ps.end, true
		}
		if end.t < start.t {
			end.t, endMoved = start.t, true
		}
		if v := clampedValue(startMoved, endMoved); v != nil {
			s.Attrs = append(s.Attrs, Attr{AttrClamped, v})
		}
	}
	s.Start, s.End = start.t.Time(), end.t.Time()
	b.drawn = append(b.drawn, drawnBounds{start.t, end.t})
	s.StartBound, s.EndBound = boundOf(start), boundOf(end)
	return i, interval{start: asDrawn(start), end: asDrawn(end)}
}

// Attribute values stated on most spans, held as interfaces once: converting a string or a
// float64 to an interface allocates, and draw states four to six of them per span.
const (
	clampedStart = "start"
	clampedEnd   = "end"
	clampedBoth  = "start,end"
)

// clampedValue is readyspan.clamped for the bounds draw moved into the parent, nil for none.
func clampedValue(start, end bool) any {
	switch {
	case start && end:
		return clampedBoth
	case start:
		return clampedStart
	case end:
		return clampedEnd
	}
	return nil
}

// sourceValue is a source's name as an attribute value, nil for no known source. Each name is a
// constant, and a constant converts to an interface without allocating, where converting a
// string read from a variable would allocate on every span.
func sourceValue(src Source) any {
	switch src {
	case SourceEventTime:
		return "event-time"
	case SourceEventName:
		return "event-name"
	case SourceWatch:
		return "watch"
	case SourceStatus:
		return "status"
	case SourceMetadata:
		return "metadata"
	case SourceEventSeconds:
		return "event-seconds"
	case SourceMessage:
		return "message"
	case SourceAudit:
		return "audit"
	case SourceDerived:
		return "derived"
	case SourceComponentSpan:
		return "component-span"
	}
	return nil
}

// secondMillis is a whole second's uncertainty as stated, the usual one.
var secondMillis any = millis(time.Second)

// millisValue is millis as an attribute value.
func millisValue(d time.Duration) any {
	if d == time.Second {
		return secondMillis
	}
	return millis(d)
}

// boundOf is what a span states about an end drawn at p.
func boundOf(p point) Bound {
	return Bound{Source: orDerived(p), Observed: p.observed, uncertainty: int32(min(max(p.uncertainty, 0), maxUncertainty))}
}

// drawnBounds is where a span was drawn: its start and end.
type drawnBounds struct{ start, end Instant }

// interval is a start and an end: a phase's before it is drawn, a span's as drawn.
type interval struct{ start, end point }

// asDrawn is a boundary as a span states it once add has clamped it: a point without a source
// is derived (not observed), and its uncertainty is kept only where the span states one.
func asDrawn(p point) point {
	src := orDerived(p)
	out := point{t: p.t, src: src, observed: src != SourceDerived}
	if p.observed && p.uncertainty > 0 {
		out.uncertainty = statedUncertainty(p.uncertainty)
	}
	return out
}

// statedUncertainty is an uncertainty as a span's attribute states it, read back to a
// Duration: float milliseconds, which can come back a nanosecond short. A boundary handed from
// one span to the next (the sandbox's end to the first container, the status phase's start to
// its steps) goes through it, so the next span states what the previous one's attribute says;
// handing on the exact Duration would change the next span's attribute in its last digit.
func statedUncertainty(d time.Duration) time.Duration {
	return time.Duration(millis(d) * float64(time.Millisecond))
}

// millis is a duration in milliseconds, as span attributes give lengths.
func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func orDerived(p point) Source {
	if !p.observed || p.src == 0 {
		return SourceDerived
	}
	return p.src
}

// PrecisionText is how spans state a source's precision: "1ns", "1us", "1ms", "1s", "receive"
// (a watch receive time: an upper bound) or "none".
func PrecisionText(src Source) string { return precisionOf(src).(string) }

// precisionOf is PrecisionText as an attribute value: constants, as in sourceValue.
func precisionOf(src Source) any {
	switch src {
	case SourceWatch:
		return "receive"
	case SourceMessage:
		return "1ms"
	}
	switch src.Precision() {
	case time.Nanosecond:
		return "1ns"
	case time.Microsecond:
		return "1us"
	case time.Second:
		return "1s"
	}
	return "none"
}

func hasAttr(as []Attr, key string) bool {
	for _, a := range as {
		if a.Key == key {
			return true
		}
	}
	return false
}

// serviceFor is the component a phase belongs to, for this Pod: submit belongs to whoever sent
// the request, when known.
func (ph phaseSpec) serviceFor(p *Pod) string {
	if ph.name != PhaseSubmit {
		return ph.service
	}
	if p.Client != "" {
		return p.Client
	}
	if p.Root != RootDeployment && p.Root != RootBarePod {
		return ServiceController
	}
	return ph.service
}

// podAttrs appends the Pod's attributes to the root span's.
func (b *builder) podAttrs(as []Attr, skew clockSkew) []Attr {
	p := b.pod
	as = append(as,
		Attr{AttrPodName, p.Name},
		Attr{AttrPodUID, p.UID},
		Attr{AttrNamespace, p.Namespace},
		Attr{AttrOutcome, string(b.outcome)},
		Attr{AttrRoot, string(p.Root)},
	)
	if p.Node != "" {
		as = append(as, Attr{AttrNodeName, p.Node})
	}
	if p.Deployment != "" {
		as = append(as, Attr{AttrDeploymentName, p.Deployment})
	}
	if p.ReplicaSet != "" {
		as = append(as, Attr{AttrReplicaSetName, p.ReplicaSet})
	}
	for _, w := range [...]struct{ key, name string }{
		{AttrStatefulSetName, p.StatefulSet}, {AttrDaemonSetName, p.DaemonSet},
		{AttrJobName, p.Job}, {AttrCronJobName, p.CronJob},
	} {
		if w.name != "" {
			as = append(as, Attr{w.key, w.name})
		}
	}
	if r := p.Replaces; r != nil {
		as = append(as, Attr{AttrReplacesPod, r.Name}, Attr{AttrReplacesWhy, r.Why})
	}
	if p.Client != "" {
		as = append(as, Attr{AttrClient, p.Client})
	}
	if skew.kubelet > 0 {
		as = append(as, Attr{AttrKubeletAhead, skew.kubelet.Milliseconds()})
	}
	if skew.kubeletBehind > 0 {
		as = append(as, Attr{AttrKubeletBehind, skew.kubeletBehind.Milliseconds()})
	}
	if skew.scheduler > 0 {
		as = append(as, Attr{AttrSchedulerAhead, skew.scheduler.Milliseconds()})
	}
	if skew.controller > 0 {
		as = append(as, Attr{AttrControllerAhead, skew.controller.Milliseconds()})
	}
	return as
}

// lastContainer resolves a per-container boundary for every app container and returns the
// latest, or an unobserved point if any app container lacks it.
func (b *builder) lastContainer(get func(*Container) Times) point {
	var out point
	n := 0
	for i := range b.pod.Containers {
		c := &b.pod.Containers[i]
		if c.Init && !c.Sidecar {
			continue
		}
		n++
		pt := resolve(get(c))
		if !pt.observed {
			return point{}
		}
		out = later(out, pt)
	}
	if n == 0 {
		return point{}
	}
	return out
}

func (b *builder) controllers(parent int, persisted, created, scaled point) {
	p := b.pod
	switch p.Root {
	case RootDeployment:
		if !scaled.observed {
			scaled = derived(persisted.t)
		}
		b.add(spanHead{Name: SpanControllersDeployment, Path: SpanControllersDeployment, Service: ServiceController}, parent, persisted, scaled)
		b.add(spanHead{Name: SpanControllersReplicaSet, Path: SpanControllersReplicaSet, Service: ServiceController}, parent, scaled, created)
	case RootReplicaSet:
		i := b.add(spanHead{Name: SpanControllersReplicaSet, Path: SpanControllersReplicaSet, Service: ServiceController}, parent, persisted, created)
		b.causeAttrs(i)
	case RootCronJob:
		// The CronJob controller's delay: the schedule time → its Job created; then the job
		// controller's step, from the Job to the Pod.
		job := resolve(p.JobCreated)
		if !job.observed || job.t < persisted.t {
			job = point{t: persisted.t, src: job.src, observed: job.observed}
		}
		b.add(spanHead{Name: SpanControllersCronJob, Path: SpanControllersCronJob, Service: ServiceController}, parent, persisted, job)
		b.workloadStep(parent, SpanControllersJob, job, created)
	case RootStatefulSet:
		b.workloadStep(parent, SpanControllersStatefulSet, persisted, created)
	case RootDaemonSet:
		b.workloadStep(parent, SpanControllersDaemonSet, persisted, created)
	case RootJob:
		b.workloadStep(parent, SpanControllersJob, persisted, created)
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
			autoscaler, triggered = "cluster-autoscaler", true
		case "Nominated":
			autoscaler, triggered = "karpenter", true
		case "NotTriggerScaleUp":
			if autoscaler == "" {
				autoscaler = "cluster-autoscaler"
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
	end := derived(phase.end.t)
	var ready, created point
	if n := p.NewNode; n != nil {
		created, ready = resolve(n.Created), resolve(n.Ready)
		if ready.observed {
			end = ready
		}
	}
	service := ServiceScheduler
	if autoscaler != "" {
		service = autoscaler
	}
	i, drawn := b.draw(spanHead{Name: SpanSchedulingWaitingForNode, Path: SpanSchedulingWaitingForNode, Service: service}, parent, start, end)
	b.waited(WaitNode, drawn)
	sp := &b.trace.Spans[i]
	if n := p.NewNode; n != nil {
		sp.Attrs = append(sp.Attrs, Attr{AttrNodeName, n.Name})
		if created.observed {
			sp.Attrs = append(sp.Attrs, Attr{AttrNodeCreated, created.t.Time().UTC().Format(time.RFC3339Nano)})
		}
		if ready.observed {
			sp.Attrs = append(sp.Attrs, Attr{AttrNodeReady, ready.t.Time().UTC().Format(time.RFC3339Nano)})
		}
	}
	if autoscaler != "" {
		sp.Attrs = append(sp.Attrs, Attr{AttrAutoscaler, autoscaler})
	}
	for _, o := range p.Autoscaler {
		sp.AddEvent(occurrenceEvent(o.Reason, o))
	}
	sortEvents(sp.Events())
	return true
}

func occurrenceEvent(name string, o Occurrence) Event {
	as := make([]Attr, 1, 4) // the message, the reason, the count, the source
	as[0] = Attr{"message", o.Message}
	if o.Reason != "" && o.Reason != name {
		as = append(as, Attr{"reason", o.Reason})
	}
	if o.Count > 1 {
		as = append(as, Attr{"count", int64(o.Count)})
	}
	as = append(as, Attr{"readyspan.time.source", sourceValue(o.Time.Source)})
	return Event{Name: name, Time: o.Time.Time(), Attrs: as}
}

func sortEvents(es []Event) {
	slices.SortStableFunc(es, func(a, b Event) int { return a.Time.Compare(b.Time) })
}

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

// status adds the status reports within the status phase, which starts at start (as drawn).
func (b *builder) status(parent int, start, kubeletDone, ready point) {
	p := b.pod
	running := resolve(p.Running)
	if running.observed {
		b.add(spanHead{Name: SpanStatusRunning, Path: SpanStatusRunning, Service: ServiceKubelet}, parent, start, running)
	}
	if ready.observed {
		b.add(spanHead{Name: SpanStatusReady, Path: SpanStatusReady, Service: ServiceKubelet}, parent, later(kubeletDone, start), ready)
	}
	if p.HasService {
		if ep := resolve(p.EndpointsReady); ep.observed {
			b.add(spanHead{Name: SpanStatusEndpoints, Path: SpanStatusEndpoints, Service: ServiceController}, parent, later(ready, start), ep)
		}
	}
}

func failureMessage(p *Pod, outcome Outcome, phase string) string {
	switch outcome {
	case OutcomeStuck:
		if p.FailureReason != "" {
			return fmt.Sprintf("stuck in %s: %s", phase, p.FailureReason)
		}
		return "stuck in " + phase
	case OutcomeDeleted:
		if by := p.PreemptedBy; by != nil {
			who := by.UID
			if by.Name != "" {
				who = by.Namespace + "/" + by.Name
			}
			return "preempted by " + who + " before Ready, in " + phase
		}
		return "deleted before Ready, in " + phase
	}
	if p.FailureReason != "" {
		return p.FailureReason
	}
	return "failed in " + phase
}

// finish orders spans as a waterfall: the root, then depth-first, children by start time (ties
// in the order they were added, which is causal order), so output is byte-identical between
// runs. Spans are drawn depth first, so they are nearly always in that order already (all but
// one of the tests' traces) and stay where they were drawn; otherwise, or when the room they
// were drawn into is well beyond them, they are copied in order. The attributes are copied
// out of the scratch block into memory of their exact size: a trace waits in the exporter's
// queue and the UI's ring.
func (b *builder) finish() {
	spans := b.trace.Spans
	if !inWaterfallOrder(spans, b.parents) || cap(spans)-len(spans) > maxSpareSpans {
		var orderBuf, kidsBuf [64]int
		order := waterfall(spans, 0, orderBuf[:0], kidsBuf[:0])
		out := make([]Span, len(order))
		for k, i := range order {
			out[k] = spans[i]
		}
		spans = out
	}
	attrs := 0
	for k := range spans {
		attrs += len(spans[k].Attrs)
	}
	all := make([]Attr, 0, attrs)
	for k := range spans {
		at := len(all)
		all = append(all, spans[k].Attrs...)
		spans[k].Attrs = all[at:len(all):len(all)]
	}
	b.trace.Spans = spans
}

// inWaterfallOrder reports whether spans, drawn with the parents given (index of each span's
// parent, the root's -1), are in the order waterfall would put them: each span right after its
// parent or a finished subtree of its parent's (depth first), and after its earlier siblings in
// start order, except under the root. One pass, where waterfall looks for every span's children
// among all spans; the builder draws in this order, so waterfall is needed only when it did not.
func inWaterfallOrder(spans []Span, parents []int) bool {
	if len(spans) == 0 || len(parents) != len(spans) || parents[0] != -1 {
		return false
	}
	var openBuf [16]int
	open := append(openBuf[:0], 0) // the span drawn last and its ancestors: where a span may hang
	var lastKidBuf [64]int         // each span's child seen last, 0 for none (the root is no one's)
	lastKid := lastKidBuf[:0]
	if len(spans) > len(lastKidBuf) {
		lastKid = make([]int, 0, len(spans))
	}
	lastKid = lastKid[:len(spans)]
	for i := range lastKid {
		lastKid[i] = 0
	}
	for j := 1; j < len(spans); j++ {
		p := parents[j]
		for len(open) > 0 && open[len(open)-1] != p {
			open = open[:len(open)-1]
		}
		if len(open) == 0 {
			return false // its parent's subtree was closed: waterfall puts it earlier
		}
		if prev := lastKid[p]; prev != 0 && p != 0 && spans[j].Start.Before(spans[prev].Start) {
			return false
		}
		lastKid[p] = j
		open = append(open, j)
	}
	return true
}

// waterfall appends span i and then, depth-first, its descendants to order: the children of
// each span are the spans after the root whose parent is its ID, in the order added, sorted
// by start except under the root (phases stay in causal order whatever their lengths). kids is
// scratch space, shared down the walk.
func waterfall(spans []Span, i int, order, kids []int) []int {
	order = append(order, i)
	from := len(kids)
	for j := 1; j < len(spans); j++ {
		if spans[j].ParentSpanID == spans[i].SpanID {
			kids = append(kids, j)
		}
	}
	mine := kids[from:]
	if spans[i].Name != RootSpanName {
		slices.SortStableFunc(mine, func(a, c int) int { return spans[a].Start.Compare(spans[c].Start) })
	}
	for _, k := range mine {
		order = waterfall(spans, k, order, kids[:from+len(mine)])
	}
	return order
}

// latestObserved is the time of the last thing observed about the Pod.
func latestObserved(p *Pod) Instant {
	var last Instant
	see := func(t Instant) {
		if t > last {
			last = t
		}
	}
	times := func(ts ...Times) {
		for _, t := range ts {
			for _, s := range t {
				see(s.At)
			}
		}
	}
	occs := func(os ...[]Occurrence) {
		for _, list := range os {
			for _, o := range list {
				see(o.Time.At)
				see(InstantOf(o.Last))
			}
		}
	}
	times(p.AuditReceived, p.AuditPersisted, p.RootPersisted, p.ReplicaSetScaled, p.Created, p.Scheduled,
		p.KubeletStarted, p.SandboxReady, p.Initialized, p.ContainersReady, p.Running, p.Ready, p.EndpointsReady, p.Deleted)
	times(p.GatesRemoved, p.NominatedAt)
	if p.NewNode != nil {
		times(p.NewNode.Created, p.NewNode.Ready)
	}
	occs(p.SchedulingFailure, p.Preempted, p.PodWarnings, p.VolumeEvents, p.Autoscaler)
	for i := range p.Claims {
		times(p.Claims[i].Bound, p.Claims[i].SelectedNode)
	}
	for i := range p.Containers {
		c := &p.Containers[i]
		times(c.PullStarted, c.PullFinished, c.Created, c.Started, c.PostStartDone, c.StartupDone, c.ReadyAt, c.Finished)
		occs(c.PullFailures, c.Failures, c.Unhealthy)
	}
	return last
}
