package gate

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
)

// Status is one objective's result.
type Status string

const (
	StatusMet    Status = "met"
	StatusBroken Status = "broken"
	// StatusNotJudged: too few samples for a percentile (min_pods), or nothing to measure; it
	// neither passes nor breaks the gate, and every output says so.
	StatusNotJudged Status = "not-judged"
	// StatusNotObserved: the traces could not observe the value (no node component reported
	// the rules); it breaks the gate unless the file says when_not_observed: pass.
	StatusNotObserved Status = "not-observed"
)

// Exit codes of a gate run.
const (
	ExitPass    = 0 // every objective met
	ExitBroken  = 1 // an objective broken
	ExitNoJudge = 2 // the gate could not judge: no traces, a timeout, a bad SLO file
)

// MaxCulprits is how many Pods an objective names: the slowest few by its span.
const MaxCulprits = 5

// Input is what one gate run judges.
type Input struct {
	// Pods are the finished Pod traces: every Pod of the rollout, or started in the window.
	Pods []*phases.Trace
	// Rollouts are the finished rollout traces (the one waited for; any in the window).
	Rollouts []*rollout.Trace
}

// Result is one objective judged.
type Result struct {
	// Objective names it as the file does: "container.image_pull p99", "failures ErrImagePull",
	// "rotation max_pods", "workload.rollout outcome".
	Objective string `json:"objective"`
	Status    Status `json:"status"`
	// Measured and Limit are the value and its threshold: durations, or counts for failures
	// and rotation.max_pods (Unit says which).
	Measured float64 `json:"measured"`
	Limit    float64 `json:"limit"`
	Unit     string  `json:"unit"` // "seconds" or "pods"
	// Samples is how many values it was judged on (Pods, rollouts, old Pods).
	Samples int `json:"samples"`
	// Message is one sentence: the measure against the limit, or why it was not judged.
	Message string `json:"message"`
	// Culprits are the Pods responsible for a broken objective, worst first.
	Culprits []Culprit `json:"culprits,omitempty"`
}

// Culprit is a Pod (or rollout) responsible for a broken objective.
type Culprit struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Container is the container whose span it was, for a container's span.
	Container string `json:"container,omitempty"`
	TraceID   string `json:"trace_id"`
	// Seconds is its value of the span, or Reason its failure.
	Seconds float64 `json:"seconds,omitempty"`
	Reason  string  `json:"reason,omitempty"`
}

// Verdict is a gate run's outcome: each objective's result and the exit code they make.
type Verdict struct {
	Results  []Result `json:"results"`
	Pods     int      `json:"pods"`
	Rollouts int      `json:"rollouts"`
	// Notes say what the verdict rests on that a reader must know: Pods counted as stuck,
	// Pods left out of the durations.
	Notes []string `json:"notes,omitempty"`
	Exit  int      `json:"exit"`
}

// Judge checks the traces against f (which Validate accepted).
func Judge(f *File, in Input) Verdict {
	v := Verdict{Pods: len(in.Pods), Rollouts: len(in.Rollouts)}
	finished, unfinished := splitPods(in.Pods)
	if unfinished > 0 {
		v.Notes = append(v.Notes, fmt.Sprintf("%d Pods did not reach Ready; their durations are not judged, their failures are", unfinished))
	}
	for _, name := range slices.Sorted(maps.Keys(f.Spans)) {
		t := f.Spans[name]
		if name == rollout.RootSpanName {
			v.Results = append(v.Results, judgeRolloutLength(t, in.Rollouts))
			continue
		}
		v.Results = append(v.Results, judgeSpan(name, t, f.minPods(t), finished)...)
	}
	v.Results = append(v.Results, judgeFailures(f.Failures, in.Pods)...)
	if len(in.Rollouts) > 0 {
		v.Results = append(v.Results, judgeOutcomes(in.Rollouts))
	}
	if f.Rotation != nil {
		v.Results = append(v.Results, judgeRotation(f.Rotation, in.Rollouts)...)
	}
	v.Exit = exitOf(v)
	return v
}

// exitOf is the exit code: broken beats everything; nothing judged at all (no traces) is
// ExitNoJudge.
func exitOf(v Verdict) int {
	judged := false
	for _, r := range v.Results {
		switch r.Status {
		case StatusBroken, StatusNotObserved:
			return ExitBroken
		case StatusMet:
			judged = true
		}
	}
	if !judged || v.Pods+v.Rollouts == 0 {
		return ExitNoJudge
	}
	return ExitPass
}

// splitPods are the traces whose spans measure a whole startup (ready, or completed), and how
// many others there are.
func splitPods(pods []*phases.Trace) (finished []*phases.Trace, unfinished int) {
	for _, t := range pods {
		switch t.Summary.Outcome {
		case phases.OutcomeReady, phases.OutcomeCompleted:
			finished = append(finished, t)
		case phases.OutcomeDeleted:
			// Deleted before Ready (a superseded rollout's Pod): neither a startup nor a failure.
		default:
			unfinished++
		}
	}
	return finished, unfinished
}

