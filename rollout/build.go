package rollout

import (
	"fmt"
	"sort"
	"time"

	"github.com/readyspan/readyspan/phases"
)

// Span names.
const (
	RootSpanName      = "workload.rollout"
	StepSpanName      = "rollout.step"
	PodSpanName       = "rollout.pod"
	TerminateSpanName = "rollout.pod.terminate"
	// BlockedSpanName is a rejection of the controller's Pod creates, from its first
	// occurrence until a Pod was made again.
	BlockedSpanName = "rollout.blocked"
)

// The Pod trace's keys a rollout's trace uses under names of its own.
const (
	AttrPodOutcome   = phases.AttrOutcome
	AttrLinkRelation = phases.AttrLinkRelation
)

// nameAttr is the OpenTelemetry attribute naming a workload of each kind.
var nameAttr = map[string]string{
	Deployment:  phases.AttrDeploymentName,
	StatefulSet: phases.AttrStatefulSetName,
	DaemonSet:   phases.AttrDaemonSetName,
}

var uidAttr = map[string]string{
	Deployment:  AttrDeploymentUID,
	StatefulSet: AttrStatefulSetUID,
	DaemonSet:   AttrDaemonSetUID,
}

// Trace is one rollout's reconstruction: the root span first, then its descendants.
type Trace struct {
	TraceID phases.TraceID
	Rollout *Rollout
	Spans   []phases.Span
	Summary Summary
}

// Root returns the workload.rollout span.
func (t *Trace) Root() *phases.Span { return &t.Spans[0] }

// Summary holds the figures metrics and the terminal are made of.
type Summary struct {
	Kind         Kind
	WorkloadKind string
	Outcome      Outcome
	Duration     time.Duration
	Steps        int
	Waves        int // scale-up steps
	// Critical is the critical path's time per category, in Categories order.
	Critical [numCategories]time.Duration
	Sentence string
	// CriticalPods and CriticalSteps are the UIDs of the Pods and the indexes of the steps on
	// the critical path.
	CriticalPods  map[string]bool
	CriticalSteps map[int]bool
}

// Build turns an observed rollout into its trace. It does not modify r.
func Build(r *Rollout) *Trace {
	key := rolloutKey(r.Workload.UID, r.Generation, r.Attempt)
	t := &Trace{TraceID: r.TraceID(), Rollout: r}
	start, startOK := r.Start.Resolve()
	end, endOK := r.Complete.Resolve()
	items := timelineOf(r)
	if !startOK {
		start = phases.Stamp{At: phases.InstantOf(items.earliest()), Source: phases.SourceDerived}
	}
	if !endOK || end.Time().Before(start.Time()) {
		end = phases.Stamp{At: phases.InstantOf(items.latest(start.Time())), Source: phases.SourceDerived}
	}
	if start.Time().IsZero() {
		// Nothing observed the change nor anything after it: a zero-length trace at the end,
		// rather than one starting in year 1.
		start = phases.Stamp{At: phases.InstantOf(end.Time()), Source: phases.SourceDerived}
	}
	cp := criticalPath(items, start.Time(), end.Time())
	sum := Summary{
		Kind: r.Kind, WorkloadKind: r.Workload.Kind, Outcome: r.Outcome,
		Duration: end.Time().Sub(start.Time()), Steps: len(r.Steps),
		Critical: cp.byCategory, CriticalPods: cp.pods, CriticalSteps: cp.steps,
	}
	for _, s := range r.Steps {
		if s.Up {
			sum.Waves++
		}
	}
	sum.Sentence = sentence(r, &sum)
	t.Summary = sum

	var span spanMaker = func(name, path, service string, parent phases.SpanID, s, e time.Time) phases.Span {
		if e.Before(s) {
			e = s
		}
		return phases.Span{Name: name, Path: path, Service: service,
			SpanID: phases.SpanIDFor(key, path), ParentSpanID: parent, Start: s, End: e}
	}
	root := span(RootSpanName, RootSpanName, phases.ServiceReadyspan, phases.SpanID{}, start.Time(), end.Time())
	root.Attrs = rootAttrs(r, &sum, start, end)
	switch r.Outcome {
	case OutcomeComplete:
		root.Status = phases.StatusOK
	case OutcomeFailed, OutcomeBlocked:
		root.Status, root.StatusMessage = phases.StatusError, r.Reason
	}
	r.TraceContext.Apply(&root)
	if r.Resumes != (phases.TraceID{}) {
		root.AddLink(phases.Link{TraceID: r.Resumes, SpanID: phases.SpanIDFor(rolloutKey(r.Workload.UID, r.Generation, 0), RootSpanName),
			Attrs: []phases.Attr{{Key: AttrLinkRelation, Value: "resumes_blocked"}}})
	}
	if r.Outcome == OutcomeSuperseded && r.SupersededBy != (phases.TraceID{}) {
		root.AddLink(phases.Link{TraceID: r.SupersededBy,
			Attrs: []phases.Attr{{Key: AttrLinkRelation, Value: "superseded_by"}}})
	}
	t.Spans = append(t.Spans, root)

	stepSpan := stepSpans(t, items, cp, span, root.SpanID)
	rejectionSpans(t, span, root.SpanID, stepSpan, end.Time())
	parentOf := func(step int) phases.SpanID {
		if step >= 0 {
			return stepSpan[step]
		}
		return root.SpanID
	}
	for _, it := range items.list {
		switch {
		case it.newPod != nil:
			t.Spans = podSpans(t.Spans, key, parentOf(it.step), it, cp.pods[it.uid])
		case it.oldPod != nil:
			term := terminateSpan(it, parentOf(it.step), cp.pods[it.oldPod.UID], span)
			t.Spans = append(t.Spans, term)
			if rot, ok := rotationSpan(it.oldPod, term.SpanID, cp.pods[it.oldPod.UID], span); ok {
				t.Spans = append(t.Spans, rot)
			}
		}
	}
	sort.SliceStable(t.Spans[1:], func(i, j int) bool { return t.Spans[1+i].Start.Before(t.Spans[1+j].Start) })
	return t
}

