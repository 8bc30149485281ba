// Package terminal renders traces for people (a waterfall) and for scripts (JSON lines).
package terminal

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/safetext"
)

// barWidth is the width of the waterfall's bar column.
const barWidth = 40

// Waterfall writes one trace as an indented waterfall: each span's offset from the start of
// the trace, its length, a bar, and where its boundaries came from. Every string that came from
// the cluster (names, messages, reasons) goes through safetext.Field on its way to the terminal.
func Waterfall(w io.Writer, t *phases.Trace) error {
	root := t.Root()
	p := t.Pod
	fmt.Fprintf(w, "%s/%s  trace %s  %s  %s\n", safetext.Field(p.Namespace), safetext.Field(p.Name), t.TraceID, t.Summary.Outcome, durText(root))
	if root.Status == phases.StatusError {
		fmt.Fprintf(w, "  error: %s\n", safetext.Field(root.StatusMessage))
	} else if why, ok := root.Attr(phases.AttrFailureReason).(string); ok {
		fmt.Fprintf(w, "  failing: %s\n", safetext.Field(why)) // not Ready yet, and why
	}
	if why, ok := root.Attr(phases.AttrInconsistency).(string); ok {
		fmt.Fprintf(w, "  warning: timestamps out of order, the spans are clamped into order: %s\n", safetext.Field(why))
	}
	for _, row := range phases.TreeOrder(t.Spans) {
		i, s, d := row.Index, &t.Spans[row.Index], row.Depth
		name := strings.Repeat("  ", d) + s.Name
		if c, ok := s.Attr(phases.AttrContainerName).(string); ok && phases.IsContainerSpan(s.Name) {
			name += " " + safetext.Field(c)
		}
		var notes []string
		if v, ok := s.Attr(phases.AttrImageCache).(string); ok {
			notes = append(notes, safetext.Field(v))
		}
		if v, ok := s.Attr(phases.AttrObserved).(bool); ok && !v {
			notes = append(notes, "not observed")
		}
		if v, ok := s.Attr(phases.AttrApplicable).(bool); ok && !v {
			notes = append(notes, "n/a")
		}
		if v, ok := s.Attr(phases.AttrClamped).(string); ok {
			notes = append(notes, "clamped "+safetext.Field(v))
		}
		if s.Status == phases.StatusError && i > 0 {
			notes = append(notes, "ERROR "+safetext.Field(s.StatusMessage))
		}
		// Who the scheduling waits and the preemption were about, by the keys that name them.
		for _, k := range [...]struct{ key, label string }{
			{phases.AttrNominatedNode, "nominated "}, {phases.AttrGatesRemovedBy, "removed by "}, {phases.AttrAutoscaler, ""},
		} {
			if v, ok := s.Attr(k.key).(string); ok {
				notes = append(notes, k.label+safetext.Field(v))
			}
		}
		if v, ok := s.Attr(phases.AttrComponentWebhook).(string); ok && (s.Name == phases.SpanAPIMutatingHook || s.Name == phases.SpanAPIValidatingHook) {
			notes = append(notes, safetext.Field(v))
		}
		if v, ok := s.Attr(phases.AttrNodeName).(string); ok && s.Name == phases.SpanSchedulingWaitingForNode {
			notes = append(notes, "node "+safetext.Field(v))
		}
		for _, l := range s.Links() {
			if rel, ok := linkAttr(l, phases.AttrLinkRelation); ok && rel != "pod_trace" && rel != "rollout" && rel != phases.LinkComponentSpan && rel != phases.LinkNodeStartup && rel != phases.LinkDisruptedNode {
				who, _ := linkAttr(l, phases.AttrPodName)
				if ns, ok := linkAttr(l, phases.AttrNamespace); ok {
					who = ns + "/" + who
				} else {
					who, _ = linkAttr(l, phases.AttrPodUID)
				}
				notes = append(notes, safetext.Field(strings.ReplaceAll(rel, "_", " ")+" "+who))
			}
		}
		if v, ok := s.Attr(phases.AttrReplacesDisruption).(string); ok {
			by, _ := s.Attr(phases.AttrReplacesDisruptedBy).(string)
			node, _ := s.Attr(phases.AttrReplacesNode).(string)
			notes = append(notes, safetext.Field("evicted by "+by+" ("+v+") from node "+node))
		}
		for _, e := range s.Events() {
			notes = append(notes, safetext.Field(e.Name))
		}
		src := safetext.Field(fmt.Sprintf("%s→%s", s.Attr(phases.AttrSourceStart), s.Attr(phases.AttrSourceEnd)))
		fmt.Fprintf(w, "  %-34s %9s %10s |%s| %s %s\n", trim(name, 34), fmtDur(s.Start.Sub(root.Start)), durText(s), bar(s, root), src, strings.Join(dedupe(notes), ", "))
	}
	return nil
}

// linkAttr is a link's string attribute.
func linkAttr(l phases.Link, key string) (string, bool) {
	for _, a := range l.Attrs {
		if a.Key == key {
			v, ok := a.Value.(string)
			return v, ok
		}
	}
	return "", false
}