// sample is one Pod's value of a span: its longest span of that name that was observed at both
// ends (its slowest container, its slowest pull).
type sample struct {
	trace     *phases.Trace
	container string
	d         time.Duration
}

func samplesOf(name string, pods []*phases.Trace) (out []sample, unobserved int) {
	for _, t := range pods {
		var best *phases.Span
		seen := false
		for i := range t.Spans {
			s := &t.Spans[i]
			if s.Name != name {
				continue
			}
			seen = true
			if !measured(s) {
				continue
			}
			if best == nil || s.Duration() > best.Duration() {
				best = s
			}
		}
		switch {
		case best != nil:
			c, _ := best.Attr(phases.AttrContainerName).(string)
			out = append(out, sample{trace: t, container: c, d: best.Duration()})
		case seen:
			unobserved++
		}
	}
	// Slowest first: the culprits are the head, and percentiles index from either end.
	sort.SliceStable(out, func(i, j int) bool { return out[i].d > out[j].d })
	return out, unobserved
}

// measured says whether a span's length was measured: both ends observed, and the phase applies
// to the Pod. A span that states no bounds (a component's own) is measured by its sender.
func measured(s *phases.Span) bool {
	if a, ok := s.Attr(phases.AttrApplicable).(bool); ok && !a {
		return false
	}
	return s.StartBound.Source == 0 || (s.StartBound.Observed && s.EndBound.Observed)
}

// judgeSpan judges one span's percentiles and maximum.
func judgeSpan(name string, t Thresholds, minPods int, pods []*phases.Trace) []Result {
	samples, unobserved := samplesOf(name, pods)
	var out []Result
	for _, p := range t.percentiles() {
		r := Result{Objective: name + " " + p.name, Limit: time.Duration(*p.limit).Seconds(), Unit: "seconds", Samples: len(samples)}
		switch {
		case len(samples) == 0:
			r.Status = StatusNotJudged
			r.Message = fmt.Sprintf("not judged: no Pod measured %s%s", name, unobservedWords(unobserved))
			out = append(out, r)
			continue
		case len(samples) < minPods:
			r.Status = StatusNotJudged
			r.Message = fmt.Sprintf("not judged: %d Pods measured %s, fewer than min_pods %d%s", len(samples), name, minPods, unobservedWords(unobserved))
			out = append(out, r)
			continue
		}
		v := rankValue(samples, p.rank)
		out = append(out, durationResult(r, v, time.Duration(*p.limit), samples, unobserved))
	}
	if t.Max != nil {
		r := Result{Objective: name + " max", Limit: time.Duration(*t.Max).Seconds(), Unit: "seconds", Samples: len(samples)}
		if len(samples) == 0 {
			r.Status = StatusNotJudged
			r.Message = fmt.Sprintf("not judged: no Pod measured %s%s", name, unobservedWords(unobserved))
			out = append(out, r)
		} else {
			out = append(out, durationResult(r, samples[0].d, time.Duration(*t.Max), samples, unobserved))
		}
	}
	return out
}

// durationResult fills r from the measured value v against limit: the Pods above the limit
// are its culprits.
func durationResult(r Result, v, limit time.Duration, samples []sample, unobserved int) Result {
	r.Measured = v.Seconds()
	if v <= limit {
		r.Status = StatusMet
		r.Message = fmt.Sprintf("%s ≤ %s over %d Pods%s", fmtDuration(v), fmtDuration(limit), len(samples), unobservedWords(unobserved))
		return r
	}
	r.Status = StatusBroken
	above := 0
	for _, s := range samples {
		if s.d > limit {
			above++
		}
	}
	r.Message = fmt.Sprintf("%s > %s over %d Pods (%d above the limit)%s", fmtDuration(v), fmtDuration(limit), len(samples), above, unobservedWords(unobserved))
	for _, s := range samples[:min(above, MaxCulprits)] {
		r.Culprits = append(r.Culprits, Culprit{Namespace: s.trace.Pod.Namespace, Name: s.trace.Pod.Name, Container: s.container,
			TraceID: s.trace.TraceID.String(), Seconds: s.d.Seconds()})
	}
	return r
}

// rankValue is the nearest-rank percentile of samples (sorted slowest first): the smallest
// value at least rank% of the samples are at or below.
func rankValue(samples []sample, rank float64) time.Duration {
	n := len(samples)
	k := int(math.Ceil(rank / 100 * float64(n))) // 1-based rank in ascending order
	k = min(max(k, 1), n)
	return samples[n-k].d
}

func unobservedWords(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("; %d more Pods had the span with an end not observed, left out", n)
}

