package web

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
)

// PodSummary is one line of the Pod list.
type PodSummary struct {
	UID        string  `json:"uid"`
	TraceID    string  `json:"traceId"`
	Namespace  string  `json:"namespace"`
	Name       string  `json:"name"`
	Node       string  `json:"node,omitempty"`
	Workload   string  `json:"workload,omitempty"` // the Deployment, else the ReplicaSet
	Outcome    string  `json:"outcome"`
	Start      string  `json:"start"` // RFC 3339, UTC
	DurationMs float64 `json:"durationMs"`
	// DurText is the length when its ends are whole-second stamps ("10 s ±1 s", see
	// phases.CoarseLength); empty when it is precise and the page prints DurationMs.
	DurText string `json:"durText,omitempty"`
	Error   string `json:"error,omitempty"`
	Rollout string `json:"rollout,omitempty"` // ID of the rollout that started it (RolloutSummary.ID)
}

// PodView is a Pod's waterfall: every span of its trace, in the trace's order.
type PodView struct {
	PodSummary
	Spans []SpanView `json:"spans"`
}

// SpanView is one row of a waterfall. Times are milliseconds from the trace's start.
type SpanView struct {
	Name    string `json:"name"`
	Label   string `json:"label"` // the name, plus the container's name on container spans
	Service string `json:"service"`
	Depth   int    `json:"depth"`
	Phase   string `json:"phase,omitempty"` // the phase the span belongs to
	// Cat is the kind of time the span stands for, its colour: its catalogue category
	// (phases.CategoryOf) where it has one, else its phase ("root" for the root).
	Cat     string  `json:"cat"`
	StartMs float64 `json:"startMs"`
	DurMs   float64 `json:"durMs"`
	DurText string  `json:"durText,omitempty"` // as PodSummary.DurText
	// Parts split the span's bar where it stands for two kinds of time: an image pull's wait in
	// the kubelet's queue (CatQueued) before its transfer.
	Parts   []Segment `json:"parts,omitempty"`
	Error   bool      `json:"error,omitempty"`
	Message string    `json:"message,omitempty"`
	// Where the span's start and end came from and how precise they are.
	SourceStart    string         `json:"sourceStart,omitempty"`
	SourceEnd      string         `json:"sourceEnd,omitempty"`
	PrecisionStart string         `json:"precisionStart,omitempty"`
	PrecisionEnd   string         `json:"precisionEnd,omitempty"`
	NotObserved    bool           `json:"notObserved,omitempty"`
	Attrs          map[string]any `json:"attrs,omitempty"`
	Events         []EventView    `json:"events,omitempty"`
	// NodeTrace is the trace ID of the node startup the span links to (a Pod's wait for a new
	// node, phases.LinkNodeStartup); NodeHeld says the UI holds it, so the page can open it.
	NodeTrace string `json:"nodeTrace,omitempty"`
	NodeHeld  bool   `json:"nodeHeld,omitempty"`
}

// EventView is a span event (a FailedScheduling attempt, a failed probe).
type EventView struct {
	Name  string         `json:"name"`
	AtMs  float64        `json:"atMs"`
	Attrs map[string]any `json:"attrs,omitempty"`
}

// RolloutSummary is one line of the rollout list.
type RolloutSummary struct {
	// ID is the rollout's root span ID: its trace ID alone does not name it, since the
	// rollouts a CI job's context was written for are all in that job's trace.
	ID           string  `json:"id"`
	TraceID      string  `json:"traceId"`
	Namespace    string  `json:"namespace"`
	Workload     string  `json:"workload"`
	WorkloadKind string  `json:"workloadKind"`
	Kind         string  `json:"kind"`
	Outcome      string  `json:"outcome"`
	Reason       string  `json:"reason,omitempty"`
	Start        string  `json:"start"`
	DurationMs   float64 `json:"durationMs"`
	DurText      string  `json:"durText,omitempty"` // as PodSummary.DurText
	Sentence     string  `json:"sentence"`
	NewPods      int     `json:"newPods"`
	OldPods      int     `json:"oldPods"`
	Steps        int     `json:"steps"`
	Waves        int     `json:"waves"`
}

