//go:build e2e

// Package e2e holds readyspan's end-to-end tests. They run against the real local cluster
// (deploy/local: make cluster-up; make e2e brings it up when needed and runs them) and judge
// readyspan only through real components: objects are applied with client-go, and what readyspan
// produced is read back from Jaeger's HTTP query API and Prometheus' HTTP API, never from
// readyspan itself. Each scenario works in its own namespace. Tests run one after the other (none
// calls t.Parallel): some compare Prometheus counters before and after, and one restarts readyspan.
//
//	make e2e                                        # everything, bringing the cluster up if needed
//	go test -tags e2e -count=1 -run TestColdPull -v ./test/e2e/
//
// # Shared harness (this file; incluster_test.go uses it too — keep these names stable)
//
//	Setup(t) *Env                         the local cluster's clients; fails when it is not up
//	Missing(t, format, args...)           fail (never skip, unless READYSPAN_E2E_ALLOW_SKIP=1) on a missing prerequisite
//	Env.Kube, Env.Jaeger, Env.Prom        client-go clientset, Jaeger and Prometheus API clients
//	Env.Root, Env.Kubeconfig, Env.State   repository root, admin kubeconfig, .local/ directory
//	(*Env).Namespace(t, prefix)           a fresh namespace, deleted when the test ends
//	(*Env).WaitPodsReady(t, ns, selector, n, timeout)
//	(*Env).PodEvents(t, ns, pod)          the Pod's events (events.k8s.io/v1: µs eventTime)
//	(*Env).WaitTrace(t, uid, timeout, done)   a Pod's trace from Jaeger, once done(trace) holds
//	(*Env).WaitTraces(t, uids, timeout, done) the traces of several Pods, with one deadline
//	(*Env).RestartReadyspan(t)             restart the local `readyspan run` (deploy/local/scripts/readyspan.sh)
//	(*Env).LoadRules(t, name, groups)     an extra Prometheus rule file, reloaded, removed at the end
//	Jaeger: Trace(ctx, id), FindTraces(ctx, service, tags, limit)
//	Trace: Root(), Find(name), FindAll(name), Children(s), Descendants(s), Service(s)
//	Span: StartTime(), EndTime(), Duration(), Tag(key), StrTag(key), IsError(), StatusMessage(), Log(name)
//	Prometheus: Query(ctx, q), Value(ctx, q), Rules(ctx), Alerts(ctx), Reload(ctx)
//	TraceID(uid)                          a Pod UID as readyspan's trace ID (dashes removed)
//	Eventually(t, timeout, what, cond)    poll cond every 500 ms until true, or fail
//	LocalPodLabels(extra)                 labels every Pod of these tests carries (see E2ELabel)
//
// Environment (all optional): READYSPAN_E2E_KUBECONFIG (default .local/kubeconfig),
// READYSPAN_E2E_JAEGER_URL (default http://127.0.0.1:16686), READYSPAN_E2E_PROMETHEUS_URL (default
// http://127.0.0.1:9090).
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Facts of the local cluster (deploy/local/scripts/lib.sh).
const (
	NodeName      = "readyspan-node"
	Registry      = "127.0.0.1:5000"
	BusyboxImage  = Registry + "/readyspan/busybox:v1"
	PauseImage    = Registry + "/readyspan/pause:v1"
	ColdRepo      = Registry + "/readyspan/cold" // every new tag is a cold pull; blobs wait 2 s
	MissingImage  = Registry + "/readyspan/does-not-exist:v1"
	UserAgent     = "readyspan-e2e" // the tests' client: the service name of their Pods' submit spans
	E2ELabel      = "readyspan.dev/e2e"
	E2ELabelValue = "local"

	defaultKubeconfig = ".local/kubeconfig"
	defaultJaeger     = "http://127.0.0.1:16686"
	defaultPrometheus = "http://127.0.0.1:9090"
)

