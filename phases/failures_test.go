package phases

import (
	"slices"
	"testing"
)

// TestFailureLabel: the known reasons are their own label, everything else (a failed Pod's
// status.reason, free text, a reason that differs only in case) is "other".
func TestFailureLabel(t *testing.T) {
	for _, r := range FailureReasons {
		if got := FailureLabel(r); got != r {
			t.Errorf("FailureLabel(%q) = %q, want itself", r, got)
		}
	}
	for _, r := range []string{"", "Evicted", "pod failed", "crashloopbackoff", "failedmount", "The node was low on resource: memory."} {
		if got := FailureLabel(r); got != FailureReasonOther {
			t.Errorf("FailureLabel(%q) = %q, want %q", r, got, FailureReasonOther)
		}
	}
	if slices.Contains(FailureReasons, FailureReasonOther) {
		t.Errorf("%q is a reason of its own in FailureReasons", FailureReasonOther)
	}
	seen := map[string]bool{}
	for _, r := range FailureReasons {
		if seen[r] {
			t.Errorf("%q is listed twice", r)
		}
		seen[r] = true
	}
}
