package prometheus

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/readyspan/readyspan/node"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/tracer"
)

// TestExportNode: a node's startup counts once in the duration, by provisioner and outcome, and
// each step observed once in its step's series; a startup still in progress (a flush) counts
// nowhere.
func TestExportNode(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	at := func(s float64, src phases.Source) phases.Times {
		return phases.Times{{At: phases.InstantOf(t0.Add(time.Duration(s * float64(time.Second)))), Source: src}}
	}
	s := &node.Startup{Name: "n1", UID: "0000000d-0000-4000-8000-000000000001", Provisioner: phases.ServiceKarpenter, Outcome: node.OutcomeReady,
		Claim: &phases.NodeClaimSeen{Name: "default-abc", UID: "0000000d-0000-4000-8000-000000000002",
			Created: at(0, phases.SourceWatch), Launched: at(1, phases.SourceStatus), Registered: at(40, phases.SourceStatus)},
		Created: at(35, phases.SourceWatch), Ready: at(50, phases.SourceWatch)}
	reg := prometheus.NewRegistry()
	m := New(reg, "test", tracer.Kinds.RolloutKinds(), Options{})
	m.ExportNode(node.Build(s))
	inProgress := *s
	inProgress.Outcome = node.OutcomeInProgress
	m.ExportNode(node.Build(&inProgress))

	if n := testutil.CollectAndCount(m.nodes.duration); n != len(Provisioners)*2 {
		t.Errorf("%d duration series, want the %d made at start", n, len(Provisioners)*2)
	}
	if got := histCount(t, reg, "readyspan_node_startup_duration_seconds", map[string]string{"provisioner": "karpenter", "outcome": "ready"}); got != 1 {
		t.Errorf("ready karpenter startups counted %v times, want 1", got)
	}
	for step, want := range map[string]float64{"launch": 1, "instance": 34, "registration": 5, "kubelet_ready": 10} {
		if got := histSum(t, reg, "readyspan_node_startup_step_duration_seconds", map[string]string{"provisioner": "karpenter", "step": step}); got != want {
			t.Errorf("step %s: %v s, want %v", step, got, want)
		}
	}
	if n := testutil.CollectAndCount(m.nodes.steps); n != 4 {
		t.Errorf("%d step series, want the 4 steps observed", n)
	}
}