// The six phase spans, in causal order, and the service name each is reported under.
var (
	Phases        = []string{"submit", "apiserver", "controllers", "scheduling", "kubelet", "status"}
	PhaseServices = map[string]string{
		"submit":      UserAgent,
		"apiserver":   "kube-apiserver",
		"controllers": "kube-controller-manager",
		"scheduling":  "kube-scheduler",
		"kubelet":     "kubelet",
		"status":      "kubelet",
	}
)

// Env is the local cluster as the tests see it.
type Env struct {
	Root       string // repository root
	State      string // .local/
	Kubeconfig string
	Rest       *rest.Config
	Kube       kubernetes.Interface
	Jaeger     *Jaeger
	Prom       *Prometheus
}

func getenv(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// repoRoot walks up from the test's directory to readyspan's go.mod.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			bytes.Contains(data, []byte("module github.com/readyspan/readyspan\n")) {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("readyspan's go.mod not found above the test directory")
		}
		dir = parent
	}
}

// Missing fails the test because a prerequisite is missing, saying what is missing and how to get
// it. A missing prerequisite is a failure, not a skip: otherwise `make e2e` could pass without a
// single end-to-end assertion. A person running single tests by hand without the cluster may opt
// out with READYSPAN_E2E_ALLOW_SKIP=1; make e2e never sets it and fails if any test skipped.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := "missing prerequisite: " + fmt.Sprintf(format, args...)
	if os.Getenv("READYSPAN_E2E_ALLOW_SKIP") == "1" {
		t.Skip(msg + " (skipped: READYSPAN_E2E_ALLOW_SKIP=1)")
	}
	t.Fatal(msg)
}

// Setup returns the local cluster's clients. It fails the test when the cluster is not up (see
// Missing) or when Jaeger or Prometheus does not answer.
func Setup(t testing.TB) *Env {
	t.Helper()
	root := repoRoot(t)
	e := &Env{Root: root, State: filepath.Join(root, ".local")}
	e.Kubeconfig = getenv("READYSPAN_E2E_KUBECONFIG", filepath.Join(root, defaultKubeconfig))
	if _, err := os.Stat(e.Kubeconfig); err != nil {
		Missing(t, "the local cluster's kubeconfig (make cluster-up): %v", err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", e.Kubeconfig)
	if err != nil {
		t.Fatalf("kubeconfig %s: %v", e.Kubeconfig, err)
	}
	cfg.UserAgent = UserAgent
	cfg.QPS, cfg.Burst = 50, 100
	e.Rest = cfg
	if e.Kube, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := e.Kube.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{}); err != nil {
		Missing(t, "node %s of the local cluster did not answer within 5s (make cluster-up; make cluster-status): %v", NodeName, err)
	}
	e.Jaeger = &Jaeger{URL: getenv("READYSPAN_E2E_JAEGER_URL", defaultJaeger)}
	e.Prom = &Prometheus{URL: getenv("READYSPAN_E2E_PROMETHEUS_URL", defaultPrometheus)}
	if _, err := e.Jaeger.Services(ctx); err != nil {
		t.Fatalf("Jaeger's query API: %v", err)
	}
	if _, err := e.Prom.Query(ctx, "up"); err != nil {
		t.Fatalf("Prometheus' API: %v", err)
	}
	return e
}

// Ctx is a context for one test, cancelled when it ends.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}

// Eventually polls cond every 500 ms until it returns true, and fails the test after timeout
// with what and cond's last error.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last error
	for {
		ok, err := cond()
		if ok {
			return
		}
		last = err
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s (last error: %v)", timeout, what, last)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TraceID is readyspan's trace ID for a Pod: its UID without dashes.
func TraceID(uid string) string { return strings.ReplaceAll(uid, "-", "") }

// LocalPodLabels returns extra plus the label every Pod of these tests carries: make e2e runs
// the local readyspan with --selector on it, so it ignores other tests' workloads.
func LocalPodLabels(extra map[string]string) map[string]string {
	l := map[string]string{E2ELabel: E2ELabelValue}
	for k, v := range extra {
		l[k] = v
	}
	return l
}

// Namespace creates a namespace named prefix-<random>, waits for its default ServiceAccount, and
// deletes it when the test ends.
func (e *Env) Namespace(t testing.TB, prefix string) string {
	t.Helper()
	ctx := context.Background()
	ns, err := e.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: prefix + "-", Labels: map[string]string{E2ELabel: E2ELabelValue},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	name := ns.Name
	t.Cleanup(func() {
		if os.Getenv("READYSPAN_E2E_KEEP") != "" {
			return
		}
		err := e.Kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Logf("delete namespace %s: %v", name, err)
		}
	})
	Eventually(t, 30*time.Second, "the default ServiceAccount of "+name, func() (bool, error) {
		_, err := e.Kube.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, err
	})
	return name
}

// WaitPodsReady waits until n Pods matching selector in ns are Ready, and returns them.
func (e *Env) WaitPodsReady(t testing.TB, ns, selector string, n int, timeout time.Duration) []corev1.Pod {
	t.Helper()
	var ready []corev1.Pod
	Eventually(t, timeout, fmt.Sprintf("%d Ready Pods %q in %s", n, selector, ns), func() (bool, error) {
		list, err := e.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		ready = ready[:0]
		for _, p := range list.Items {
			if PodReady(&p) && p.DeletionTimestamp == nil {
				ready = append(ready, p)
			}
		}
		return len(ready) >= n, fmt.Errorf("%d of %d Ready", len(ready), n)
	})
	return ready
}

// PodReady reports the Pod's Ready condition.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// PodEvents lists the events regarding a Pod through events.k8s.io/v1, oldest first. Scheduler
// events carry a µs eventTime there; the kubelet's carry deprecatedLastTimestamp (1 s).
func (e *Env) PodEvents(t testing.TB, ns, pod string) []eventsv1.Event {
	t.Helper()
	list, err := e.Kube.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("regarding.name", pod).String(),
	})
	if err != nil {
		t.Fatalf("events of %s/%s: %v", ns, pod, err)
	}
	sort.SliceStable(list.Items, func(i, j int) bool { return EventTime(&list.Items[i]).Before(EventTime(&list.Items[j])) })
	return list.Items
}

