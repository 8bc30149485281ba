package terminal

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/safetext"
)

// ganttWidth is the width of the rollout Gantt's bar column.
const ganttWidth = 60

// segment letters of the Gantt, one per kind of time, with the legend printed above it.
var ganttLegend = []struct {
	mark  rune
	words string
}{
	{'s', "scheduling"}, {'p', "image pull"}, {'k', "kubelet (sandbox, create, start)"}, {'r', "readiness"},
	{'t', "status"}, {'m', "minReadySeconds"}, {'=', "Pod without a trace"}, {'x', "terminating"}, {'|', "step"},
}

// Gantt writes a rollout as a terminal Gantt chart: the summary sentence first, then one row
// per step, each followed by the Pods it created (+) or removed (-); a * marks the critical
// path.
func Gantt(w io.Writer, t *rollout.Trace) error {
	root := t.Root()
	r := t.Rollout
	fmt.Fprintf(w, "%s %s/%s  rollout %s (generation %d, revision %s)  %s  %s  trace %s\n",
		safetext.Field(strings.ToLower(r.Workload.Kind)), safetext.Field(r.Workload.Namespace), safetext.Field(r.Workload.Name), t.Summary.Kind, r.Generation, safetext.Field(orDash(r.Revision)),
		t.Summary.Outcome, fmtDur(root.Duration()), t.TraceID)
	fmt.Fprintf(w, "  %s\n", safetext.Field(t.Summary.Sentence))
	if root.Status == phases.StatusError {
		fmt.Fprintf(w, "  error: %s\n", safetext.Field(root.StatusMessage))
	}
	var legend []string
	for _, l := range ganttLegend {
		legend = append(legend, fmt.Sprintf("%c %s", l.mark, l.words))
	}
	fmt.Fprintf(w, "  legend: %s; * critical path\n", strings.Join(legend, " · "))
	children := map[phases.SpanID][]*phases.Span{}
	for i := 1; i < len(t.Spans); i++ {
		s := &t.Spans[i]
		children[s.ParentSpanID] = append(children[s.ParentSpanID], s)
	}
	row := func(indent int, label string, s *phases.Span, bar string) {
		mark := " "
		if c, _ := s.Attr(rollout.AttrCritical).(bool); c {
			mark = "*"
		}
		fmt.Fprintf(w, "  %s %-38s %9s %9s |%s|\n", mark, trim(strings.Repeat("  ", indent)+label, 38),
			fmtDur(s.Start.Sub(root.Start)), fmtDur(s.Duration()), bar)
	}
	podTrace := map[string]*phases.Trace{}
	for i := range r.NewPods {
		podTrace[r.NewPods[i].UID] = r.NewPods[i].Trace
	}
	pods := func(parent *phases.Span, indent int) {
		for _, c := range children[parent.SpanID] {
			switch c.Name {
			case rollout.PodSpanName:
				row(indent, "+ "+attrString(c, phases.AttrPodName), c, podBar(c, children[c.SpanID], podTrace[rawAttr(c, phases.AttrPodUID)], root))
			case rollout.TerminateSpanName:
				label := "- " + attrString(c, phases.AttrPodName)
				if k, _ := c.Attr(rollout.AttrKilled).(bool); k {
					label += " (killed)"
				}
				row(indent, label, c, fill(c, root, 'x'))
			}
		}
	}
	for _, s := range children[root.SpanID] {
		if s.Name != rollout.StepSpanName {
			continue
		}
		dir := "↑"
		if d, _ := s.Attr(rollout.AttrStepDirection).(string); d == "down" {
			dir = "↓"
		}
		label := fmt.Sprintf("%s %s", dir, attrString(s, rollout.AttrStepTarget))
		if from, _ := s.Attr(rollout.AttrStepFrom).(int64); from >= 0 {
			to, _ := s.Attr(rollout.AttrStepTo).(int64)
			label += fmt.Sprintf(" %d→%d", from, to)
		}
		row(0, label, s, stepBar(s, root))
		pods(s, 1)
	}
	pods(root, 0) // Pods no step is known to have caused
	return nil
}

// JSONRollout writes a rollout's spans as JSON lines, like JSONLines for a Pod.
func JSONRollout(w io.Writer, t *rollout.Trace) error { return jsonSpans(w, t.TraceID, t.Spans) }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// attrString is a span's string attribute as a terminal may show it (they hold cluster names).
func attrString(s *phases.Span, key string) string { return safetext.Field(rawAttr(s, key)) }

// rawAttr is a span's string attribute as is, for lookups, never for output.
func rawAttr(s *phases.Span, key string) string {
	v, _ := s.Attr(key).(string)
	return v
}

// cell maps a time to a column of the bar.
func cell(at time.Time, root *phases.Span) int {
	total := root.Duration()
	if total <= 0 {
		return 0
	}
	c := int(float64(at.Sub(root.Start)) / float64(total) * ganttWidth)
	return min(max(c, 0), ganttWidth-1)
}

func fill(s, root *phases.Span, mark rune) string {
	b := []rune(strings.Repeat(" ", ganttWidth))
	for i := cell(s.Start, root); i <= cell(s.End, root); i++ {
		b[i] = mark
	}
	return string(b)
}

func stepBar(s, root *phases.Span) string {
	b := []rune(strings.Repeat(" ", ganttWidth))
	from, to := cell(s.Start, root), cell(s.End, root)
	for i := from + 1; i <= to; i++ {
		b[i] = '·'
	}
	b[from] = '|'
	return string(b)
}

// podBar colours a new Pod's row by what it was doing: its phases, and within the kubelet
// phase its image pulls and readiness, from its own trace's phase spans (drawn under it).
func podBar(s *phases.Span, phaseSpans []*phases.Span, tr *phases.Trace, root *phases.Span) string {
	if len(phaseSpans) == 0 {
		return fill(s, root, '=')
	}
	b := []rune(strings.Repeat(" ", ganttWidth))
	mark := map[string]rune{phases.PhaseScheduling: 's', phases.PhaseKubelet: 'k', phases.PhaseStatus: 't'}
	// Kubelet before status: where they overlap, the time is status's (as the critical path
	// counts it).
	ordered := append([]*phases.Span(nil), phaseSpans...)
	sort.SliceStable(ordered, func(i, j int) bool { return mark[ordered[i].Name] == 'k' && mark[ordered[j].Name] != 'k' })
	for _, ph := range ordered {
		m, ok := mark[ph.Name]
		if !ok || !ph.End.After(s.Start) {
			continue
		}
		start := ph.Start
		if start.Before(s.Start) {
			start = s.Start
		}
		for i := cell(start, root); i <= cell(ph.End, root); i++ {
			b[i] = m
		}
	}
	if tr != nil {
		sub := map[string]rune{"container.image_pull": 'p', "container.readiness": 'r'}
		for i := range tr.Spans {
			m, ok := sub[tr.Spans[i].Name]
			if !ok {
				continue
			}
			for c := cell(tr.Spans[i].Start, root); c <= cell(tr.Spans[i].End, root); c++ {
				if b[c] == 'k' || b[c] == 't' {
					b[c] = m
				}
			}
		}
	}
	last := cell(s.Start, root)
	for i, c := range b {
		if c != ' ' {
			last = i
		}
	}
	for i := last + 1; i <= cell(s.End, root); i++ {
		b[i] = 'm' // Ready, waiting out minReadySeconds
	}
	return string(b)
}