// fmtDuration writes a duration to the millisecond: what the spans' sources resolve.
func fmtDuration(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000)
	}
	return fmt.Sprintf("%.3fs", d.Seconds())
}

// failureReason is the reason a Pod counts under, or "" when it is no failure.
func failureReason(t *phases.Trace) string {
	switch t.Summary.Outcome {
	case phases.OutcomeReady, phases.OutcomeCompleted, phases.OutcomeDeleted:
		return ""
	}
	if r := t.Summary.FailureReason; r != "" {
		return r
	}
	if t.Summary.Outcome == phases.OutcomeFailed {
		return ReasonOther
	}
	return ReasonStuck // stuck, or still starting when the gate stopped waiting
}

// judgeFailures counts the failed Pods by reason: one objective per reason the file lists, and
// one for the rest (other; none allowed unless the file says).
func judgeFailures(allowed map[string]int, pods []*phases.Trace) []Result {
	byKey := map[string][]*phases.Trace{}
	for _, t := range pods {
		r := failureReason(t)
		if r == "" {
			continue
		}
		if _, listed := allowed[r]; !listed {
			r = ReasonOther
		}
		byKey[r] = append(byKey[r], t)
	}
	keys := slices.Sorted(maps.Keys(allowed))
	if _, ok := allowed[ReasonOther]; !ok {
		keys = append(keys, ReasonOther)
	}
	var out []Result
	for _, k := range keys {
		failed, limit := byKey[k], allowed[k]
		r := Result{Objective: "failures " + k, Measured: float64(len(failed)), Limit: float64(limit), Unit: "pods", Samples: len(pods), Status: StatusMet}
		r.Message = fmt.Sprintf("%d Pods failed with %s, %d allowed", len(failed), failureWords(k), limit)
		if len(failed) > limit {
			r.Status = StatusBroken
			for _, t := range failed[:min(len(failed), MaxCulprits)] {
				r.Culprits = append(r.Culprits, Culprit{Namespace: t.Pod.Namespace, Name: t.Pod.Name, TraceID: t.TraceID.String(),
					Reason: reasonOf(t)})
			}
		}
		out = append(out, r)
	}
	return out
}

// reasonOf is what a culprit of the failures shows: its reason, or that it was stuck.
func reasonOf(t *phases.Trace) string {
	if r := t.Summary.FailureReason; r != "" {
		return r
	}
	if t.Summary.Outcome == phases.OutcomeInProgress {
		return ReasonStuck + " (still starting when the gate stopped)"
	}
	return string(t.Summary.Outcome)
}

func failureWords(key string) string {
	switch key {
	case ReasonOther:
		return "a reason not listed"
	case ReasonStuck:
		return "no reason, not Ready (stuck)"
	}
	return key
}

// judgeRolloutLength judges workload.rollout max: the longest rollout that ended.
func judgeRolloutLength(t Thresholds, rollouts []*rollout.Trace) Result {
	r := Result{Objective: rollout.RootSpanName + " max", Limit: time.Duration(*t.Max).Seconds(), Unit: "seconds"}
	var worst *rollout.Trace
	for _, rt := range rollouts {
		if rt.Summary.Outcome == rollout.OutcomeInProgress {
			continue
		}
		r.Samples++
		if worst == nil || rt.Summary.Duration > worst.Summary.Duration {
			worst = rt
		}
	}
	if worst == nil {
		r.Status, r.Message = StatusNotJudged, "not judged: no rollout ended"
		return r
	}
	d, limit := worst.Summary.Duration, time.Duration(*t.Max)
	r.Measured = d.Seconds()
	if d <= limit {
		r.Status, r.Message = StatusMet, fmt.Sprintf("%s ≤ %s", fmtDuration(d), fmtDuration(limit))
		return r
	}
	r.Status, r.Message = StatusBroken, fmt.Sprintf("%s > %s: %s", fmtDuration(d), fmtDuration(limit), worst.Summary.Sentence)
	r.Culprits = []Culprit{rolloutCulprit(worst)}
	return r
}

func rolloutCulprit(rt *rollout.Trace) Culprit {
	w := rt.Rollout.Workload
	return Culprit{Namespace: w.Namespace, Name: w.Kind + "/" + w.Name, TraceID: rt.TraceID.String(), Seconds: rt.Summary.Duration.Seconds(),
		Reason: string(rt.Summary.Outcome)}
}

