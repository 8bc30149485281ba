package prometheus

import (
	"bytes"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/tracer"
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
	m := New(reg, "v0.1.0", tracer.Kinds.RolloutKinds(), Options{})
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
	m := New(prometheus.NewRegistry(), "dev", tracer.Kinds.RolloutKinds(), Options{})
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
	m := New(prometheus.NewRegistry(), "dev", tracer.Kinds.RolloutKinds(), Options{})
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
	m := New(reg, "v0.1.0", tracer.Kinds.RolloutKinds(), Options{})
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

// replayed rebuilds the traces of a real-node capture (tracer/testdata/real-node) as `readyspan
// replay` does, by Pod name. The failure captures end before --fail-after, so their Pods are
// in progress; ended reopens a trace's observations with the outcome the tracer gives it at its
// deadline (the reason stays the tracer's unless one is given), as Correlator.finish does.
func replayed(t *testing.T, run string) map[string]*phases.Trace {
	t.Helper()
	deltas, err := tracer.Kinds.LoadRecording(filepath.Join("..", "..", "tracer", "testdata", "real-node", run))
	if err != nil {
		t.Fatal(err)
	}
	traces := map[string]*phases.Trace{}
	c := tracer.New(tracer.Config{Backfill: true}, tracer.SinkFunc(func(tr *phases.Trace) { traces[tr.Pod.Name] = tr }), nil, nil)
	tracer.Replay(c, deltas)
	if len(traces) == 0 {
		t.Fatalf("%s rebuilt no trace", run)
	}
	return traces
}

func ended(t *testing.T, tr *phases.Trace, outcome phases.Outcome, reason string) *phases.Trace {
	t.Helper()
	if tr == nil {
		t.Fatal("the capture has no such Pod")
	}
	p := *tr.Pod
	p.Outcome = outcome
	if reason != "" {
		p.FailureReason = reason
	}
	if outcome == phases.OutcomeFailed {
		p.StuckPhase = ""
	}
	out := phases.Build(&p, phases.Options{})
	if out.Summary.Outcome != outcome {
		t.Fatalf("%s: outcome %s, want %s", p.Name, out.Summary.Outcome, outcome)
	}
	return out
}

// TestExportFailed: a trace exported as failed counts once under its reason; a reason outside
// phases.FailureReasons (a failed Pod's status.reason such as Evicted) counts as "other" and
// never becomes a label value; stuck, in-progress and ready traces do not count, even with a
// failure reason. Every reason series exists before the first failure, so alerts over
// increase() see it.
func TestExportFailed(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, "dev", tracer.Kinds.RolloutKinds(), Options{})
	if n := testutil.CollectAndCount(m.podsFailed); n != len(phases.FailureReasons)+1 {
		t.Fatalf("%d failed series before any failure, want one per known reason and other", n)
	}
	failures := replayed(t, "run4-failures")
	crasher := failures["crasher-79699b899c-nzpp2"]
	if got := crasher.Summary.FailureReason; got != "CrashLoopBackOff" {
		t.Fatalf("the capture's crasher fails with %q, want CrashLoopBackOff", got)
	}
	m.Export(ended(t, crasher, phases.OutcomeFailed, ""))
	m.Export(ended(t, crasher, phases.OutcomeFailed, "Evicted"))
	// Not failed: the capture's Pods as they are (in progress), stuck, and Ready ones.
	for _, tr := range failures {
		m.Export(tr)
		m.Export(ended(t, tr, phases.OutcomeStuck, ""))
	}
	ready := replayed(t, "run2-ifnotpresent")
	for _, tr := range ready {
		if tr.Summary.Outcome != phases.OutcomeReady {
			t.Fatalf("%s: outcome %s in a capture of Pods that got Ready", tr.Pod.Name, tr.Summary.Outcome)
		}
		m.Export(tr)
	}
	want := map[string]float64{"CrashLoopBackOff": 1, phases.FailureReasonOther: 1}
	for _, r := range append(slices.Clone(phases.FailureReasons), phases.FailureReasonOther) {
		if got := testutil.ToFloat64(m.podsFailed.WithLabelValues(r)); got != want[r] {
			t.Errorf(`readyspan_pod_startups_failed_total{reason=%q} = %v, want %v`, r, got, want[r])
		}
	}
	if n := testutil.CollectAndCount(m.podsFailed); n != len(phases.FailureReasons)+1 {
		t.Errorf("%d failed series, want only the known reasons and other", n)
	}
	if got := testutil.ToFloat64(m.podsStuck.WithLabelValues(phases.PhaseKubelet)); got == 0 {
		t.Error("the stuck traces were not counted as stuck")
	}
}

// TestExportSchedulingWaits: a gated Pod's gate, observed at both ends, is a wait of its own; a
// Pod without one observes none.
func TestExportSchedulingWaits(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, "v0.1.0", tracer.Kinds.RolloutKinds(), Options{})
	m.Export(trace())
	if n := testutil.CollectAndCount(m.schedWaits); n != 0 {
		t.Fatalf("%d wait series for a Pod that waited for nothing", n)
	}
	t0 := time.Date(2026, 11, 30, 8, 41, 34, 0, time.UTC)
	p := &phases.Pod{UID: "5f0d3c1e-0000-4000-8000-000000000001", Name: "gated", Namespace: "default", Root: phases.RootBarePod, Gated: true}
	p.Created.Add(t0, phases.SourceWatch)
	p.GatesRemoved.Add(t0.Add(4200*time.Millisecond), phases.SourceWatch)
	p.Scheduled.Add(t0.Add(4300*time.Millisecond), phases.SourceEventTime)
	p.Ready.Add(t0.Add(6*time.Second), phases.SourceWatch)
	m.Export(phases.Build(p, phases.Options{}))
	want := `
# HELP readyspan_scheduling_wait_duration_seconds Waits within the scheduling phase that were not the scheduler's, by wait: gated (created to the last scheduling gate removed), node (no node fitted to the new Node the Pod was bound to turning Ready). The scheduling phase's length includes them.
# TYPE readyspan_scheduling_wait_duration_seconds histogram
`
	var buf strings.Builder
	buf.WriteString(want)
	cum := 0
	for _, b := range Buckets {
		if b >= 4.2 {
			cum = 1
		}
		buf.WriteString(`readyspan_scheduling_wait_duration_seconds_bucket{wait="gated",le="` + strconv.FormatFloat(b, 'g', -1, 64) + `"} ` + strconv.Itoa(cum) + "\n")
	}
	buf.WriteString(`readyspan_scheduling_wait_duration_seconds_bucket{wait="gated",le="+Inf"} 1` + "\n")
	buf.WriteString(`readyspan_scheduling_wait_duration_seconds_sum{wait="gated"} 4.2` + "\n")
	buf.WriteString(`readyspan_scheduling_wait_duration_seconds_count{wait="gated"} 1` + "\n")
	if err := testutil.GatherAndCompare(reg, strings.NewReader(buf.String()), "readyspan_scheduling_wait_duration_seconds"); err != nil {
		t.Fatal(err)
	}
}
