package tracker

import (
	"strings"
	"testing"

	"github.com/readyspan/readyspan/rollout"
)

// The controllers' FailedCreate messages quote the apiserver's error after a prefix of their own
// (v1.37: controller_utils.go's "Error creating: %v" for ReplicaSets, Jobs and DaemonSets,
// stateful_pod_control.go's "Create Pod %s in StatefulSet %s failed error: %s"), and the
// recorder's after ten distinct messages.
func TestRejectionMessage(t *testing.T) {
	const quota = `pods "web-0" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=3, limited: pods=3`
	for _, in := range []string{
		"Error creating: " + quota,
		"(combined from similar events): Error creating: " + quota,
		"Create Pod web-0 in StatefulSet web failed error: " + quota,
		"create Pod web-0 in StatefulSet web failed error: " + quota,
	} {
		if got := rejectionMessage(in); got != quota {
			t.Errorf("rejectionMessage(%q) = %q", in, got)
		}
	}
	if got := rejectionMessage(strings.Repeat("x", 5000)); len(got) > rollout.MaxRejectionMessage {
		t.Errorf("a 5,000-byte message kept as %d bytes", len(got))
	}
}