// judgeOutcomes: every rollout judged must have completed; one still in progress when the
// gate stopped is not judged.
func judgeOutcomes(rollouts []*rollout.Trace) Result {
	r := Result{Objective: rollout.RootSpanName + " outcome", Unit: "rollouts", Samples: len(rollouts), Status: StatusMet}
	var bad, running []*rollout.Trace
	for _, rt := range rollouts {
		switch rt.Summary.Outcome {
		case rollout.OutcomeComplete:
		case rollout.OutcomeInProgress:
			running = append(running, rt)
		default:
			bad = append(bad, rt)
		}
	}
	r.Measured = float64(len(bad))
	switch {
	case len(bad) > 0:
		r.Status = StatusBroken
		r.Message = fmt.Sprintf("%d of %d rollouts did not complete", len(bad), len(rollouts))
		for _, rt := range bad[:min(len(bad), MaxCulprits)] {
			c := rolloutCulprit(rt)
			if rt.Rollout.Reason != "" {
				c.Reason += ": " + rt.Rollout.Reason
			}
			r.Culprits = append(r.Culprits, c)
		}
	case len(running) == len(rollouts):
		r.Status, r.Message = StatusNotJudged, "not judged: the rollout had not ended"
	default:
		r.Message = fmt.Sprintf("%d rollouts complete", len(rollouts)-len(running))
		if len(running) > 0 {
			r.Message += fmt.Sprintf(", %d still in progress when the gate stopped (not judged)", len(running))
		}
	}
	return r
}

// judgeRotation judges the old Pods left in kube-proxy's rules after their stop, from the
// rollouts' rollout.pod.rotation spans.
func judgeRotation(o *Rotation, rollouts []*rollout.Trace) []Result {
	type late struct {
		rt    *rollout.Trace
		pod   string
		after time.Duration
	}
	var lates []late
	observed := 0
	for _, rt := range rollouts {
		for i := range rt.Spans {
			s := &rt.Spans[i]
			if s.Name != rollout.RotationSpanName {
				continue
			}
			observed++
			n, _ := s.Attr(rollout.AttrRotationLate).(int64)
			ms, _ := s.Attr(rollout.AttrRotationAfterStop).(float64)
			if n > 0 {
				name, _ := s.Attr(phases.AttrPodName).(string)
				lates = append(lates, late{rt, name, time.Duration(ms * float64(time.Millisecond))})
			}
		}
	}
	slices.SortStableFunc(lates, func(a, b late) int { return int(b.after - a.after) })
	culprits := func(above time.Duration) []Culprit {
		var cs []Culprit
		for _, l := range lates {
			if l.after > above && len(cs) < MaxCulprits {
				cs = append(cs, Culprit{Namespace: l.rt.Rollout.Workload.Namespace, Name: l.pod, TraceID: l.rt.TraceID.String(), Seconds: l.after.Seconds()})
			}
		}
		return cs
	}
	var out []Result
	if o.MaxPods != nil {
		r := Result{Objective: "rotation max_pods", Limit: float64(*o.MaxPods), Unit: "pods", Samples: observed, Measured: float64(len(lates))}
		r.Status, r.Message = StatusMet, fmt.Sprintf("%d old Pods in rotation after their stop, %d allowed", len(lates), *o.MaxPods)
		if len(lates) > *o.MaxPods {
			r.Status, r.Culprits = StatusBroken, culprits(0)
		}
		out = append(out, r)
	}
	if o.MaxAfterStop != nil {
		limit := time.Duration(*o.MaxAfterStop)
		r := Result{Objective: "rotation max_after_stop", Limit: limit.Seconds(), Unit: "seconds", Samples: observed}
		worst := time.Duration(0)
		if len(lates) > 0 {
			worst = lates[0].after
		}
		r.Measured = worst.Seconds()
		r.Status, r.Message = StatusMet, fmt.Sprintf("%s ≤ %s after the stop", fmtDuration(worst), fmtDuration(limit))
		if worst > limit {
			r.Status, r.Message, r.Culprits = StatusBroken, fmt.Sprintf("%s > %s after the stop", fmtDuration(worst), fmtDuration(limit)), culprits(limit)
		}
		out = append(out, r)
	}
	if observed > 0 {
		return out
	}
	return unobservedRotation(o, rollouts, out)
}

// unobservedRotation marks the rotation results when no removal was reported: nothing to judge
// when no rollout removed an old Pod; else not observed, a failure unless the file lets it pass.
func unobservedRotation(o *Rotation, rollouts []*rollout.Trace, out []Result) []Result {
	oldPods := 0
	for _, rt := range rollouts {
		oldPods += len(rt.Rollout.OldPods)
	}
	for i := range out {
		out[i].Measured, out[i].Culprits = 0, nil
		if oldPods == 0 {
			out[i].Status, out[i].Message = StatusNotJudged, "not judged: no rollout removed an old Pod"
			continue
		}
		out[i].Status = StatusNotObserved
		out[i].Message = "not observed: no old Pod's removal from the nodes' rules was reported (readyspan node, docs/last-mile.md)"
		if o.notObservedPasses() {
			out[i].Status = StatusNotJudged
			out[i].Message += "; passes: when_not_observed: pass"
		}
	}
	return out
}
