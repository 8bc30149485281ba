package prometheus

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/tracer"
)

// TestRolloutSeriesAtStart: the gauges and the duration series the alerts compute increase()
// over exist before any rollout, so the first slow or failed rollout counts.
func TestRolloutSeriesAtStart(t *testing.T) {
	m := New(prometheus.NewRegistry(), "test", tracer.Kinds.RolloutKinds(), Options{})
	kinds, workloads := len(rollout.Kinds), len(tracer.Kinds.RolloutKinds())
	tests := []struct {
		name string
		c    prometheus.Collector
		want int
	}{
		{"duration: complete and failed", m.rollouts.duration, workloads * kinds * 2},
		{"steps: none until a rollout ends", m.rollouts.steps, 0},
		{"in progress", m.rollouts.inProgress, workloads * kinds},
		{"past deadline", m.rollouts.pastDeadline, workloads},
		{"longest without step", m.rollouts.longestWithoutStep, workloads},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if n := testutil.CollectAndCount(tt.c); n != tt.want {
				t.Errorf("%d series, want %d", n, tt.want)
			}
		})
	}
}

func TestExportRollout(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)
	r := &rollout.Rollout{
		Workload: rollout.Workload{Kind: rollout.Deployment, Name: "web", Namespace: "prod", UID: "0000000c-0000-4000-8000-000000000001"},
		Kind:     rollout.KindUpdate, Generation: 2, Outcome: rollout.OutcomeFailed,
		Start:    phases.Times{{At: phases.InstantOf(t0), Source: phases.SourceWatch}},
		Complete: phases.Times{{At: phases.InstantOf(t0.Add(700 * time.Second)), Source: phases.SourceWatch}},
		Steps:    []rollout.Step{{Time: phases.Times{{At: phases.InstantOf(t0.Add(time.Second)), Source: phases.SourceEventName}}, Up: true, From: 0, To: 1}},
	}
	reg := prometheus.NewRegistry()
	m := New(reg, "test", tracer.Kinds.RolloutKinds(), Options{})
	m.ExportRollout(rollout.Build(r))
	want := `
# HELP readyspan_rollout_steps Scale-up waves per finished rollout (a Deployment's ScalingReplicaSet scale-ups of its new ReplicaSet; a StatefulSet's or DaemonSet's Pod creations), by workload kind.
# TYPE readyspan_rollout_steps histogram
readyspan_rollout_steps_bucket{workload="Deployment",le="1"} 1
readyspan_rollout_steps_bucket{workload="Deployment",le="2"} 1
readyspan_rollout_steps_bucket{workload="Deployment",le="3"} 1
readyspan_rollout_steps_bucket{workload="Deployment",le="5"} 1
readyspan_rollout_steps_bucket{workload="Deployment",le="10"} 1
readyspan_rollout_steps_bucket{workload="Deployment",le="20"} 1
readyspan_rollout_steps_bucket{workload="Deployment",le="50"} 1
readyspan_rollout_steps_bucket{workload="Deployment",le="100"} 1
readyspan_rollout_steps_bucket{workload="Deployment",le="200"} 1
readyspan_rollout_steps_bucket{workload="Deployment",le="+Inf"} 1
readyspan_rollout_steps_sum{workload="Deployment"} 1
readyspan_rollout_steps_count{workload="Deployment"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "readyspan_rollout_steps"); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, mf := range mfs {
		if mf.GetName() != "readyspan_rollout_duration_seconds" {
			continue
		}
		for _, met := range mf.GetMetric() {
			hist := met.GetHistogram()
			if hist.GetSampleCount() == 0 {
				continue
			}
			found = true
			if hist.GetSampleSum() != 700 {
				t.Errorf("duration sum %v, want 700", hist.GetSampleSum())
			}
			// The 700 s rollout is in the 900 s bucket, not the 600 s one RolloutSlow reads.
			for _, b := range hist.GetBucket() {
				want := uint64(0)
				if b.GetUpperBound() >= 900 {
					want = 1
				}
				if b.GetCumulativeCount() != want {
					t.Errorf("bucket le=%v holds %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
				}
				if ex := b.GetExemplar(); b.GetUpperBound() == 900 && (ex == nil || ex.GetLabel()[0].GetValue() != rollout.TraceIDFor(r.Workload.UID, 2).String()) {
					t.Errorf("the 900 s bucket's exemplar is %v, want the rollout's trace ID", ex)
				}
			}
		}
	}
	if !found {
		t.Fatal("no rollout duration observed")
	}
}