// EventTime is an event's most precise time: eventTime (µs) or else its last timestamp (1 s).
func EventTime(ev *eventsv1.Event) time.Time {
	if !ev.EventTime.IsZero() {
		return ev.EventTime.Time
	}
	if ev.Series != nil && !ev.Series.LastObservedTime.IsZero() {
		return ev.Series.LastObservedTime.Time
	}
	return ev.DeprecatedLastTimestamp.Time
}

// WaitTrace waits until Jaeger has the trace of the Pod with this UID and done(trace) holds
// (nil: any trace), and returns it.
func (e *Env) WaitTrace(t testing.TB, uid string, timeout time.Duration, done func(*Trace) bool) *Trace {
	t.Helper()
	var tr *Trace
	Eventually(t, timeout, "Jaeger trace "+TraceID(uid), func() (bool, error) {
		var err error
		tr, err = e.Jaeger.Trace(context.Background(), TraceID(uid))
		if err != nil || tr == nil {
			return false, err
		}
		return done == nil || done(tr), fmt.Errorf("trace present but not complete: %s", tr.Summary())
	})
	return tr
}

// WaitTraces waits until Jaeger has the trace of every Pod UID and done(trace) holds for each,
// and returns them by UID. On timeout it names the Pods still missing.
func (e *Env) WaitTraces(t testing.TB, uids []string, timeout time.Duration, done func(*Trace) bool) map[string]*Trace {
	t.Helper()
	got := map[string]*Trace{}
	Eventually(t, timeout, fmt.Sprintf("the traces of %d Pods", len(uids)), func() (bool, error) {
		var missing []string
		for _, uid := range uids {
			if got[uid] != nil {
				continue
			}
			tr, err := e.Jaeger.Trace(context.Background(), TraceID(uid))
			if err != nil {
				return false, err
			}
			switch {
			case tr == nil:
				missing = append(missing, uid+" (no trace)")
			case done != nil && !done(tr):
				missing = append(missing, uid+" (incomplete: "+tr.Summary()+")")
			default:
				got[uid] = tr
			}
		}
		return len(missing) == 0, fmt.Errorf("still waiting for Pods %v", missing)
	})
	return got
}

