package terminal

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/safetext"
)

// ganttWidth is the width of the rollout Gantt's bar column.
const ganttWidth = 60

// Gantt writes a rollout as a terminal Gantt chart: the summary sentence first, then one row
// per step, each followed by the Pods it created (+) or removed (-); a * marks the critical
// path.
func Gantt(w io.Writer, t *rollout.Trace) error {
	root := t.Root()
	r := t.Rollout
	fmt.Fprintf(w, "%s %s/%s  rollout %s (generation %d, revision %s)  %s  %s  trace %s\n",
		safetext.Field(strings.ToLower(r.Workload.Kind)), safetext.Field(r.Workload.Namespace), safetext.Field(r.Workload.Name), t.Summary.Kind, r.Generation, safetext.Field(orDash(r.Revision)),
		t.Summary.Outcome, durText(root), t.TraceID)
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
		note := ""
		if s.Status == phases.StatusError && s.StatusMessage != "" {
			note = " " + safetext.Field(s.StatusMessage) // a failing Pod's reason, a killed Pod's grace period
		}
		fmt.Fprintf(w, "  %s %-38s %9s %9s |%s|%s\n", mark, trim(strings.Repeat("  ", indent)+label, 38),
			fmtDur(s.Start.Sub(root.Start)), durText(s), bar, note)
	}
	newPods := make(map[string]*rollout.NewPod, len(r.NewPods))
	for i := range r.NewPods {
		newPods[r.NewPods[i].UID] = &r.NewPods[i]
	}
	pods := func(parent *phases.Span, indent int) {
		for _, c := range children[parent.SpanID] {
			switch c.Name {
			case rollout.BlockedSpanName:
				n, _ := c.Attr(rollout.AttrRejectionCount).(int64)
				label := fmt.Sprintf("⊘ %s ×%d", attrString(c, rollout.AttrRejectionClass), n)
				row(indent, label, c, blockedBar(c, root))
				if c.Status != phases.StatusError { // an error's row names it already
					fmt.Fprintf(w, "      %s: %s\n", attrString(c, rollout.AttrRejectionReason), attrString(c, rollout.AttrRejectionMessage))
				}
			case rollout.PodSpanName:
				row(indent, "+ "+attrString(c, phases.AttrPodName), c, segmentBar(rollout.PodSegments(c, newPods[rawAttr(c, phases.AttrPodUID)]), root))
			case rollout.TerminateSpanName:
				label := "- " + attrString(c, phases.AttrPodName)
				if k, _ := c.Attr(rollout.AttrKilled).(bool); k {
					label += " (killed)"
				}
				row(indent, label, c, segmentBar(rollout.PodSegments(c, nil), root))
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

// cell maps a time to a column of the bar; a time outside the rollout is drawn at its edge.
func cell(at time.Time, root *phases.Span) int {
	if root.Duration() <= 0 {
		return 0
	}
	return min(int(column(at, root, ganttWidth)), ganttWidth-1)
}

// blockedBar draws a rejection's time: from its first refused create until a Pod was made again.
func blockedBar(s, root *phases.Span) string {
	b := []rune(strings.Repeat(" ", ganttWidth))
	for i := cell(s.Start, root); i <= cell(s.End, root); i++ {
		b[i] = markBlocked
	}
	return string(b)
}

func stepBar(s, root *phases.Span) string {
	b := []rune(strings.Repeat(" ", ganttWidth))
	from, to := cell(s.Start, root), cell(s.End, root)
	for i := from + 1; i <= to; i++ {
		b[i] = '·'
	}
	b[from] = markStep
	return string(b)
}

// segmentBar draws a Pod's row from its rollout.Segments, the same stretches the web Gantt
// draws and the critical path counts.
func segmentBar(segs []rollout.Segment, root *phases.Span) string {
	b := []rune(strings.Repeat(" ", ganttWidth))
	for _, sg := range segs {
		m := sg.Category.Letter
		if m == 0 {
			m = '?'
		}
		// Segments come in time order: where two share a cell, the later one's letter shows.
		for i := cell(sg.From, root); i <= cell(sg.To, root); i++ {
			b[i] = m
		}
	}
	return string(b)
}