// trim cuts s to n runes (a name's column), ending in "…" when it cut.
func trim(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

func dedupe(xs []string) []string {
	var out []string
	count := map[string]int{}
	for _, x := range xs {
		if count[x] == 0 {
			out = append(out, x)
		}
		count[x]++
	}
	for i, x := range out {
		if count[x] > 1 {
			out[i] = fmt.Sprintf("%s×%d", x, count[x])
		}
	}
	return out
}

// bar draws a span on the chart of the trace's root. A span's times are its source's, kept as
// they are: a component's span joined into the trace (a kubelet whose clock is behind the
// apiserver's) may begin before the trace, end after it, end before it begins or lie years
// away. It is drawn cut at the chart's edge, at least one cell wide; its numbers say its times.
func bar(s, root *phases.Span) string {
	if root.Duration() <= 0 {
		return strings.Repeat(" ", barWidth)
	}
	from := min(int(column(s.Start, root, barWidth)), barWidth-1)
	to := int(min(column(s.End, root, barWidth)+0.999, barWidth))
	if to <= from {
		to = from + 1
	}
	return strings.Repeat(" ", from) + strings.Repeat("█", to-from) + strings.Repeat(" ", barWidth-to)
}

// column is where a time lies on a chart width columns wide of a root with a positive length,
// in columns from its left edge, held to [0, width] before any conversion to an integer (a
// float beyond int's range converts to an arbitrary int).
func column(at time.Time, root *phases.Span, width int) float64 {
	c := float64(at.Sub(root.Start)) / float64(root.Duration()) * float64(width)
	return min(max(c, 0), float64(width))
}

// durText is a span's length with the precision its ends have (phases.CoarseLength: "10s ±1s"
// between whole-second stamps), or to the millisecond when they are precise.
func durText(s *phases.Span) string {
	if t, ok := phases.CoarseLength(s.Duration(), phases.LengthUncertainty(s), ""); ok {
		return t
	}
	return fmtDur(s.Duration())
}

func fmtDur(d time.Duration) string {
	switch {
	case d < 0:
		// An offset before the trace's start, a component's span that ends before it begins.
		return "-" + fmtDur(-max(d, -math.MaxInt64))
	case d >= time.Minute:
		return d.Round(100 * time.Millisecond).String()
	case d >= time.Second:
		return fmt.Sprintf("%.3fs", d.Seconds())
	default:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	}
}

// JSONSpan is the JSON-lines form of a span, one object per line, for scripts.
type JSONSpan struct {
	TraceID      string         `json:"trace_id"`
	SpanID       string         `json:"span_id"`
	ParentSpanID string         `json:"parent_span_id,omitempty"`
	Name         string         `json:"name"`
	Service      string         `json:"service"`
	Start        string         `json:"start"`
	End          string         `json:"end"`
	DurationMs   float64        `json:"duration_ms"`
	Status       string         `json:"status"`
	StatusMsg    string         `json:"status_message,omitempty"`
	Attributes   map[string]any `json:"attributes"`
	Events       []JSONEvent    `json:"events,omitempty"`
	Links        []JSONLink     `json:"links,omitempty"`
}

// JSONLink is a span link in JSON lines.
type JSONLink struct {
	TraceID    string         `json:"trace_id"`
	SpanID     string         `json:"span_id"`
	Attributes map[string]any `json:"attributes,omitempty"`
}

// JSONEvent is a span event in JSON lines.
type JSONEvent struct {
	Name       string         `json:"name"`
	Time       string         `json:"time"`
	Attributes map[string]any `json:"attributes,omitempty"`
}

// JSONLines writes one JSON object per span per line.
func JSONLines(w io.Writer, t *phases.Trace) error { return jsonSpans(w, t.TraceID, t.Spans) }

func jsonSpans(w io.Writer, trace phases.TraceID, spans []phases.Span) error {
	enc := json.NewEncoder(w)
	for i := range spans {
		s := &spans[i]
		js := JSONSpan{
			TraceID:    trace.String(),
			SpanID:     s.SpanID.String(),
			Name:       s.Name,
			Service:    s.Service,
			Start:      s.Start.UTC().Format(time.RFC3339Nano),
			End:        s.End.UTC().Format(time.RFC3339Nano),
			DurationMs: float64(s.Duration()) / float64(time.Millisecond),
			Status:     statusName(s.Status),
			StatusMsg:  s.StatusMessage,
			Attributes: attrMap(s.AllAttrs()),
		}
		if !s.ParentSpanID.IsZero() {
			js.ParentSpanID = s.ParentSpanID.String()
		}
		for _, e := range s.Events() {
			js.Events = append(js.Events, JSONEvent{Name: e.Name, Time: e.Time.UTC().Format(time.RFC3339Nano), Attributes: attrMap(e.Attrs)})
		}
		for _, l := range s.Links() {
			js.Links = append(js.Links, JSONLink{TraceID: l.TraceID.String(), SpanID: l.SpanID.String(), Attributes: attrMap(l.Attrs)})
		}
		if err := enc.Encode(js); err != nil {
			return err
		}
	}
	return nil
}

func attrMap(as []phases.Attr) map[string]any {
	m := make(map[string]any, len(as))
	for _, a := range as {
		m[a.Key] = a.Value
		// JSON has no number for a float that is not finite (a component's span may carry one),
		// and one would fail the whole line: its name stands for it.
		if f, ok := a.Value.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
			m[a.Key] = strconv.FormatFloat(f, 'g', -1, 64)
		}
	}
	return m
}

func statusName(c phases.StatusCode) string {
	switch c {
	case phases.StatusOK:
		return "ok"
	case phases.StatusError:
		return "error"
	}
	return "unset"
}