// RestartReadyspan restarts the local `readyspan run` with the same flags. It fails the test when
// readyspan is not run by deploy/local (no PID file): make e2e always starts it.
func (e *Env) RestartReadyspan(t testing.TB) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(e.State, "run", "readyspan.pid")); err != nil {
		Missing(t, "readyspan run by deploy/local/scripts/readyspan.sh (make e2e starts it): %v", err)
	}
	cmd := exec.Command(filepath.Join(e.Root, "deploy/local/scripts/readyspan.sh"), "restart")
	cmd.Dir = e.Root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("readyspan.sh restart: %v\n%s", err, out)
	}
	t.Logf("%s", bytes.TrimSpace(out))
}

// LoadRules writes a rule file (JSON is YAML) into the directory Prometheus' config globs
// (.local/prometheus/rules.d), reloads Prometheus, and removes it again when the test ends.
func (e *Env) LoadRules(t testing.TB, name string, groups []RuleGroupFile) {
	t.Helper()
	dir := filepath.Join(e.State, "prometheus", "rules.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := json.MarshalIndent(map[string]any{"groups": groups}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t.Cleanup(func() {
		_ = os.Remove(path)
		_ = e.Prom.Reload(ctx)
	})
	if err := e.Prom.Reload(ctx); err != nil {
		t.Fatalf("reload Prometheus: %v", err)
	}
	Eventually(t, 30*time.Second, "Prometheus to load "+path, func() (bool, error) {
		groups, err := e.Prom.Rules(ctx)
		for _, g := range groups {
			if g.File == path {
				return true, nil
			}
		}
		return false, err
	})
}

// RuleGroupFile is one group of a Prometheus rule file.
type RuleGroupFile struct {
	Name  string     `json:"name"`
	Rules []RuleFile `json:"rules"`
}

// RuleFile is one alerting rule of a Prometheus rule file.
type RuleFile struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ---- HTTP ----------------------------------------------------------------------------------

var httpClient = &http.Client{Timeout: 10 * time.Second}

// getJSON GETs u into out; it returns the status code and, for non-2xx, an error with the body.
func getJSON(ctx context.Context, u string, out any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, fmt.Errorf("GET %s: %s: %s", u, resp.Status, bytes.TrimSpace(body))
	}
	if err := json.Unmarshal(body, out); err != nil {
		return resp.StatusCode, fmt.Errorf("GET %s: %w", u, err)
	}
	return resp.StatusCode, nil
}

// ---- Jaeger --------------------------------------------------------------------------------

// Jaeger is a client of Jaeger's HTTP query API (the JSON API behind its UI).
type Jaeger struct{ URL string }

// Trace is one trace as Jaeger's API returns it.
type Trace struct {
	TraceID   string             `json:"traceID"`
	Spans     []*Span            `json:"spans"`
	Processes map[string]Process `json:"processes"`
}

// Span is one span of a Jaeger trace. Times are µs since the epoch.
type Span struct {
	TraceID       string      `json:"traceID"`
	SpanID        string      `json:"spanID"`
	OperationName string      `json:"operationName"`
	References    []Reference `json:"references"`
	StartTimeUS   int64       `json:"startTime"`
	DurationUS    int64       `json:"duration"`
	Tags          []KeyValue  `json:"tags"`
	Logs          []SpanLog   `json:"logs"`
	ProcessID     string      `json:"processID"`
}

// Reference links a span to its parent.
type Reference struct {
	RefType string `json:"refType"`
	TraceID string `json:"traceID"`
	SpanID  string `json:"spanID"`
}

// KeyValue is a tag or a log field.
type KeyValue struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

// SpanLog is a span event.
type SpanLog struct {
	TimestampUS int64      `json:"timestamp"`
	Fields      []KeyValue `json:"fields"`
}

// Process is the emitting service of spans.
type Process struct {
	ServiceName string     `json:"serviceName"`
	Tags        []KeyValue `json:"tags"`
}

