package source

import (
	"fmt"
	"sort"

	"github.com/readyspan/readyspan/compare"
	"github.com/readyspan/readyspan/phases"
)

// traceLines gathers span lines by trace: `-o json` writes a trace's spans together, but a file
// concatenated from several commands need not keep them so.
type traceLines struct {
	byTrace map[string][]*jsonSpan
	order   []string
}

// maxTraces bounds the traces a file may hold (Pods', rollouts' and nodes').
const maxTraces = 4 * compare.MaxPods

func newTraceLines() *traceLines { return &traceLines{byTrace: map[string][]*jsonSpan{}} }

func (t *traceLines) add(s *jsonSpan) error {
	if len(s.TraceID) > 64 {
		return fmt.Errorf("trace_id of %d bytes", len(s.TraceID))
	}
	spans, ok := t.byTrace[s.TraceID]
	if !ok {
		if len(t.order) >= maxTraces {
			return fmt.Errorf("more than %d traces", maxTraces)
		}
		t.order = append(t.order, s.TraceID)
	}
	if len(spans) >= MaxSpans {
		return fmt.Errorf("trace %s: more than %d spans", s.TraceID, MaxSpans)
	}
	t.byTrace[s.TraceID] = append(spans, s)
	return nil
}

// flush reduces each Pod trace gathered, in the order the traces first appeared; a trace with no
// pod.startup root (a rollout's, a node's) is not a Pod's and is skipped.
func (t *traceLines) flush(add *adder) error {
	for _, id := range t.order {
		lines := t.byTrace[id]
		root := -1
		for i, s := range lines {
			if s.Name == phases.RootSpanName && s.ParentID == "" {
				if root >= 0 {
					return fmt.Errorf("trace %s: two %s roots", id, phases.RootSpanName)
				}
				root = i
			}
		}
		if root < 0 {
			continue
		}
		lines[0], lines[root] = lines[root], lines[0]
		sort.SliceStable(lines[1:], func(i, j int) bool { return lines[1+i].Start.Before(lines[1+j].Start) })
		spans := make([]compare.Span, len(lines))
		for i, s := range lines {
			d := s.End.Sub(s.Start)
			if s.DurationMs != nil {
				d = msDuration(*s.DurationMs)
			}
			spans[i] = compare.Span{Name: s.Name, Duration: d, Attrs: attrs(s.Attributes)}
		}
		if err := add.add(spans); err != nil {
			return fmt.Errorf("trace %s: %w", id, err)
		}
	}
	return nil
}