// RolloutView is a rollout's Gantt chart: its steps and one row per Pod, new and old, in the
// order the terminal Gantt prints them (each step, then the Pods it created or removed).
type RolloutView struct {
	RolloutSummary
	Generation int64          `json:"generation"`
	Revision   string         `json:"revision,omitempty"`
	Strategy   string         `json:"strategy,omitempty"`
	Critical   []CriticalView `json:"critical"`
	Rows       []RowView      `json:"rows"`
}

// CriticalView is the critical path's time in one category.
type CriticalView struct {
	Name  string  `json:"name"`
	Words string  `json:"words"`
	Ms    float64 `json:"ms"`
	// Text is Ms with the precision of the rollout's own length ("37 s" when that is stated
	// to the second); empty when it is precise and the page prints Ms.
	Text string `json:"text,omitempty"`
	// Pct is the share of the critical path, rounded as the rollout's sentence rounds it.
	Pct int `json:"pct"`
}

// RowView is one row of a rollout's Gantt: a step, a new Pod or an old one.
type RowView struct {
	Type     string  `json:"type"` // step, pod, old, blocked (a rejection of the controller's Pod creates)
	Label    string  `json:"label"`
	UID      string  `json:"uid,omitempty"`
	Node     string  `json:"node,omitempty"`
	Step     int     `json:"step"` // the step's index (step rows: its own), -1 for none
	StartMs  float64 `json:"startMs"`
	EndMs    float64 `json:"endMs"`
	DurText  string  `json:"durText,omitempty"` // as PodSummary.DurText
	Critical bool    `json:"critical,omitempty"`
	Outcome  string  `json:"outcome,omitempty"`
	// EndUnknown: the end was not observed (a Pod not yet available, an old Pod not yet gone).
	EndUnknown bool `json:"endUnknown,omitempty"`
	Killed     bool `json:"killed,omitempty"`
	// Error: the row's span has an error status, and Message says why (a failing Pod's
	// reason, a killed Pod's grace period): the page writes it on the row.
	Error   bool   `json:"error,omitempty"`
	Message string `json:"message,omitempty"`
	// Segments colour the row by what the Pod was doing.
	Segments []Segment `json:"segments,omitempty"`
}

// Segment is a stretch of a row in one category (see Categories).
type Segment struct {
	Cat     string  `json:"cat"`
	StartMs float64 `json:"startMs"`
	EndMs   float64 `json:"endMs"`
}

// ms is a duration in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// durText is a span's length as the page prints it when its ends are whole-second stamps
// ("10 s ±1 s", the terminal's rule); empty when it is precise.
func durText(s *phases.Span) string {
	t, _ := phases.CoarseLength(s.Duration(), phases.LengthUncertainty(s), " ")
	return t
}

// podView turns a Pod's trace into its waterfall.
func podView(t *phases.Trace) *PodView {
	return &PodView{PodSummary: podSummary(t), Spans: spanRows(t.Spans)}
}

// podSummary is the list line of a Pod's trace.
func podSummary(t *phases.Trace) PodSummary {
	root := t.Root()
	p := t.Pod
	v := PodSummary{
		UID: p.UID, TraceID: t.TraceID.String(), Namespace: p.Namespace, Name: p.Name, Node: p.Node,
		Outcome: string(t.Summary.Outcome),
		Start:   rfc3339(root.Start), DurationMs: ms(root.Duration()), DurText: durText(root),
	}
	if len(p.Controllers) > 0 {
		v.Workload = p.Controllers[0].Name // the one its user changes
	}
	if root.Status == phases.StatusError {
		v.Error = root.StatusMessage
	} else if why, ok := root.Attr(phases.AttrFailureReason).(string); ok {
		v.Error = why // not Ready yet, and failing: the list names why without a click
	}
	for _, l := range root.Links() {
		for _, a := range l.Attrs {
			if a.Key == rollout.AttrLinkRelation && a.Value == "rollout" {
				v.Rollout = l.SpanID.String() // the rollout's ID: its root span's
			}
		}
	}
	return v
}

