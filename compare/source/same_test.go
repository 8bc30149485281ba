package source

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/readyspan/readyspan/compare"
)

// The recordings of one setup (testdata/README.md: the same 15-replica Deployment, warm image,
// created in a new namespace on the local cluster's real node, one rollout each). 1 and 2 were
// made one after the other, 3 and 4 likewise after a warm-up run. Run to run, the same setup's
// mean startup moves by about 1 s, more than the Pods of one run spread (3 against 4: +1.35 s,
// +0.48 to +2.22 s when Pods alone are resampled).
func sameSetup(t *testing.T, n string) compare.Set {
	return load(t, filepath.Join("testdata", "same-setup-"+n))
}

// TestSameSetup compares two recordings of one setup, one run each: no row's shift is called
// significant, the startup has the Pods to say so, and the sentence says a run a side cannot
// tell a setup from a run, where the Pods alone would have called 3 against 4 significant.
func TestSameSetup(t *testing.T) {
	for _, pair := range [][2]string{{"1", "2"}, {"3", "4"}} {
		a, b := sameSetup(t, pair[0]), sameSetup(t, pair[1])
		if len(a.Pods) < 15 || len(b.Pods) < 15 {
			t.Fatalf("%d and %d Pods Ready, want 15 each", len(a.Pods), len(b.Pods))
		}
		res, err := compare.Compare(a, b, compare.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s against %s: %s", pair[0], pair[1], res.Sentence)
		noneSignificant(t, res)
		m := res.Rows[0].Stats[compare.StatMean]
		if m.TooFewPods || !m.TooFewRuns || res.A.Runs != 1 || res.B.Runs != 1 {
			t.Errorf("the startup's mean: too few Pods %v, too few runs %v (%d and %d runs); want the Pods, and one run a side",
				m.TooFewPods, m.TooFewRuns, res.A.Runs, res.B.Runs)
		}
		if !strings.Contains(res.Sentence, "with so few runs a side") {
			t.Errorf("the sentence does not say one run a side cannot be judged: %s", res.Sentence)
		}
	}
}

// TestSameSetupRuns pools the four recordings into two runs a side (1 and 3 against 2 and 4):
// the pooled Pods' mean moved by about 1.1 s, and resampling two runs a side cannot show their
// spread (three distinct draws; its interval here is +0.02 to +2.26 s), so it is not called
// significant: too few runs.
func TestSameSetupRuns(t *testing.T) {
	pool := func(ns ...string) compare.Set {
		var s compare.Set
		for _, n := range ns {
			one := sameSetup(t, n)
			for _, p := range one.Pods {
				p.Run = "recording " + n + ": " + p.Run // each recording its own run, though its ReplicaSet's name is the same
				s.Pods = append(s.Pods, p)
			}
			s.Label += one.Label + " "
		}
		return s
	}
	res, err := compare.Compare(pool("1", "3"), pool("2", "4"), compare.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res.Sentence)
	if res.A.Runs != 2 || res.B.Runs != 2 {
		t.Fatalf("%d and %d runs, want 2 a side", res.A.Runs, res.B.Runs)
	}
	noneSignificant(t, res)
	m := res.Rows[0].Stats[compare.StatMean]
	if !m.TooFewRuns || m.TooFewPods || m.Shift.Est < 0.8 {
		t.Errorf("the startup's mean %+v: want too few runs, the Pods enough, a shift of about 1.1 s", m)
	}
}

func noneSignificant(t *testing.T, res *compare.Result) {
	t.Helper()
	for _, r := range res.Rows {
		for _, e := range r.Stats {
			if e.Significant {
				t.Errorf("%s %s: shift %+v called significant between runs of one setup", r.Span, e.Stat, e.Shift)
			}
		}
	}
}