type jaegerResponse struct {
	Data   []*Trace `json:"data"`
	Errors []struct {
		Code int    `json:"code"`
		Msg  string `json:"msg"`
	} `json:"errors"`
}

// Services lists the services Jaeger has spans of.
func (j *Jaeger) Services(ctx context.Context) ([]string, error) {
	var r struct {
		Data []string `json:"data"`
	}
	_, err := getJSON(ctx, j.URL+"/api/services", &r)
	return r.Data, err
}

// Trace fetches a trace by ID; (nil, nil) when Jaeger has no such trace.
func (j *Jaeger) Trace(ctx context.Context, traceID string) (*Trace, error) {
	var r jaegerResponse
	code, err := getJSON(ctx, j.URL+"/api/traces/"+traceID, &r)
	if code == http.StatusNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(r.Data) == 0 {
		return nil, nil
	}
	if len(r.Data) > 1 {
		return nil, fmt.Errorf("Jaeger returned %d traces for ID %s", len(r.Data), traceID)
	}
	return r.Data[0], nil
}

// FindTraces searches traces with a span of service carrying all tags, within the last 2 hours.
func (j *Jaeger) FindTraces(ctx context.Context, service string, tags map[string]string, limit int) ([]*Trace, error) {
	q := url.Values{}
	q.Set("service", service)
	q.Set("limit", fmt.Sprint(limit))
	now := time.Now()
	q.Set("start", fmt.Sprint(now.Add(-2*time.Hour).UnixMicro()))
	q.Set("end", fmt.Sprint(now.Add(time.Minute).UnixMicro()))
	if len(tags) > 0 {
		b, _ := json.Marshal(tags)
		q.Set("tags", string(b))
	}
	var r jaegerResponse
	if _, err := getJSON(ctx, j.URL+"/api/traces?"+q.Encode(), &r); err != nil {
		return nil, err
	}
	return r.Data, nil
}

// Root is the trace's pod.startup span (nil if it has none).
func (tr *Trace) Root() *Span { return tr.Find("pod.startup") }

// Find returns the first span named name, or nil.
func (tr *Trace) Find(name string) *Span {
	for _, s := range tr.Spans {
		if s.OperationName == name {
			return s
		}
	}
	return nil
}

// FindAll returns every span named name.
func (tr *Trace) FindAll(name string) []*Span {
	var out []*Span
	for _, s := range tr.Spans {
		if s.OperationName == name {
			out = append(out, s)
		}
	}
	return out
}

// Parent returns the span's parent in the trace, or nil.
func (tr *Trace) Parent(s *Span) *Span {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			for _, p := range tr.Spans {
				if p.SpanID == r.SpanID {
					return p
				}
			}
		}
	}
	return nil
}

// Children returns the spans whose parent is s, by start time.
func (tr *Trace) Children(s *Span) []*Span {
	var out []*Span
	for _, c := range tr.Spans {
		if p := tr.Parent(c); p != nil && p.SpanID == s.SpanID {
			out = append(out, c)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].StartTimeUS < out[j].StartTimeUS })
	return out
}

// Descendants returns every span below s.
func (tr *Trace) Descendants(s *Span) []*Span {
	var out []*Span
	for _, c := range tr.Children(s) {
		out = append(out, c)
		out = append(out, tr.Descendants(c)...)
	}
	return out
}

// Service is the service name of the process that reported s.
func (tr *Trace) Service(s *Span) string { return tr.Processes[s.ProcessID].ServiceName }

// Summary lists the trace's span names, for failure messages.
func (tr *Trace) Summary() string {
	names := make([]string, 0, len(tr.Spans))
	for _, s := range tr.Spans {
		names = append(names, s.OperationName)
	}
	return fmt.Sprintf("%d spans %v", len(tr.Spans), names)
}