// spanRows are the waterfall's rows of a Pod trace's spans, the root first.
func spanRows(spans []phases.Span) []SpanView {
	root := &spans[0]
	// Rows in tree order, as the terminal lists them: each span beneath its parent, whose
	// phase it shares, even where it starts before its parent (a component's span from a clock
	// that is behind), which start order would list at the top as a phase of its own.
	phaseOf := map[phases.SpanID]string{}
	type placed struct{ row, index int } // a span's row in rows, its index in spans
	at := map[phases.SpanID]placed{}
	rows := make([]SpanView, 0, len(spans))
	for _, r := range phases.TreeOrder(spans) {
		s := &spans[r.Index]
		sv := spanView(s, root.Start)
		sv.Cat, sv.Depth = "root", r.Depth
		if r.Index > 0 {
			sv.Phase = phaseOf[s.ParentSpanID]
			if sv.Depth == 1 {
				sv.Phase = s.Name
			}
			sv.Cat = sv.Phase
		}
		if c := phases.CategoryOf(s.Name); c != phases.CategoryNone {
			sv.Cat = string(c)
		}
		if s.Name == phases.SpanImagePullTransfer {
			if p, ok := at[s.ParentSpanID]; ok && rows[p.row].Name == phases.SpanImagePull {
				rows[p.row].Parts = pullParts(&spans[p.index], s, root.Start)
			}
		}
		phaseOf[s.SpanID], at[s.SpanID] = sv.Phase, placed{len(rows), r.Index}
		rows = append(rows, sv)
	}
	return rows
}

// pullParts splits an image pull's bar (Pulling → Pulled, the kubelet's queue included) at its
// transfer's start: before it the pull waited in the queue, from it on the image was moving.
func pullParts(pull, transfer *phases.Span, t0 time.Time) []Segment {
	from := transfer.Start
	if !from.After(pull.Start) || !from.Before(pull.End) {
		return nil
	}
	return []Segment{
		{Cat: CatQueued, StartMs: ms(pull.Start.Sub(t0)), EndMs: ms(from.Sub(t0))},
		{Cat: CatImagePull, StartMs: ms(from.Sub(t0)), EndMs: ms(pull.End.Sub(t0))},
	}
}

// spanAttrsShown are the attributes a span row states in its own fields; the rest go to Attrs.
var spanAttrsShown = map[string]bool{
	phases.AttrSourceStart: true, phases.AttrSourceEnd: true,
	phases.AttrPrecisionStart: true, phases.AttrPrecisionEnd: true,
}

func spanView(s *phases.Span, t0 time.Time) SpanView {
	sv := SpanView{Name: s.Name, Label: s.Name, Service: s.Service,
		StartMs: ms(s.Start.Sub(t0)), DurMs: ms(s.Duration()), DurText: durText(s),
		Error: s.Status == phases.StatusError, Message: s.StatusMessage}
	if c, ok := s.Attr(phases.AttrContainerName).(string); ok && phases.IsContainerSpan(s.Name) {
		sv.Label += " " + c
	}
	sv.SourceStart, _ = s.Attr(phases.AttrSourceStart).(string)
	sv.SourceEnd, _ = s.Attr(phases.AttrSourceEnd).(string)
	sv.PrecisionStart, _ = s.Attr(phases.AttrPrecisionStart).(string)
	sv.PrecisionEnd, _ = s.Attr(phases.AttrPrecisionEnd).(string)
	if o, ok := s.Attr(phases.AttrObserved).(bool); ok && !o {
		sv.NotObserved = true
	}
	for _, a := range s.AllAttrs() {
		if spanAttrsShown[a.Key] {
			continue
		}
		if sv.Attrs == nil {
			sv.Attrs = map[string]any{}
		}
		sv.Attrs[a.Key] = jsonValue(a.Value)
		if n, ok := a.Value.(int64); ok && a.Key == phases.AttrImageSize {
			sv.Attrs[a.Key] = megabytes(n)
		}
	}
	for _, l := range s.Links() {
		if linkRelation(l) == phases.LinkNodeStartup {
			sv.NodeTrace = l.TraceID.String()
		}
	}
	for _, e := range s.Events() {
		ev := EventView{Name: e.Name, AtMs: ms(e.Time.Sub(t0))}
		for _, a := range e.Attrs {
			if ev.Attrs == nil {
				ev.Attrs = map[string]any{}
			}
			ev.Attrs[a.Key] = jsonValue(a.Value)
		}
		sv.Events = append(sv.Events, ev)
	}
	return sv
}

