package prometheus

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/readyspan/readyspan/phases"
)

func trace() *phases.Trace {
	t0 := time.Date(2026, 11, 30, 8, 41, 34, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	p := &phases.Pod{UID: "9cade20b-81ea-4be9-bdc9-d3f2d8d8b69f", Name: "web-1", Namespace: "default", Root: phases.RootBarePod}
	p.Created.Add(at(3), phases.SourceWatch)
	p.Scheduled.Add(at(43), phases.SourceEventTime)
	c := phases.Container{Name: "web", Image: "busybox", Cache: "cold"}
	c.PullStarted.Add(at(800), phases.SourceEventName)
	c.PullFinished.Add(at(5800), phases.SourceEventName)
	c.Started.Add(at(6000), phases.SourceEventName)
	p.Containers = []phases.Container{c}
	p.ContainersReady.Add(at(6500), phases.SourceWatch)
	p.Ready.Add(at(6500), phases.SourceWatch)
	return phases.Build(p, phases.Options{})
}

func TestExport(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, "v0.1.0")
	m.Export(trace())
	want := `
# HELP readyspan_image_pulls_total Image pulls of traced Pods' containers by result: pulled (the image was fetched; once per container), present (already on the node; once per container), failed (each pull attempt that failed).
# TYPE readyspan_image_pulls_total counter
readyspan_image_pulls_total{result="failed"} 0
readyspan_image_pulls_total{result="present"} 0
readyspan_image_pulls_total{result="pulled"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "readyspan_image_pulls_total"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(m.phaseDuration); n != 3 {
		t.Fatalf("%d phase series, want scheduling, kubelet and status (submit, apiserver and a bare Pod's controllers are not measured)", n)
	}
	if got := testutil.ToFloat64(m.tracesDone.WithLabelValues("ready")); got != 1 {
		t.Fatalf("traces_total{outcome=ready} = %v", got)
	}
	// Exemplars carry the trace ID, so a slow bucket links to its trace.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeOpenMetrics))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(buf.String(), `readyspan_image_pull_duration_seconds_bucket{le="5.0"} 1 # {trace_id="9cade20b81ea4be9bdc9d3f2d8d8b69f"} 5.0`) {
		t.Fatalf("no exemplar with the trace ID on the pull histogram:\n%s", grep(buf.String(), "readyspan_image_pull_duration"))
	}
	for _, line := range strings.Split(buf.String(), "\n") {
		if strings.Contains(line, "web-1") || strings.Contains(line, "busybox") {
			t.Fatalf("a Pod or image name is a label: %s", line)
		}
	}
}

func TestInPhase(t *testing.T) {
	m := New(prometheus.NewRegistry(), "dev")
	m.InPhase(map[string]int{"kubelet": 2})
	m.InPhase(map[string]int{"scheduling": 1})
	if got := testutil.ToFloat64(m.podsInPhase.WithLabelValues("kubelet")); got != 0 {
		t.Fatalf("stale kubelet gauge %v", got)
	}
	if got := testutil.ToFloat64(m.inFlight); got != 1 {
		t.Fatalf("in flight %v", got)
	}
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestSelfCounters: a watch error is not a restart (the reflector reports restarts on its
// own), and unknown message formats are counted by reason.
func TestSelfCounters(t *testing.T) {
	m := New(prometheus.NewRegistry(), "dev")
	m.WatchError("pods", "forbidden")
	if n := testutil.CollectAndCount(m.watchRestarts); n != 0 {
		t.Fatalf("a watch error made %d restart series", n)
	}
	m.WatchRestart("pods", "relist")
	m.WatchRestart("pods", "watch_closed")
	m.WatchRestart("pods", "watch_closed")
	if got := testutil.ToFloat64(m.watchRestarts.WithLabelValues("pods", "watch_closed")); got != 2 {
		t.Fatalf("watch_closed restarts %v", got)
	}
	m.Unparsed("Pulled")
	if got := testutil.ToFloat64(m.unparsed.WithLabelValues("Pulled")); got != 1 {
		t.Fatalf("unparsed{Pulled} %v", got)
	}
}

// TestExportInconsistent: a trace whose stamps are out of order is counted once per cause, by
// the cause alone (no Pod or container name), and feeds no histogram.
func TestExportInconsistent(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, "v0.1.0")
	m.Export(trace())
	bad := trace()
	p := *bad.Pod
	p.Ready = phases.Times{{At: phases.InstantOf(p.Created[0].Time().AddDate(-30, 0, 0)), Source: phases.SourceStatus}}
	c := p.Containers[0]
	c.PullFinished = phases.Times{{At: phases.InstantOf(p.Created[0].Time().AddDate(-30, 0, 0)), Source: phases.SourceEventName}}
	p.Containers = []phases.Container{c}
	bad = phases.Build(&p, phases.Options{})
	if len(bad.Summary.InconsistencyCauses) < 2 {
		t.Fatalf("causes %q, want the Pod's Ready and the container's pull", bad.Summary.InconsistencyCauses)
	}
	m.Export(bad)
	want := `
# HELP readyspan_traces_inconsistent_total Traces whose timestamps put a milestone before one that must precede it (marked readyspan.time.inconsistent and left out of the histograms), by cause: the two milestones, as in created_before_replicaset_scaled_up (a container's steps: container_…). Each trace counts once per cause. On a healthy cluster none is counted: each is a bug in readyspan or a clock to look at.
# TYPE readyspan_traces_inconsistent_total counter
readyspan_traces_inconsistent_total{cause="container_pull_finished_before_pull_started"} 1
readyspan_traces_inconsistent_total{cause="ready_before_scheduled"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "readyspan_traces_inconsistent_total"); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "readyspan_pod_startup_duration_seconds" {
			if n := mf.GetMetric()[0].GetHistogram().GetSampleCount(); n != 1 {
				t.Errorf("startup histogram has %d samples, want only the consistent trace's", n)
			}
		}
	}
}