// StartTime, EndTime and Duration of the span.
func (s *Span) StartTime() time.Time     { return time.UnixMicro(s.StartTimeUS) }
func (s *Span) EndTime() time.Time       { return time.UnixMicro(s.StartTimeUS + s.DurationUS) }
func (s *Span) Duration() time.Duration  { return time.Duration(s.DurationUS) * time.Microsecond }
func (s *Span) String() string           { return fmt.Sprintf("%s(%s)", s.OperationName, s.SpanID) }
func (s *Span) HasTag(key string) bool   { _, ok := s.Tag(key); return ok }
func (s *Span) StrTag(key string) string { v, _ := s.Tag(key); str, _ := v.(string); return str }

// Contains reports whether c lies within s. Jaeger truncates a span's start and its duration to
// µs separately, so a child that ends exactly with its parent may appear to end 1 µs later.
func (s *Span) Contains(c *Span) bool {
	const slackUS = 1
	return c.StartTimeUS >= s.StartTimeUS && c.StartTimeUS+c.DurationUS <= s.StartTimeUS+s.DurationUS+slackUS
}

// Tag returns a tag's value (string, bool, float64 for numbers).
func (s *Span) Tag(key string) (any, bool) {
	for _, kv := range s.Tags {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return nil, false
}

// IsError reports whether the span has the OTel status Error (Jaeger: error=true).
func (s *Span) IsError() bool {
	if v, ok := s.Tag("error"); ok && (v == true || v == "true") {
		return true
	}
	return s.StrTag("otel.status_code") == "ERROR"
}

// StatusMessage is the OTel status description.
func (s *Span) StatusMessage() string { return s.StrTag("otel.status_description") }

// Log returns the span's events (Jaeger logs) whose "event" field is name, as field maps.
func (s *Span) Log(name string) []map[string]any {
	var out []map[string]any
	for _, l := range s.Logs {
		m := map[string]any{}
		for _, f := range l.Fields {
			m[f.Key] = f.Value
		}
		if m["event"] == name {
			m["timestamp"] = time.UnixMicro(l.TimestampUS)
			out = append(out, m)
		}
	}
	return out
}

// ---- Prometheus ----------------------------------------------------------------------------

// Prometheus is a client of Prometheus' HTTP API.
type Prometheus struct{ URL string }

// Sample is one element of an instant vector.
type Sample struct {
	Metric map[string]string
	Value  float64
}

// Query runs an instant query and returns its vector (a scalar becomes one sample).
func (p *Prometheus) Query(ctx context.Context, q string) ([]Sample, error) {
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if _, err := getJSON(ctx, p.URL+"/api/v1/query?"+url.Values{"query": {q}}.Encode(), &r); err != nil {
		return nil, err
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query %q: %s", q, r.Error)
	}
	parse := func(v []any) (float64, error) {
		var f float64
		if len(v) != 2 {
			return 0, fmt.Errorf("bad sample %v", v)
		}
		s, _ := v[1].(string)
		_, err := fmt.Sscan(s, &f)
		return f, err
	}
	switch r.Data.ResultType {
	case "vector":
		var vec []struct {
			Metric map[string]string `json:"metric"`
			Value  []any             `json:"value"`
		}
		if err := json.Unmarshal(r.Data.Result, &vec); err != nil {
			return nil, err
		}
		out := make([]Sample, 0, len(vec))
		for _, v := range vec {
			f, err := parse(v.Value)
			if err != nil {
				return nil, err
			}
			out = append(out, Sample{Metric: v.Metric, Value: f})
		}
		return out, nil
	case "scalar":
		var v []any
		if err := json.Unmarshal(r.Data.Result, &v); err != nil {
			return nil, err
		}
		f, err := parse(v)
		return []Sample{{Value: f}}, err
	}
	return nil, fmt.Errorf("query %q: result type %s", q, r.Data.ResultType)
}

// Value runs a query that must return at most one sample; 0 and false when it returns none.
func (p *Prometheus) Value(ctx context.Context, q string) (float64, bool, error) {
	v, err := p.Query(ctx, q)
	if err != nil || len(v) == 0 {
		return 0, false, err
	}
	if len(v) > 1 {
		return 0, false, fmt.Errorf("query %q returned %d samples, want one", q, len(v))
	}
	return v[0].Value, true, nil
}

// RuleGroup is a loaded rule group as /api/v1/rules reports it.
type RuleGroup struct {
	Name  string `json:"name"`
	File  string `json:"file"`
	Rules []Rule `json:"rules"`
}

// Rule is one loaded rule and its evaluation state.
type Rule struct {
	Name     string            `json:"name"`
	Query    string            `json:"query"`
	Duration float64           `json:"duration"`
	Labels   map[string]string `json:"labels"`
	State    string            `json:"state"` // inactive, pending, firing
	Health   string            `json:"health"`
	Type     string            `json:"type"`
	Alerts   []Alert           `json:"alerts"`
}

// Alert is an active alert.
type Alert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"`
	ActiveAt    time.Time         `json:"activeAt"`
	Value       string            `json:"value"`
}

