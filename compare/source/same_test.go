package source

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/readyspan/readyspan/compare"
)

// TestSameSetup compares two recordings of one setup (testdata/README.md: the same 15-replica
// Deployment, warm image, created twice in the same namespace on the local cluster's real
// node): no row's shift is significant, the startup has the Pods to say so, and the sentence
// says both.
func TestSameSetup(t *testing.T) {
	a, b := load(t, filepath.Join("testdata", "same-setup-1")), load(t, filepath.Join("testdata", "same-setup-2"))
	if len(a.Pods) < 15 || len(b.Pods) < 15 {
		t.Fatalf("%d and %d Pods Ready, want 15 each", len(a.Pods), len(b.Pods))
	}
	res, err := compare.Compare(a, b, compare.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res.Sentence)
	for _, r := range res.Rows {
		for _, e := range r.Stats {
			if e.Significant {
				t.Errorf("%s %s: shift %+v called significant between two runs of one setup", r.Span, e.Stat, e.Shift)
			}
		}
	}
	if m := res.Rows[0].Stats[compare.StatMean]; m.TooFewPods {
		t.Errorf("the startup's mean has too few Pods: %+v", m)
	}
	if !strings.Contains(res.Sentence, "no significant shift.") ||
		len(res.Lead) > 0 && !strings.Contains(res.Sentence, "not significant with every row tested together") {
		t.Errorf("the sentence: %s", res.Sentence)
	}
}