// rolloutSummary is the list line of a rollout.
func rolloutSummary(t *rollout.Trace) RolloutSummary {
	root := t.Root()
	r := t.Rollout
	return RolloutSummary{
		ID: root.SpanID.String(), TraceID: t.TraceID.String(), Namespace: r.Workload.Namespace, Workload: r.Workload.Name,
		WorkloadKind: r.Workload.Kind, Kind: string(t.Summary.Kind), Outcome: string(t.Summary.Outcome),
		Reason: r.Reason, Start: rfc3339(root.Start), DurationMs: ms(root.Duration()), DurText: durText(root),
		Sentence: t.Summary.Sentence, NewPods: len(r.NewPods), OldPods: len(r.OldPods),
		Steps: t.Summary.Steps, Waves: t.Summary.Waves,
	}
}

// rolloutView turns a rollout's trace into its Gantt chart.
func rolloutView(t *rollout.Trace) *RolloutView {
	root := t.Root()
	r := t.Rollout
	v := &RolloutView{RolloutSummary: rolloutSummary(t), Generation: r.Generation, Revision: r.Revision,
		Strategy: r.Strategy.Type}
	v.Critical = criticalViews(t)
	children := map[phases.SpanID][]*phases.Span{}
	for i := 1; i < len(t.Spans); i++ {
		s := &t.Spans[i]
		children[s.ParentSpanID] = append(children[s.ParentSpanID], s)
	}
	newPods := make(map[string]*rollout.NewPod, len(r.NewPods))
	for i := range r.NewPods {
		newPods[r.NewPods[i].UID] = &r.NewPods[i]
	}
	at := func(x time.Time) float64 { return ms(x.Sub(root.Start)) }
	pods := func(parent *phases.Span, step int) {
		for _, c := range children[parent.SpanID] {
			row := RowView{UID: attrString(c, phases.AttrPodUID), Label: attrString(c, phases.AttrPodName),
				Step: step, StartMs: at(c.Start), EndMs: at(c.End), DurText: durText(c), Critical: attrBool(c, rollout.AttrCritical),
				Node: attrString(c, phases.AttrNodeName), Error: c.Status == phases.StatusError, Message: c.StatusMessage}
			if o, ok := c.Attr(phases.AttrObserved).(bool); ok && !o {
				row.EndUnknown = true
			}
			switch c.Name {
			case rollout.PodSpanName:
				row.Type = "pod"
				row.Outcome = attrString(c, rollout.AttrPodOutcome)
				row.Segments = rowSegments(rollout.PodSegments(c, newPods[row.UID]), root.Start)
			case rollout.TerminateSpanName:
				row.Type = "old"
				row.Killed = attrBool(c, rollout.AttrKilled)
				row.Segments = rowSegments(rollout.PodSegments(c, nil), root.Start)
			case rollout.BlockedSpanName:
				n, _ := c.Attr(rollout.AttrRejectionCount).(int64)
				row.Type = "blocked"
				row.Label = attrString(c, rollout.AttrRejectionClass) + " ×" + strconv.FormatInt(n, 10)
				row.Message = attrString(c, rollout.AttrRejectionClass) + ": " + attrString(c, rollout.AttrRejectionMessage)
				row.Segments = []Segment{{Cat: "blocked", StartMs: row.StartMs, EndMs: row.EndMs}}
			default:
				continue
			}
			v.Rows = append(v.Rows, row)
		}
	}
	step := 0
	for _, s := range children[root.SpanID] {
		if s.Name != rollout.StepSpanName {
			continue
		}
		v.Rows = append(v.Rows, stepRow(s, step, at))
		pods(s, step)
		step++
	}
	pods(root, -1) // Pods no step is known to have caused
	return v
}

