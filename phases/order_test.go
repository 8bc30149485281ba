package phases

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestOutOfOrder(t *testing.T) {
	at := func(n int, src Source) point { return point{t: InstantOf(ms(n)), src: src, observed: true} }
	decades := -10957 * 24 * 3600 * 1000 // 30 years
	tests := []struct {
		name string
		in   []milestone
		want []string // substrings of each line, one per expected line
	}{
		{"in order", []milestone{{"created", at(0, SourceEventName), nil}, {"scheduled", at(40, SourceEventTime), nil}, {"ready", at(5000, SourceStatus), nil}}, nil},
		{"ready decades before creation", []milestone{{"created", at(0, SourceEventName), nil}, {"ready", at(decades, SourceStatus), nil}},
			[]string{"ready (status 1996-11-30T08:41:34Z) is 10957 days before created (event-name 2026-11-30T08:41:34Z)"}},
		// A whole-second stamp is truncated: the sandbox turned ready in [0 s, 1 s), after a bind
		// at 0.9 s is possible.
		{"truncation explains it", []milestone{{"scheduled", at(900, SourceEventTime), nil}, {"sandbox ready", at(0, SourceStatus), nil}}, nil},
		// Beyond the second, clocks of different components may differ by consistencySlack.
		{"skew explains it", []milestone{{"scheduled", at(2400, SourceEventTime), nil}, {"sandbox ready", at(0, SourceStatus), nil}}, nil},
		{"beyond truncation and skew", []milestone{{"scheduled", at(2600, SourceEventTime), nil}, {"sandbox ready", at(0, SourceStatus), nil}},
			[]string{"sandbox ready (status 2026-11-30T08:41:34Z) is 2.6s before scheduled (event-time 2026-11-30T08:41:36.6Z)"}},
		{"precise stamps have no truncation", []milestone{{"pull started", at(1600, SourceEventName), nil}, {"pull finished", at(0, SourceEventName), nil}},
			[]string{"pull finished (event-name"}},
		// A receive time only says the change happened before it: nothing can be early against it.
		{"a receive time bounds nothing from below", []milestone{{"created", at(90000, SourceWatch), nil}, {"scheduled", at(0, SourceEventTime), nil}}, nil},
		{"unobserved milestones are skipped", []milestone{{"created", at(0, SourceEventName), nil}, {"scheduled", point{}, nil}, {"ready", at(3000, SourceStatus), nil}}, nil},
		// One early stamp gives one line; the milestones after it are held to the one before it.
		{"one early stamp, one line", []milestone{{"created", at(0, SourceEventName), nil}, {"scheduled", at(decades, SourceEventTime), nil}, {"containers ready", at(3000, SourceStatus), nil}, {"ready", at(3000, SourceStatus), nil}},
			[]string{"scheduled (event-time 1996-"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := outOfOrder(tt.in)
			if len(got) != len(tt.want) {
				t.Fatalf("got %q, want %d lines like %q", got, len(tt.want), tt.want)
			}
			for i := range got {
				if !strings.Contains(got[i].why, tt.want[i]) {
					t.Errorf("line %d: %q, want it to contain %q", i, got[i].why, tt.want[i])
				}
			}
		})
	}
}

// TestBuildFlagsImpossibleOrder: a Ready decades before the Pod existed marks the root span and
// keeps the trace out of the histograms, where a clamped Ready would have read as instant.
func TestBuildFlagsImpossibleOrder(t *testing.T) {
	p := minimal()
	p.Ready = Times{{InstantOf(ms(0).AddDate(-30, 0, 0)), SourceStatus}}
	tr := Build(p, Options{})
	root := tr.Root()
	if root.Attr(AttrInconsistent) != true {
		t.Fatalf("root attrs %v, want %s=true", root.Attrs, AttrInconsistent)
	}
	why, _ := root.Attr(AttrInconsistency).(string)
	if !strings.Contains(why, "ready (status 1996-") || len(tr.Summary.Inconsistencies) != 1 {
		t.Errorf("inconsistency %q / %q, want the Ready stamp named once", why, tr.Summary.Inconsistencies)
	}
	// The cause names the two milestones alone, fit for a metric's label.
	if c := tr.Summary.InconsistencyCauses; len(c) != 1 || c[0] != "ready_before_scheduled" {
		t.Errorf("causes %q, want [ready_before_scheduled]", c)
	}
	if s := tr.Summary; s.PhaseObserved != [6]bool{} || s.Startup != 0 || s.SLIEligible {
		t.Errorf("summary %+v: an inconsistent trace feeds no histogram", s)
	}
	if ok := Build(minimal(), Options{}); ok.Root().Attr(AttrInconsistent) != nil || ok.Summary.Inconsistencies != nil {
		t.Errorf("a consistent Pod was flagged: %v", ok.Summary.Inconsistencies)
	}
}

// TestInWaterfallOrder holds the one-pass check finish relies on to waterfall itself: for random
// trees of spans, drawn parent first in any order (half of them depth first, as the builder
// draws, with starts often tied or out of order), inWaterfallOrder says yes exactly when
// waterfall would leave the spans where they are.
func TestInWaterfallOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 17))
	var yes, no int
	for n := 0; n < 20000; n++ {
		size := 1 + r.IntN(24)
		spans, parents := make([]Span, size), make([]int, size)
		spans[0], parents[0] = Span{Name: RootSpanName, SpanID: SpanID{0, 1}}, -1
		open := []int{0}
		for j := 1; j < size; j++ {
			var p int
			if n%2 == 0 { // depth first: under the span drawn last or one of its ancestors
				open = open[:1+r.IntN(len(open))]
				p = open[len(open)-1]
				open = append(open, j)
			} else {
				p = r.IntN(j)
			}
			parents[j] = p
			spans[j] = Span{Name: "s", SpanID: SpanID{byte(j >> 8), byte(j + 1)}, ParentSpanID: spans[p].SpanID,
				Start: time.Unix(int64(r.IntN(4)), 0)}
		}
		order := waterfall(spans, 0, nil, nil)
		want := true
		for k, i := range order {
			want = want && k == i
		}
		if got := inWaterfallOrder(spans, parents); got != want {
			t.Fatalf("tree %d (parents %v, starts %v): inWaterfallOrder %v, waterfall order %v", n, parents, starts(spans), got, order)
		}
		if want {
			yes++
		} else {
			no++
		}
	}
	if yes < 1000 || no < 1000 {
		t.Fatalf("%d trees in order, %d not: too few of one to tell", yes, no)
	}
}

func starts(spans []Span) []int64 {
	out := make([]int64, len(spans))
	for i := range spans {
		out[i] = spans[i].Start.Unix()
	}
	return out
}