// spanMaker makes one span of the rollout's trace, its ID from its path.
type spanMaker func(name, path, service string, parent phases.SpanID, s, e time.Time) phases.Span

// stepSpans appends a span per step, from the step to its effect (the last end of the Pods it
// caused), and returns their IDs by step.
func stepSpans(t *Trace, items *timeline, cp critical, span spanMaker, rootID phases.SpanID) []phases.SpanID {
	r := t.Rollout
	stepSpan := make([]phases.SpanID, len(r.Steps))
	effects := make([]time.Time, len(r.Steps)) // the last end of the Pods each step caused
	for _, it := range items.list {
		if it.step >= 0 && it.step < len(effects) && it.end.After(effects[it.step]) {
			effects[it.step] = it.end
		}
	}
	for i := range r.Steps {
		s := &r.Steps[i]
		at, _ := s.Time.Resolve()
		effect := at.Time()
		if effects[i].After(effect) {
			effect = effects[i]
		}
		sp := span(StepSpanName, fmt.Sprintf("step/%d", i), phases.ServiceController, rootID, at.Time(), effect)
		dir := "down"
		if s.Up {
			dir = "up"
		}
		sp.Attrs = []phases.Attr{
			{Key: AttrStepDirection, Value: dir}, {Key: AttrStepTarget, Value: s.Target},
			{Key: AttrStepFrom, Value: int64(s.From)}, {Key: AttrStepTo, Value: int64(s.To)},
			{Key: AttrStepMessage, Value: s.Message}, {Key: AttrCritical, Value: cp.steps[i]},
			{Key: phases.AttrSourceStart, Value: at.Source.String()},
			{Key: phases.AttrPrecisionStart, Value: phases.PrecisionText(at.Source)},
		}
		stepSpan[i] = sp.SpanID
		t.Spans = append(t.Spans, sp)
	}
	return stepSpan
}

// terminateSpan is an old Pod's span: deletion requested → gone.
func terminateSpan(it *item, parent phases.SpanID, critical bool, span spanMaker) phases.Span {
	o := it.oldPod
	sp := span(TerminateSpanName, "terminate/"+o.UID, phases.ServiceKubelet, parent, it.start, it.end)
	sp.Attrs = []phases.Attr{
		{Key: phases.AttrPodName, Value: o.Name}, {Key: phases.AttrPodUID, Value: o.UID},
		{Key: AttrGracePeriod, Value: o.GracePeriod}, {Key: AttrPreStop, Value: o.PreStop},
		{Key: AttrKilled, Value: o.Killed}, {Key: AttrCritical, Value: critical},
	}
	if !it.endKnown {
		sp.Attrs = append(sp.Attrs, phases.Attr{Key: phases.AttrObserved, Value: false})
	}
	if o.Killed {
		sp.Status = phases.StatusError
		sp.StatusMessage = fmt.Sprintf("killed after the grace period of %d s", o.GracePeriod)
	}
	return sp
}

