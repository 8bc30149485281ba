package tracer

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/readyspan/readyspan/phases"
)

// TestWarnInconsistent: a trace marked inconsistent is logged at warning level once per cause,
// with the Pod (a cluster's string, which the text handler quotes) and every line of that cause.
func TestWarnInconsistent(t *testing.T) {
	var buf bytes.Buffer
	c := New(Config{}, SinkFunc(func(*phases.Trace) {}), nil, slog.New(slog.NewTextHandler(&buf, nil)))
	tr := &phases.Trace{Pod: &phases.Pod{Namespace: "default", Name: "web \"x\"\nlevel=ERROR"}, Summary: phases.Summary{
		Inconsistencies:     []string{"web pull finished (…) is 2s before pull started (…)", "created (…) is 2s before ReplicaSet scaled up (…)", "side pull finished (…) is 3s before pull started (…)"},
		InconsistencyCauses: []string{"container_pull_finished_before_pull_started", "created_before_replicaset_scaled_up", "container_pull_finished_before_pull_started"},
	}}
	c.warnInconsistent(tr)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want one per cause (2):\n%s", len(lines), buf.String())
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "time=") || !strings.Contains(l, " level=WARN ") || !strings.Contains(l, `pod="default/web \"x\"\nlevel=ERROR"`) {
			t.Errorf("not a warning naming the Pod, quoted: %s", l)
		}
	}
	if !strings.Contains(lines[0], "cause=container_pull_finished_before_pull_started") || !strings.Contains(lines[0], "web pull finished") || !strings.Contains(lines[0], "side pull finished") {
		t.Errorf("the first cause's line must hold both of its lines: %s", lines[0])
	}
	if !strings.Contains(lines[1], "cause=created_before_replicaset_scaled_up") {
		t.Errorf("second line: %s", lines[1])
	}
}
