package phases

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
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
	b := &builder{pod: p, trace: &Trace{TraceID: TraceIDFor(p.UID), Pod: in, Options: opts}, outcome: p.Outcome, spanIDs: spanIDSeedFor(p.UID)}
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
	received, scaled, scheduled, endpoints := resolve(p.AuditReceived), resolve(p.handoffReached()), resolve(p.Scheduled), resolve(p.EndpointsReady)
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
		if last := programmed(p.Programming, endpoints); last.observed {
			served = later(served, last) // serving once every node's kube-proxy sends it traffic
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
	p.TraceContext.Apply(&b.trace.Spans[rootIdx])
	if r := p.Replaces; r != nil && r.UID != "" {
		// The Pod this one replaces: its own trace, whose root span this one's follows from.
		b.trace.Spans[rootIdx].AddLink(podLink(PodRef{Namespace: p.Namespace, Name: r.Name, UID: r.UID}, "replaces"))
		if r.NodeTrace != "" {
			// The node taken away from under it, whose startup trace says when it came.
			b.trace.Spans[rootIdx].AddLink(Link{TraceID: TraceIDFor(r.NodeTrace), SpanID: SpanIDFor(r.NodeTrace, NodeRootSpanName),
				Attrs: []Attr{{AttrLinkRelation, LinkDisruptedNode}}})
		}
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
	if p.Root != RootBarePod && !p.scaledByChange() {
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
	as = appendSet(as,
		Attr{AttrSchedulerName, p.Scheduler},
		Attr{AttrKubeletVersion, p.NodeInfo.KubeletVersion},
		Attr{AttrRuntimeName, p.NodeInfo.RuntimeName},
		Attr{AttrRuntimeVersion, p.NodeInfo.RuntimeVersion},
		Attr{AttrNodePoolName, p.NodeInfo.Pool})
	for _, c := range p.Controllers {
		as = append(as, Attr{ControllerAttr(c.Kind), c.Name})
	}
	if r := p.Replaces; r != nil {
		as = append(as, Attr{AttrReplacesPod, r.Name}, Attr{AttrReplacesWhy, r.Why})
		if r.Disruption != "" {
			as = append(as, Attr{AttrReplacesDisruption, r.Disruption}, Attr{AttrReplacesDisruptedBy, r.DisruptedBy}, Attr{AttrReplacesNode, r.Node})
		}
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
			i := b.add(spanHead{Name: SpanStatusEndpoints, Path: SpanStatusEndpoints, Service: ServiceController}, parent, later(ready, start), ep)
			if p.Programming == nil {
				// No node reported its rules: the trace ends before traffic reaches the Pod, and
				// says so.
				b.trace.Spans[i].Attrs = append(b.trace.Spans[i].Attrs, Attr{AttrProgrammingObserved, false})
			}
			b.programming(parent, ep)
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
	times(p.AuditReceived, p.AuditPersisted, p.RootPersisted, p.Created, p.Scheduled,
		p.KubeletStarted, p.SandboxReady, p.Initialized, p.ContainersReady, p.Running, p.Ready, p.EndpointsReady, p.Deleted)
	times(p.GatesRemoved, p.NominatedAt)
	for i := range p.Controllers {
		times(p.Controllers[i].Reached)
	}
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

// appendSet appends the attributes whose string value is not empty (unknown).
func appendSet(as []Attr, set ...Attr) []Attr {
	for _, a := range set {
		if a.Value != "" {
			as = append(as, a)
		}
	}
	return as
}