// podSpans appends to dst a new Pod, created → available, with the six phase spans of its own
// trace under it and a link to that trace.
func podSpans(dst []phases.Span, key string, parent phases.SpanID, it *item, critical bool) []phases.Span {
	p := it.newPod
	path := "pod/" + p.UID
	sp := phases.Span{Name: PodSpanName, Path: path, Service: phases.ServiceReadyspan,
		SpanID: phases.SpanIDFor(key, path), ParentSpanID: parent, Start: it.start, End: it.end}
	sp.Attrs = []phases.Attr{
		{Key: phases.AttrPodName, Value: p.Name}, {Key: phases.AttrPodUID, Value: p.UID},
		{Key: AttrCritical, Value: critical},
	}
	if p.Node != "" {
		sp.Attrs = append(sp.Attrs, phases.Attr{Key: phases.AttrNodeName, Value: p.Node})
	}
	if !it.endKnown {
		sp.Attrs = append(sp.Attrs, phases.Attr{Key: phases.AttrObserved, Value: false})
	}
	sp.AddLink(phases.Link{TraceID: phases.TraceIDFor(p.UID), SpanID: phases.SpanIDFor(p.UID, phases.RootSpanName),
		Attrs: []phases.Attr{{Key: AttrLinkRelation, Value: "pod_trace"}}})
	if p.Trace == nil {
		return append(dst, sp)
	}
	sp.Attrs = append(sp.Attrs, phases.Attr{Key: AttrPodOutcome, Value: string(p.Trace.Summary.Outcome)})
	if why := p.Trace.Summary.FailureReason; why != "" {
		// A failing Pod is an error in the rollout too, named where the row is drawn.
		sp.Attrs = append(sp.Attrs, phases.Attr{Key: phases.AttrFailureReason, Value: why})
		sp.Status, sp.StatusMessage = phases.StatusError, why
	}
	dst = append(dst, sp)
	for _, name := range phases.Phases {
		ph := p.Trace.Phase(name)
		if ph == nil {
			continue
		}
		c := *ph
		c.ParentSpanID = sp.SpanID
		c.Path = path + "/" + name
		c.SpanID = phases.SpanIDFor(key, c.Path)
		c.DropNotes()
		c.Attrs = append([]phases.Attr(nil), ph.Attrs...)
		dst = append(dst, c)
	}
	return dst
}

func rootAttrs(r *Rollout, sum *Summary, start, end phases.Stamp) []phases.Attr {
	w := r.Workload
	as := []phases.Attr{
		{Key: nameAttr[w.Kind], Value: w.Name}, {Key: uidAttr[w.Kind], Value: w.UID},
		{Key: phases.AttrNamespace, Value: w.Namespace},
		{Key: AttrWorkloadKind, Value: w.Kind},
		{Key: AttrKind, Value: string(r.Kind)}, {Key: AttrOutcome, Value: string(r.Outcome)},
		{Key: AttrGeneration, Value: r.Generation}, {Key: AttrRevision, Value: r.Revision},
		{Key: AttrReplicas, Value: int64(r.Replicas)},
		{Key: AttrStrategy, Value: r.Strategy.Type},
		{Key: AttrMinReady, Value: int64(r.Strategy.MinReadySeconds)},
		{Key: AttrSteps, Value: int64(sum.Steps)}, {Key: AttrWaves, Value: int64(sum.Waves)},
		{Key: AttrSummary, Value: sum.Sentence},
		{Key: phases.AttrSourceStart, Value: start.Source.String()},
		{Key: phases.AttrPrecisionStart, Value: phases.PrecisionText(start.Source)},
		{Key: phases.AttrSourceEnd, Value: end.Source.String()},
		{Key: phases.AttrPrecisionEnd, Value: phases.PrecisionText(end.Source)},
	}
	if r.Strategy.MaxSurge != "" {
		as = append(as, phases.Attr{Key: AttrMaxSurge, Value: r.Strategy.MaxSurge})
	}
	if r.Strategy.MaxUnavailable != "" {
		as = append(as, phases.Attr{Key: AttrMaxUnavailable, Value: r.Strategy.MaxUnavailable})
	}
	if r.Strategy.ProgressDeadlineSeconds > 0 {
		as = append(as, phases.Attr{Key: AttrDeadline, Value: int64(r.Strategy.ProgressDeadlineSeconds)})
	}
	if r.Strategy.Partition >= 0 && w.Kind == StatefulSet {
		as = append(as, phases.Attr{Key: AttrPartition, Value: int64(r.Strategy.Partition)})
	}
	if r.Strategy.PodManagementPolicy != "" {
		as = append(as, phases.Attr{Key: AttrPodManagement, Value: r.Strategy.PodManagementPolicy})
	}
	if r.Reason != "" {
		as = append(as, phases.Attr{Key: AttrReason, Value: r.Reason})
	}
	if len(r.Rejections) > 0 {
		var n int64
		for _, j := range r.Rejections {
			n += int64(j.Count)
		}
		as = append(as, phases.Attr{Key: AttrRejectionCount, Value: n})
		if j := r.Blocked(); j != nil {
			as = append(as, phases.Attr{Key: AttrRejectionClass, Value: string(j.Class)})
		} else {
			as = append(as, phases.Attr{Key: AttrRejectionClass, Value: string(r.Rejections[len(r.Rejections)-1].Class)})
		}
	}
	for i, c := range Categories {
		as = append(as, phases.Attr{Key: AttrCriticalPrefix + c.Name + "_ms", Value: sum.Critical[i].Milliseconds()})
	}
	return as
}
