package remote

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/web"
	"github.com/readyspan/readyspan/web/apiclient"
)

// Bounds of one rebuilt trace: a real Pod trace has a few dozen spans (a hundred with every
// component's joined), a span a dozen attributes.
const (
	maxSpans = 4096
	maxAttrs = 256
	// maxName bounds the names a trace carries (a Pod's is at most 253 bytes in Kubernetes).
	maxName = 1024
)

var podOutcomes = map[string]phases.Outcome{}
var rolloutOutcomes = map[string]rollout.Outcome{}

func init() {
	for _, o := range []phases.Outcome{phases.OutcomeReady, phases.OutcomeFailed, phases.OutcomeStuck,
		phases.OutcomeDeleted, phases.OutcomeCompleted, phases.OutcomeInProgress} {
		podOutcomes[string(o)] = o
	}
	for _, o := range []rollout.Outcome{rollout.OutcomeComplete, rollout.OutcomeFailed, rollout.OutcomeSuperseded,
		rollout.OutcomePaused, rollout.OutcomeBlocked, rollout.OutcomeInProgress} {
		rolloutOutcomes[string(o)] = o
	}
}

// podTrace rebuilds a Pod's trace from its waterfall: its spans in tree order (each parent the
// nearest row above one level up), their times from the trace's start, attributes, status,
// events and where each bound came from. What the gate judges (a span's length by name, whether
// both its ends were observed, the outcome and the failure's reason) comes through whole; span
// IDs are the rebuilt trace's own.
func podTrace(v *web.PodView) (*phases.Trace, error) {
	id, err := traceID(v.TraceID)
	if err != nil {
		return nil, err
	}
	outcome, ok := podOutcomes[v.Outcome]
	if !ok {
		return nil, fmt.Errorf("unknown outcome %q", apiclient.Cut(v.Outcome))
	}
	t0, err := time.Parse(time.RFC3339Nano, v.Start)
	if err != nil {
		return nil, fmt.Errorf("start %q: %w", apiclient.Cut(v.Start), err)
	}
	if err := apiclient.CheckID(v.UID); err != nil {
		return nil, err
	}
	if err := names(v.Namespace, v.Name, v.Node); err != nil {
		return nil, err
	}
	switch {
	case len(v.Spans) == 0 || v.Spans[0].Name != phases.RootSpanName || v.Spans[0].Depth != 0:
		return nil, fmt.Errorf("its spans do not start with its %s root", phases.RootSpanName)
	case len(v.Spans) > maxSpans:
		return nil, fmt.Errorf("more than %d spans", maxSpans)
	}
	t := &phases.Trace{TraceID: id, Pod: &phases.Pod{UID: v.UID, Namespace: v.Namespace, Name: v.Name, Node: v.Node}}
	var parents []phases.SpanID // parents[d] is the last span at depth d
	for i := range v.Spans {
		sv := &v.Spans[i]
		if i > 0 && (sv.Depth < 1 || sv.Depth > len(parents)) {
			return nil, fmt.Errorf("span %d (%q) at depth %d under none", i+1, apiclient.Cut(sv.Name), sv.Depth)
		}
		s, err := podSpan(sv, t0)
		if err != nil {
			return nil, fmt.Errorf("span %d (%q): %w", i+1, apiclient.Cut(sv.Name), err)
		}
		s.SpanID = phases.SpanIDFor(v.UID, strconv.Itoa(i))
		if i > 0 {
			s.ParentSpanID = parents[sv.Depth-1]
		}
		parents = append(parents[:sv.Depth], s.SpanID)
		t.Spans = append(t.Spans, s)
	}
	t.Summary.Outcome = outcome
	t.Summary.FailureReason, _ = t.Spans[0].Attr(phases.AttrFailureReason).(string)
	return t, nil
}

