//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// traceparentKey is KEP-5915's annotation.
const traceparentKey = "tracing.k8s.io/traceparent"

// pipelineService is the service name of the test's own span: a CI job's.
const pipelineService = "readyspan-e2e-pipeline"

// readyWitness is the test's own watch of a namespace's Pods: the UIDs it saw turn Ready.
type readyWitness struct {
	mu    sync.Mutex
	ready map[string]bool // Pod UID
}

func (e *Env) witnessReady(t *testing.T, ns string) *readyWitness {
	t.Helper()
	w := &readyWitness{ready: map[string]bool{}}
	pods, err := e.Kube.CoreV1().Pods(ns).Watch(Ctx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("watch pods: %v", err)
	}
	go func() {
		for ev := range pods.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type != watch.Deleted && PodReady(p) {
				w.mu.Lock()
				w.ready[string(p.UID)] = true
				w.mu.Unlock()
			}
		}
	}()
	return w
}

func (w *readyWitness) uids() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for uid := range w.ready {
		out = append(out, uid)
	}
	sort.Strings(out)
	return out
}

// pipelineTracer is the real OpenTelemetry SDK exporting to the suite's Jaeger over OTLP/HTTP,
// as a CI job's would: READYSPAN_E2E_JAEGER_OTLP_URL, default Jaeger's OTLP/HTTP port.
func pipelineTracer(t *testing.T) *sdktrace.TracerProvider {
	t.Helper()
	exp, err := otlptracehttp.New(context.Background(),
		otlptracehttp.WithEndpointURL(getenv("READYSPAN_E2E_JAEGER_OTLP_URL", "http://127.0.0.1:4318")+"/v1/traces"))
	if err != nil {
		t.Fatalf("OTLP exporter: %v", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", pipelineService))))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp
}

// childOf is the span ID a span's CHILD_OF reference names, "" for none.
func childOf(s *Span) string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// followsFrom are a span's FOLLOWS_FROM references (OTLP links) as trace/span.
func followsFrom(s *Span) []string {
	var out []string
	for _, r := range s.References {
		if r.RefType == "FOLLOWS_FROM" {
			out = append(out, r.TraceID+"/"+r.SpanID)
		}
	}
	return out
}

// TestTraceContext: a CI job starts a span with the real OTel SDK, creates a Deployment, then
// annotates it with the span's context (kubectl apply, then kubectl annotate: the hard order),
// and ends its span. In Jaeger the rollout's root is in the job's trace, under its span, and its
// links lead to every Pod's own trace, Ready, exactly the Pods the test saw turn Ready. A second
// rollout without a new annotation keeps its own trace and only links to the job's; a malformed
// annotation leaves a trace as it was and is counted.
func TestTraceContext(t *testing.T) {
	e := Setup(t)
	ns := e.Namespace(t, "e2e-tracecontext")
	ctx := Ctx(t)
	ready := e.witnessReady(t, ns)
	tp := pipelineTracer(t)

	jobCtx, job := tp.Tracer("ci").Start(ctx, "ci.deploy")
	sc := job.SpanContext()
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(jobCtx, carrier)
	traceparent := carrier.Get("traceparent")
	if traceparent == "" {
		t.Fatal("the SDK's propagator wrote no traceparent")
	}
	const replicas = 3
	e.createDeployment(t, ns, webDeployment("web", replicas))
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{traceparentKey: traceparent}}})
	if _, err := e.Kube.AppsV1().Deployments(ns).Patch(ctx, "web", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("annotate the Deployment: %v", err)
	}
	e.WaitPodsReady(t, ns, "app=web", replicas, 3*time.Minute)
	job.End()
	if err := tp.ForceFlush(ctx); err != nil {
		t.Fatalf("export the job's span: %v", err)
	}
	var firstPods []string
	Eventually(t, 30*time.Second, "the test's own watch to see the Pods Ready", func() (bool, error) {
		firstPods = ready.uids()
		return len(firstPods) == replicas, fmt.Errorf("%d of %d", len(firstPods), replicas)
	})

	// The job's trace holds its span and, under it, the rollout's root.
	jobTrace, rollout := e.rolloutUnder(t, sc.TraceID().String(), sc.SpanID().String(), 3*time.Minute)
	t.Logf("job trace %s: %d spans; rollout: %s", jobTrace.TraceID, len(jobTrace.Spans), rollout.StrTag("readyspan.rollout.summary"))
	if rel := rollout.StrTag("readyspan.trace_context.relation"); rel != "child" {
		t.Errorf("relation %q, want child", rel)
	}
	// From the rollout, its links lead to every Pod's own trace, whose root is Ready.
	linked := map[string]bool{}
	for _, s := range jobTrace.Descendants(rollout) {
		if s.OperationName != "rollout.pod" {
			continue
		}
		for _, l := range followsFrom(s) {
			linked[strings.Split(l, "/")[0]] = true
		}
	}
	var want []string
	for _, uid := range firstPods {
		want = append(want, TraceID(uid))
	}
	if got := sortedKeys(linked); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the rollout links to the Pod traces %v, the test saw the Pods %v turn Ready", got, want)
	}
	traces := e.WaitTraces(t, firstPods, 2*time.Minute, func(tr *Trace) bool { return tr.Root() != nil })
	for uid, tr := range traces {
		root := tr.Root()
		if o := root.StrTag("readyspan.outcome"); o != "ready" {
			t.Errorf("Pod %s: outcome %q, want ready", uid, o)
		}
		if !containsRef(followsFrom(root), sc.TraceID().String()+"/"+sc.SpanID().String()) {
			t.Errorf("Pod %s: its root links to %v, not to the job's span", uid, followsFrom(root))
		}
	}

	// A second rollout without a new annotation: its own trace, linked to the job's span only.
	before := time.Now()
	tmpl := []byte(`{"spec":{"template":{"metadata":{"annotations":{"readyspan.dev/e2e-change":"1"}}}}}`)
	updated, err := e.Kube.AppsV1().Deployments(ns).Patch(ctx, "web", types.StrategicMergePatchType, tmpl, metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("patch the template: %v", err)
	}
	second, root2 := e.rolloutRoot(t, ns, "web", updated.Generation, 4*time.Minute)
	if second.TraceID == jobTrace.TraceID || childOf(root2) != "" {
		t.Errorf("the second rollout (%s after the change) is in trace %s under %q: put under the job's trace", time.Since(before).Round(time.Second), second.TraceID, childOf(root2))
	}
	if !containsRef(followsFrom(root2), sc.TraceID().String()+"/"+sc.SpanID().String()) || root2.StrTag("readyspan.trace_context.relation") != "link" {
		t.Errorf("the second rollout links to %v (relation %q), want a link to the job's span", followsFrom(root2), root2.StrTag("readyspan.trace_context.relation"))
	}
	e.checkMalformedIgnored(t, ns)
}

