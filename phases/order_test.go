package phases

import (
	"strings"
	"testing"
)

func TestOutOfOrder(t *testing.T) {
	at := func(n int, src Source) point { return point{t: ms(n), src: src, observed: true} }
	decades := -10957 * 24 * 3600 * 1000 // 30 years
	tests := []struct {
		name string
		in   []milestone
		want []string // substrings of each line, one per expected line
	}{
		{"in order", []milestone{{"created", at(0, SourceEventName)}, {"scheduled", at(40, SourceEventTime)}, {"ready", at(5000, SourceStatus)}}, nil},
		{"ready decades before creation", []milestone{{"created", at(0, SourceEventName)}, {"ready", at(decades, SourceStatus)}},
			[]string{"ready (status 1996-11-30T08:41:34Z) is 10957 days before created (event-name 2026-11-30T08:41:34Z)"}},
		// A whole-second stamp is truncated: the sandbox turned ready in [0 s, 1 s), after a bind
		// at 0.9 s is possible.
		{"truncation explains it", []milestone{{"scheduled", at(900, SourceEventTime)}, {"sandbox ready", at(0, SourceStatus)}}, nil},
		// Beyond the second, clocks of different components may differ by consistencySlack.
		{"skew explains it", []milestone{{"scheduled", at(2400, SourceEventTime)}, {"sandbox ready", at(0, SourceStatus)}}, nil},
		{"beyond truncation and skew", []milestone{{"scheduled", at(2600, SourceEventTime)}, {"sandbox ready", at(0, SourceStatus)}},
			[]string{"sandbox ready (status 2026-11-30T08:41:34Z) is 2.6s before scheduled (event-time 2026-11-30T08:41:36.6Z)"}},
		{"precise stamps have no truncation", []milestone{{"pull started", at(1600, SourceEventName)}, {"pull finished", at(0, SourceEventName)}},
			[]string{"pull finished (event-name"}},
		// A receive time only says the change happened before it: nothing can be early against it.
		{"a receive time bounds nothing from below", []milestone{{"created", at(90000, SourceWatch)}, {"scheduled", at(0, SourceEventTime)}}, nil},
		{"unobserved milestones are skipped", []milestone{{"created", at(0, SourceEventName)}, {"scheduled", point{}}, {"ready", at(3000, SourceStatus)}}, nil},
		// One early stamp gives one line; the milestones after it are held to the one before it.
		{"one early stamp, one line", []milestone{{"created", at(0, SourceEventName)}, {"scheduled", at(decades, SourceEventTime)}, {"containers ready", at(3000, SourceStatus)}, {"ready", at(3000, SourceStatus)}},
			[]string{"scheduled (event-time 1996-"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := outOfOrder(tt.in)
			if len(got) != len(tt.want) {
				t.Fatalf("got %q, want %d lines like %q", got, len(tt.want), tt.want)
			}
			for i := range got {
				if !strings.Contains(got[i], tt.want[i]) {
					t.Errorf("line %d: %q, want it to contain %q", i, got[i], tt.want[i])
				}
			}
		})
	}
}

// TestBuildFlagsImpossibleOrder: a Ready decades before the Pod existed marks the root span and
// keeps the trace out of the histograms, where a clamped Ready would have read as instant.
func TestBuildFlagsImpossibleOrder(t *testing.T) {
	p := minimal()
	p.Ready = Times{{ms(0).AddDate(-30, 0, 0), SourceStatus}}
	tr := Build(p, Options{})
	root := tr.Root()
	if root.Attr(AttrInconsistent) != true {
		t.Fatalf("root attrs %v, want %s=true", root.Attrs, AttrInconsistent)
	}
	why, _ := root.Attr(AttrInconsistency).(string)
	if !strings.Contains(why, "ready (status 1996-") || len(tr.Summary.Inconsistencies) != 1 {
		t.Errorf("inconsistency %q / %q, want the Ready stamp named once", why, tr.Summary.Inconsistencies)
	}
	if s := tr.Summary; s.PhaseObserved != [6]bool{} || s.Startup != 0 || s.SLIEligible {
		t.Errorf("summary %+v: an inconsistent trace feeds no histogram", s)
	}
	if ok := Build(minimal(), Options{}); ok.Root().Attr(AttrInconsistent) != nil || ok.Summary.Inconsistencies != nil {
		t.Errorf("a consistent Pod was flagged: %v", ok.Summary.Inconsistencies)
	}
}