// podSpan is one waterfall row as a span.
func podSpan(sv *web.SpanView, t0 time.Time) (phases.Span, error) {
	start, err := offset(sv.StartMs)
	if err != nil {
		return phases.Span{}, err
	}
	d, err := offset(sv.DurMs)
	if err != nil {
		return phases.Span{}, err
	}
	if len(sv.Name) > maxName || len(sv.Service) > maxName {
		return phases.Span{}, errors.New("a name too long")
	}
	s := phases.Span{Name: sv.Name, Path: sv.Label, Service: sv.Service, Start: t0.Add(start), StatusMessage: sv.Message}
	s.End = s.Start.Add(d)
	if sv.Error {
		s.Status = phases.StatusError
	}
	if s.Attrs, err = attrs(sv.Attrs); err != nil {
		return phases.Span{}, err
	}
	// A span drawn from observations names its bounds' sources; one that does not (a
	// component's own) is measured by its sender, as gate reads a trace it built itself.
	if sv.SourceStart != "" || sv.SourceEnd != "" {
		s.StartBound = phases.Bound{Source: sourceNamed(sv.SourceStart), Observed: !sv.NotObserved}
		s.EndBound = phases.Bound{Source: sourceNamed(sv.SourceEnd), Observed: !sv.NotObserved}
	}
	if len(sv.Events) > maxAttrs {
		return phases.Span{}, fmt.Errorf("more than %d events", maxAttrs)
	}
	for _, e := range sv.Events {
		at, err := offset(e.AtMs)
		if err != nil {
			return phases.Span{}, err
		}
		as, err := attrs(e.Attrs)
		if err != nil {
			return phases.Span{}, err
		}
		s.AddEvent(phases.Event{Name: e.Name, Time: t0.Add(at), Attrs: as})
	}
	return s, nil
}

// rolloutTrace rebuilds what the gate judges of a rollout from its view and rotation spans: its
// workload, outcome and length, its new Pods (by UID) and old ones, and one
// rollout.pod.rotation span per old Pod the nodes reported on. The steps and Pod rows are not
// rebuilt as spans: a report shows the rollout's summary and its Pods' own waterfalls.
func rolloutTrace(v *web.RolloutView, rot []web.RotationView) (*rollout.Trace, error) {
	id, err := traceID(v.TraceID)
	if err != nil {
		return nil, err
	}
	rootID, err := spanID(v.ID)
	if err != nil {
		return nil, err
	}
	outcome, ok := rolloutOutcomes[v.Outcome]
	if !ok {
		return nil, fmt.Errorf("unknown outcome %q", apiclient.Cut(v.Outcome))
	}
	t0, err := time.Parse(time.RFC3339Nano, v.Start)
	if err != nil {
		return nil, fmt.Errorf("start %q: %w", apiclient.Cut(v.Start), err)
	}
	length, err := offset(v.DurationMs)
	if err != nil {
		return nil, err
	}
	if err := names(v.Namespace, v.Workload, v.WorkloadKind, v.Revision, v.Reason); err != nil {
		return nil, err
	}
	r := &rollout.Rollout{Workload: rollout.Workload{Kind: v.WorkloadKind, Name: v.Workload, Namespace: v.Namespace},
		Generation: v.Generation, Revision: v.Revision, Reason: v.Reason}
	for _, row := range v.Rows {
		switch row.Type {
		case "pod":
			if err := apiclient.CheckID(row.UID); err != nil {
				return nil, err
			}
			r.NewPods = append(r.NewPods, rollout.NewPod{UID: row.UID, Name: row.Label, Node: row.Node})
		case "old":
			r.OldPods = append(r.OldPods, rollout.OldPod{UID: row.UID, Name: row.Label})
		}
	}
	root := phases.Span{Name: rollout.RootSpanName, Path: rollout.RootSpanName, Service: phases.ServiceReadyspan,
		SpanID: rootID, Start: t0, End: t0.Add(length)}
	t := &rollout.Trace{TraceID: id, Rollout: r, Spans: []phases.Span{root},
		Summary: rollout.Summary{Kind: rollout.Kind(v.Kind), WorkloadKind: v.WorkloadKind, Outcome: outcome,
			Duration: length, Steps: v.Steps, Waves: v.Waves, Sentence: v.Sentence}}
	for i := range rot {
		s, err := rotationSpan(&rot[i], root)
		if err != nil {
			return nil, fmt.Errorf("rotation %d: %w", i+1, err)
		}
		t.Spans = append(t.Spans, s)
	}
	return t, nil
}