// Rules lists the loaded rule groups.
func (p *Prometheus) Rules(ctx context.Context) ([]RuleGroup, error) {
	var r struct {
		Data struct {
			Groups []RuleGroup `json:"groups"`
		} `json:"data"`
	}
	_, err := getJSON(ctx, p.URL+"/api/v1/rules", &r)
	return r.Data.Groups, err
}

// Alerts lists the active (pending or firing) alerts.
func (p *Prometheus) Alerts(ctx context.Context) ([]Alert, error) {
	var r struct {
		Data struct {
			Alerts []Alert `json:"alerts"`
		} `json:"data"`
	}
	_, err := getJSON(ctx, p.URL+"/api/v1/alerts", &r)
	return r.Data.Alerts, err
}

// Reload makes Prometheus re-read its configuration and rule files (--web.enable-lifecycle).
func (p *Prometheus) Reload(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.URL+"/-/reload", nil)
	if err != nil {
		return err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("POST /-/reload: %s: %s", resp.Status, b)
	}
	return nil
}

// ---- the OTLP witness ---------------------------------------------------------------------------

// CapturedSpan is one span as the OTLP witness received it (test/e2e/otlpcapture writes them; make
// e2e starts it between readyspan and Jaeger and names its file in READYSPAN_E2E_CAPTURE).
type CapturedSpan struct {
	TraceID      string    `json:"trace_id"`
	SpanID       string    `json:"span_id"`
	ParentSpanID string    `json:"parent_span_id"`
	Name         string    `json:"name"`
	Service      string    `json:"service"`
	Received     time.Time `json:"received"`
}

// CapturedRoots counts, per trace ID, the root spans named "pod.startup" that readyspan sent
// through the witness: one line per span received, so an export repeated with byte-identical
// spans (which Jaeger's query API may merge into one) counts twice here.
func (e *Env) CapturedRoots(t testing.TB) map[string]int {
	t.Helper()
	return e.capturedRoots(t, "pod.startup")
}

// capturedRoots counts, per trace ID, the root spans named name the witness received.
func (e *Env) capturedRoots(t testing.TB, name string) map[string]int {
	t.Helper()
	path := os.Getenv("READYSPAN_E2E_CAPTURE")
	if path == "" {
		Missing(t, "READYSPAN_E2E_CAPTURE, the OTLP witness's file (make e2e starts the witness and sets it)")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read the OTLP witness's capture: %v", err)
	}
	roots := map[string]int{}
	for i, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var s CapturedSpan
		if err := json.Unmarshal(line, &s); err != nil {
			t.Fatalf("%s line %d: %v", path, i+1, err)
		}
		if s.ParentSpanID == "" && s.Name == name {
			roots[s.TraceID]++
		}
	}
	return roots
}

// CheckExportedOnce fails the test unless the witness received exactly one root span for each
// Pod's trace.
func (e *Env) CheckExportedOnce(t testing.TB, pods map[string]string) {
	t.Helper()
	roots := e.CapturedRoots(t)
	for uid, name := range pods {
		if n := roots[TraceID(uid)]; n != 1 {
			t.Errorf("Pod %s: readyspan sent its root span %d times (OTLP witness), want exactly 1", name, n)
		}
	}
}
