package prometheus

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/tracer"
)

// traceOf is trace() for a Pod of the namespace and workload.
func traceOf(namespace, workload string) *phases.Trace {
	t := trace()
	p := *t.Pod
	p.Namespace, p.Workload = namespace, workload
	t.Pod = &p
	return t
}

// TestPodLabelsOffByDefault: without --metrics-pod-labels the Pod histograms carry phase and
// outcome only, as before.
func TestPodLabelsOffByDefault(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, "dev", tracer.Kinds.RolloutKinds(), Options{LabelLimit: DefaultLabelLimit})
	m.Export(traceOf("team-a", "web"))
	want := `
# HELP readyspan_pod_startup_duration_seconds Pod created to Ready (and ready in its Services' endpoints), for Pods that became Ready.
# TYPE readyspan_pod_startup_duration_seconds histogram
`
	got := gatherText(t, reg)
	for _, line := range strings.Split(got, "\n") {
		if strings.Contains(line, "team-a") || strings.Contains(line, `workload="web"`) {
			t.Fatalf("a namespace or workload label without the flag: %s", line)
		}
	}
	if !strings.Contains(got, strings.TrimSpace(want)) || !strings.Contains(got, "readyspan_pod_startup_duration_seconds_count 1\n") {
		t.Fatalf("the startup histogram is not one unlabelled series:\n%s", grep(got, "readyspan_pod_startup_duration_seconds"))
	}
	if n := testutil.CollectAndCount(m.labelOverflow); n != 0 {
		t.Fatalf("%d overflow series with no opt-in label", n)
	}
}

// TestPodLabelsCapped: with both labels and a cap of 2, the first two namespaces and the first
// two workloads keep their names; a third namespace is "other" with workload "other", a third
// workload of a kept namespace is "other" in that namespace, and each is counted.
func TestPodLabelsCapped(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, "dev", tracer.Kinds.RolloutKinds(), Options{PodLabels: []string{LabelWorkload, LabelNamespace}, LabelLimit: 2})
	for _, p := range [][2]string{
		{"team-a", "web"}, {"team-a", "web"}, {"team-b", "api"},
		{"team-b", "worker"}, // a third workload: over the cap
		{"team-c", "web"},    // a third namespace: over the cap
		{"team-a", "web"},    // kept: it has its place
	} {
		m.Export(traceOf(p[0], p[1]))
	}
	count := func(ns, wl string) float64 {
		t.Helper()
		return histCount(t, reg, "readyspan_pod_startup_duration_seconds", map[string]string{"namespace": ns, "workload": wl})
	}
	for _, c := range []struct {
		ns, wl string
		want   float64
	}{
		{"team-a", "web", 3}, {"team-b", "api", 1}, {"team-b", "other", 1}, {"other", "other", 1},
		{"team-b", "worker", 0}, {"team-c", "web", 0}, {"other", "web", 0},
	} {
		if got := count(c.ns, c.wl); got != c.want {
			t.Errorf("startup{namespace=%q,workload=%q} count %v, want %v", c.ns, c.wl, got, c.want)
		}
	}
	if n := testutil.CollectAndCount(m.startup); n != 4 {
		t.Errorf("%d startup series, want 4 (two workloads, team-b's other, other/other)", n)
	}
	// Every Pod histogram carries them, phases after phase and outcome.
	if got := histCount(t, reg, "readyspan_phase_duration_seconds", map[string]string{"phase": "kubelet", "outcome": "ready", "namespace": "other", "workload": "other"}); got != 1 {
		t.Errorf("phase_duration{kubelet,ready,other,other} count %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.labelOverflow.WithLabelValues(LabelNamespace)); got != 1 {
		t.Errorf("namespace overflow %v, want 1 (team-c)", got)
	}
	if got := testutil.ToFloat64(m.labelOverflow.WithLabelValues(LabelWorkload)); got != 2 {
		t.Errorf("workload overflow %v, want 2 (team-b/worker, and team-c's, which has no namespace of its own)", got)
	}
}

// TestPodLabelsNamespaceOnly: the namespace alone, with no workload label on any histogram.
func TestPodLabelsNamespaceOnly(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, "dev", tracer.Kinds.RolloutKinds(), Options{PodLabels: []string{LabelNamespace}, LabelLimit: 1})
	m.Export(traceOf("team-a", "web"))
	m.Export(traceOf("team-a", "api"))
	m.Export(traceOf("team-b", "web"))
	if got := histCount(t, reg, "readyspan_pod_startup_sli_duration_seconds", map[string]string{"namespace": "team-a"}); got != 2 {
		t.Errorf("sli{namespace=team-a} count %v, want 2", got)
	}
	if got := histCount(t, reg, "readyspan_pod_startup_duration_seconds", map[string]string{"namespace": "other"}); got != 1 {
		t.Errorf("startup{namespace=other} count %v, want 1", got)
	}
	for _, name := range []string{"readyspan_phase_duration_seconds", "readyspan_pod_startup_duration_seconds", "readyspan_pod_startup_sli_duration_seconds"} {
		if lines := grep(gatherText(t, reg), name); strings.Contains(lines, "workload=") {
			t.Errorf("a workload label that was not asked for:\n%s", lines)
		}
	}
	if n := testutil.CollectAndCount(m.labelOverflow); n != 1 {
		t.Errorf("%d overflow series, want the namespace's only", n)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, c := range []struct {
		o   Options
		err string
	}{
		{Options{}, ""},
		{Options{LabelLimit: 0}, ""},
		{Options{PodLabels: []string{"namespace", "workload"}, LabelLimit: 50}, ""},
		{Options{PodLabels: []string{"pod"}, LabelLimit: 50}, `unknown label "pod" (allowed: namespace, workload)`},
		{Options{PodLabels: []string{"namespace", "namespace"}, LabelLimit: 50}, `"namespace" given twice`},
		{Options{PodLabels: []string{"namespace"}, LabelLimit: 0}, "--metrics-label-limit must be at least 1"},
	} {
		err := c.o.Validate()
		if (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%+v: error %v, want %q", c.o, err, c.err)
		}
	}
}

// gatherText is the registry's exposition in the text format.
func gatherText(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}