// rolloutRoot waits for the root of the Deployment's rollout of generation gen, wherever it is:
// in a trace of its own or, wrongly, beside another rollout in the job's trace (rolloutTrace
// reads one rollout per trace).
func (e *Env) rolloutRoot(t *testing.T, ns, name string, gen int64, timeout time.Duration) (*Trace, *Span) {
	t.Helper()
	var tr *Trace
	var root *Span
	Eventually(t, timeout, fmt.Sprintf("the rollout of %s/%s generation %d", ns, name, gen), func() (bool, error) {
		traces, err := e.Jaeger.FindTraces(context.Background(), "readyspan", map[string]string{"k8s.deployment.name": name, "k8s.namespace.name": ns}, 50)
		if err != nil {
			return false, err
		}
		for _, got := range traces {
			for _, s := range got.FindAll("workload.rollout") {
				if g, _ := s.Tag("readyspan.rollout.generation"); fmt.Sprint(g) == fmt.Sprint(gen) {
					tr, root = got, s
					return true, nil
				}
			}
		}
		return false, fmt.Errorf("%d traces of %s, no rollout of generation %d", len(traces), name, gen)
	})
	return tr, root
}

// rolloutUnder waits for the job's trace to hold a workload.rollout span whose parent is the
// job's span, and returns the trace and that span.
func (e *Env) rolloutUnder(t *testing.T, traceID, spanID string, timeout time.Duration) (*Trace, *Span) {
	t.Helper()
	var tr *Trace
	var root *Span
	Eventually(t, timeout, "the rollout's root in the job's trace "+traceID, func() (bool, error) {
		got, err := e.Jaeger.Trace(context.Background(), traceID)
		if err != nil || got == nil {
			return false, err
		}
		var job *Span
		for _, s := range got.Spans {
			if s.SpanID == spanID {
				job = s
			}
		}
		if job == nil || got.Service(job) != pipelineService {
			return false, fmt.Errorf("the job's span is not in its trace yet")
		}
		var roots []*Span
		for _, s := range got.FindAll("workload.rollout") {
			if childOf(s) == spanID {
				roots = append(roots, s)
			}
		}
		if len(roots) > 1 {
			t.Fatalf("%d rollouts under the job's span, want one", len(roots))
		}
		if len(roots) == 0 {
			return false, fmt.Errorf("%d spans, no rollout under the job's span", len(got.Spans))
		}
		tr, root = got, roots[0]
		return true, nil
	})
	return tr, root
}

// checkMalformedIgnored creates a Deployment whose manifest carries a malformed traceparent:
// its rollout's trace is its own, links to no context, and readyspan counts the value.
func (e *Env) checkMalformedIgnored(t *testing.T, ns string) {
	t.Helper()
	const q = `sum(readyspan_trace_context_ignored_total{reason="malformed"})`
	before, ok, err := e.Prom.Value(context.Background(), q)
	if err != nil || !ok {
		t.Fatalf("%s: %v (found %v)", q, err, ok)
	}
	d := webDeployment("bad", 1)
	d.Annotations = map[string]string{traceparentKey: "00-4BF92F3577B34DA6A3CE929D0E0E4737-00f067aa0ba902b7-01"}
	e.createDeployment(t, ns, d)
	tr := e.rolloutTrace(t, "Deployment", ns, "bad", 1, 3*time.Minute)
	root := tr.Find("workload.rollout")
	if childOf(root) != "" || root.HasTag("readyspan.trace_context.relation") {
		t.Errorf("the malformed context was taken: parent %q, relation %q", childOf(root), root.StrTag("readyspan.trace_context.relation"))
	}
	for _, l := range root.References {
		if l.RefType == "FOLLOWS_FROM" && strings.EqualFold(l.TraceID, "4bf92f3577b34da6a3ce929d0e0e4737") {
			t.Errorf("the rollout links to the malformed context")
		}
	}
	Eventually(t, time.Minute, "the malformed value counted once", func() (bool, error) {
		v, _, err := e.Prom.Value(context.Background(), q)
		if v > before+1 {
			t.Fatalf("counted %v times", v-before)
		}
		return v == before+1, err
	})
}

func containsRef(refs []string, want string) bool {
	for _, r := range refs {
		if r == want {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