// criticalViews are the rollout's critical path by category, with each one's share as the
// sentence rounds it.
func criticalViews(t *rollout.Trace) []CriticalView {
	var total time.Duration
	for _, d := range t.Summary.Critical {
		total += d
	}
	dec, coarse := phases.LengthDecimals(phases.LengthUncertainty(t.Root()))
	var out []CriticalView
	for i, c := range rollout.Categories {
		d := t.Summary.Critical[i]
		cv := CriticalView{Name: c.Name, Words: c.Words, Ms: ms(d)}
		if total > 0 {
			cv.Pct = int((d*100 + total/2) / total) // as the sentence rounds
		}
		if coarse {
			cv.Text = roundedSeconds(d, dec)
		}
		out = append(out, cv)
	}
	return out
}

// stepRow is the row of a scaling step: its direction, target and counts ("↑ web-7d4b9 1→2").
func stepRow(s *phases.Span, step int, at func(time.Time) float64) RowView {
	row := RowView{Type: "step", Label: attrString(s, rollout.AttrStepTarget), Step: step,
		StartMs: at(s.Start), EndMs: at(s.End), DurText: durText(s), Critical: attrBool(s, rollout.AttrCritical),
		Message: attrString(s, rollout.AttrStepMessage)}
	dir := "↑ "
	if attrString(s, rollout.AttrStepDirection) == "down" {
		dir = "↓ "
	}
	row.Label = dir + row.Label
	if from, _ := s.Attr(rollout.AttrStepFrom).(int64); from >= 0 {
		to, _ := s.Attr(rollout.AttrStepTo).(int64)
		row.Label += " " + strconv.FormatInt(from, 10) + "→" + strconv.FormatInt(to, 10)
	}
	return row
}

// jsonValue is an attribute's value as JSON holds it: a float that is not finite (a component's
// span may carry one) as its name, "NaN" or "+Inf", since JSON has no number for it and one such
// value would fail the whole view.
func jsonValue(v any) any {
	if f, ok := v.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	return v
}

func attrString(s *phases.Span, key string) string {
	v, _ := s.Attr(key).(string)
	return v
}

func attrBool(s *phases.Span, key string) bool {
	v, _ := s.Attr(key).(bool)
	return v
}

// megabytes is a size in bytes as people read it: "34.7 MB" (decimal units, as registries and
// the kubelet's Pulled message count them).
func megabytes(n int64) string {
	switch {
	case n >= 1e9:
		return strconv.FormatFloat(float64(n)/1e9, 'f', 2, 64) + " GB"
	case n >= 1e5:
		return strconv.FormatFloat(float64(n)/1e6, 'f', 1, 64) + " MB"
	}
	return strconv.FormatFloat(float64(n)/1e3, 'f', 1, 64) + " kB"
}

// roundedSeconds is d in seconds to dec decimals, "<1 s" (or "<0.1 s") for a time too short to
// show at all at that precision.
func roundedSeconds(d time.Duration, dec int) string {
	t := strconv.FormatFloat(d.Seconds(), 'f', dec, 64)
	if d > 0 && strings.Trim(t, "0.") == "" {
		return "<" + strconv.FormatFloat(math.Pow10(-dec), 'f', dec, 64) + " s"
	}
	return t + " s"
}