// rotationSpan is an old Pod's rollout.pod.rotation span, with the attributes the gate reads.
func rotationSpan(v *web.RotationView, root phases.Span) (phases.Span, error) {
	start, err := offset(v.StartMs)
	if err != nil {
		return phases.Span{}, err
	}
	d, err := offset(v.DurMs)
	if err != nil {
		return phases.Span{}, err
	}
	if _, err := offset(v.AfterStopMs); err != nil || v.Nodes < 0 || v.Late < 0 || v.Late > v.Nodes || v.Removed < 0 {
		return phases.Span{}, fmt.Errorf("Pod %q: %d nodes, %d late, %v ms after its stop", apiclient.Cut(v.Pod), v.Nodes, v.Late, v.AfterStopMs)
	}
	if err := names(v.Pod, v.Stop, v.Message); err != nil {
		return phases.Span{}, err
	}
	s := phases.Span{Name: rollout.RotationSpanName, Path: "terminate/" + v.UID + "/rotation", Service: phases.ServiceKubeProxy,
		SpanID: phases.SpanIDFor(v.UID, rollout.RotationSpanName), ParentSpanID: root.SpanID,
		Start: root.Start.Add(start), StatusMessage: v.Message,
		Attrs: []phases.Attr{{Key: phases.AttrPodName, Value: v.Pod}, {Key: phases.AttrPodUID, Value: v.UID},
			{Key: rollout.AttrRotationNodes, Value: v.Nodes}, {Key: rollout.AttrRotationRemoved, Value: v.Removed},
			{Key: rollout.AttrRotationLate, Value: v.Late}, {Key: rollout.AttrRotationAfterStop, Value: v.AfterStopMs},
			{Key: rollout.AttrRotationStop, Value: v.Stop}}}
	s.End = s.Start.Add(d)
	if v.Error {
		s.Status = phases.StatusError
	}
	return s, nil
}

// traceID reads a trace ID as the API writes it: 32 hex digits.
func traceID(s string) (phases.TraceID, error) {
	var id phases.TraceID
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(id) {
		return id, fmt.Errorf("trace ID %q: want 32 hex digits", apiclient.Cut(s))
	}
	copy(id[:], b)
	return id, nil
}

// spanID reads a span ID as the API writes it (a rollout's ID is its root span's): 16 hex digits.
func spanID(s string) (phases.SpanID, error) {
	var id phases.SpanID
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(id) {
		return id, fmt.Errorf("span ID %q: want 16 hex digits", apiclient.Cut(s))
	}
	copy(id[:], b)
	return id, nil
}

// offset is a time in ms from the trace's start, as the API writes it: finite, not negative, at
// most about 11 days (no startup or rollout the daemon holds is longer).
func offset(ms float64) (time.Duration, error) {
	if math.IsNaN(ms) || ms < 0 || ms > 1e9 {
		return 0, fmt.Errorf("a time of %v ms", ms)
	}
	return time.Duration(ms * float64(time.Millisecond)), nil
}

func names(ss ...string) error {
	for _, s := range ss {
		if len(s) > maxName {
			return fmt.Errorf("a name of %d bytes (%q)", len(s), apiclient.Cut(s))
		}
	}
	return nil
}

// attrs converts a row's decoded attributes back to the types spans hold: integers as int64,
// other numbers as float64, strings and booleans as they are.
func attrs(m map[string]any) ([]phases.Attr, error) {
	if len(m) > maxAttrs {
		return nil, fmt.Errorf("more than %d attributes", maxAttrs)
	}
	out := make([]phases.Attr, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		switch x := m[k].(type) {
		case json.Number:
			if n, err := x.Int64(); err == nil {
				out = append(out, phases.Attr{Key: k, Value: n})
			} else if f, err := x.Float64(); err == nil {
				out = append(out, phases.Attr{Key: k, Value: f})
			}
		case string, bool:
			out = append(out, phases.Attr{Key: k, Value: x})
		}
	}
	return out, nil
}

// sourceNamed is the source a bound names (Source.String), SourceDerived for one unknown: it
// is then counted as drawn from observations, as its row said.
func sourceNamed(name string) phases.Source {
	for s := phases.SourceEventTime; s <= phases.SourceComponentSpan; s++ {
		if s.String() == name {
			return s
		}
	}
	return phases.SourceDerived
}
