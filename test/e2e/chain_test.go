//go:build e2e

package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// readyspanOTLPReceive is where the local readyspan receives the components' spans: the local
// Jaeger forwards the apiserver's, kubelet's and containerd's spans there
// (deploy/local/config/jaeger.yaml, READYSPAN_OTLP_PORT in lib.sh).
const readyspanOTLPReceive = "127.0.0.1:4321"

// withOTLPReceive restarts the local readyspan with --otlp-receive added to its flags, and back
// to its flags when the test ends.
func (e *Env) withOTLPReceive(t *testing.T) {
	t.Helper()
	argsFile := filepath.Join(e.State, "run", "readyspan.args")
	b, err := os.ReadFile(argsFile)
	if err != nil {
		Missing(t, "readyspan run by deploy/local/scripts/readyspan.sh (make e2e starts it): %v", err)
	}
	args := string(b)
	t.Setenv("READYSPAN_ARGS", args+" --otlp-receive "+readyspanOTLPReceive)
	e.RestartReadyspan(t)
	// Jaeger's exporter to readyspan (OTLP/HTTP, each batch dials anew) sends with its next
	// batch: the apiserver's spans of its own leases and health checks come every few seconds.
	Eventually(t, time.Minute, "the apiserver's spans reaching readyspan through Jaeger", func() (bool, error) {
		n, err := receivedFromAPIServer()
		return n > 0, fmt.Errorf("readyspan_otlp_received_spans_total{component=\"kube-apiserver\"} = %v (%v)", n, err)
	})
	t.Cleanup(func() {
		os.Setenv("READYSPAN_ARGS", args)
		defer os.Unsetenv("READYSPAN_ARGS")
		e.RestartReadyspan(t)
	})
}

// TestComponentSpansJoined runs readyspan with its OTLP input on, the local cluster's
// apiserver, kubelet and containerd sending their own spans to it (through Jaeger, as a
// Collector would), and checks each Pod's trace in Jaeger: the request that created the Pod
// inside controllers.replicaset (a Deployment's Pods) or apiserver (a bare Pod) with its
// authorization and etcd write, the Binding inside scheduling, the kubelet's syncPod and CRI
// calls inside kubelet with containerd's network setup beneath RunPodSandbox, each copy's link
// resolving to the component's own span in Jaeger with the same start and length, nothing
// marked missing, and every trace still exported exactly once (the OTLP witness).
//
// Every Pod is labelled for the local webhook server's sidecar injection (50 ms): its one call
// must be its own span beneath the create request, the request the webhook server logged (by
// the AdmissionReview's UID, which the apiserver's span carries) for this Pod, its length
// holding the server's own measure of it (handling, and the TLS handshake on a new connection)
// and exceeding it by 25 ms at most, the closest by 5 ms; and readyspan's webhook
// histogram must count each call the server logged for these Pods once, its etcd histogram
// each Pod's create.
func TestComponentSpansJoined(t *testing.T) {
	e := Setup(t)
	e.withOTLPReceive(t)
	ns := e.Namespace(t, "e2e-chain")
	ctx := Ctx(t)
	e.createService(t, ns, service("chain"))
	e.createService(t, ns, service("bare"))
	d := webDeployment("chain", 3)
	d.Spec.Template.Labels[injectLabel] = injectValue
	e.createDeployment(t, ns, d)
	bare := sleeper("bare", BusyboxImage)
	bare.Labels[injectLabel] = injectValue
	bare.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}, PeriodSeconds: 1}
	e.createPod(t, ns, bare)
	pods := e.WaitPodsReady(t, ns, "app in (chain,bare)", 4, 2*time.Minute)
	uids := make([]string, 0, len(pods))
	names := map[string]string{}
	for _, p := range pods {
		uids = append(uids, string(p.UID))
		names[string(p.UID)] = p.Name
	}
	joined := func(tr *Trace) bool { return complete(tr) && tr.Find("kubelet.sync_pod") != nil }
	traces := e.WaitTraces(t, uids, 3*time.Minute, joined)
	calls := webhookCalls(t, e, ns, len(pods))
	var excess []time.Duration
	for _, p := range pods {
		tr := traces[string(p.UID)]
		t.Run(p.Name, func(t *testing.T) {
			if v := tr.Root().StrTag("readyspan.components.missing"); v != "" {
				t.Errorf("marked missing: %s", v)
			}
			createPhase, createName := "controllers.replicaset", "controllers.pod_create"
			if p.Name == "bare" {
				createPhase, createName = "apiserver", "apiserver.request"
			}
			want := []struct{ phase, name string }{
				{createPhase, createName}, {createPhase, "apiserver.authorization"}, {createPhase, "apiserver.etcd"},
				{"scheduling", "scheduling.binding"},
				{"kubelet", "kubelet.sync_pod"}, {"kubelet", "kubelet.volumes"}, {"kubelet", "kubelet.cri.run_pod_sandbox"},
				{"kubelet", "kubelet.cri.create_container"}, {"kubelet", "kubelet.cri.start_container"},
				{"kubelet", "containerd.network.setup"},
			}
			for _, w := range want {
				if len(descendants(tr, w.phase, w.name)) == 0 {
					t.Errorf("no %s inside %s (%s)", w.name, w.phase, tr.Summary())
				}
			}
			if d, ok := checkWebhookSpan(t, tr, p, createPhase, createName, calls); ok {
				excess = append(excess, d)
			}
			// containerd's network setup lies beneath the kubelet's RunPodSandbox.
			for _, rps := range descendants(tr, "kubelet", "kubelet.cri.run_pod_sandbox") {
				found := false
				for _, d := range tr.Descendants(rps) {
					found = found || d.OperationName == "containerd.network.setup"
				}
				if !found {
					t.Errorf("containerd.network.setup is not beneath %s", rps)
				}
			}
			// Every copy links to its original, which Jaeger holds, with the same times.
			checked := 0
			for _, s := range tr.Spans {
				if s.StrTag("readyspan.time.source.start") != "component-span" || s.OperationName == "kubelet.volumes" {
					continue
				}
				var link *Reference
				for i := range s.References {
					if s.References[i].RefType == "FOLLOWS_FROM" {
						link = &s.References[i]
					}
				}
				if link == nil {
					t.Errorf("%s has no link to its original", s)
					continue
				}
				orig, err := e.Jaeger.Trace(ctx, link.TraceID)
				if err != nil || orig == nil {
					t.Errorf("%s: the linked trace %s is not in Jaeger: %v", s, link.TraceID, err)
					continue
				}
				var o *Span
				for _, c := range orig.Spans {
					if c.SpanID == link.SpanID {
						o = c
					}
				}
				if o == nil {
					t.Errorf("%s: span %s is not in the linked trace %s", s, link.SpanID, link.TraceID)
					continue
				}
				if o.StartTimeUS != s.StartTimeUS || o.DurationUS != s.DurationUS || o.OperationName != s.StrTag("readyspan.component.span_name") {
					t.Errorf("%s (%d+%d µs) is not a copy of %s (%d+%d µs)", s, s.StartTimeUS, s.DurationUS, o, o.StartTimeUS, o.DurationUS)
				}
				checked++
			}
			t.Logf("%d joined spans, each linked to its original in Jaeger", checked)
		})
	}
	e.CheckExportedOnce(t, names)
	if len(excess) == 0 {
		t.Errorf("no webhook span was compared with the server's own measure")
	}
	t.Logf("webhook spans less the server's own measure: %v", excess)
	checkCallHistograms(t, calls, len(pods))
	e.logJoinWait(t)
}

// The local webhook server's sidecar injection (deploy/local/config/webhooks.yaml).
const (
	injectLabel   = "readyspan.dev/inject"
	injectValue   = "sidecar"
	injectWebhook = "inject.readyspan.dev"
	// webhookSpanRounding: the server logs microseconds, Jaeger holds microseconds.
	webhookSpanRounding = 10 * time.Microsecond
)

// webhookCall is one line of the local webhook server's log (localwebhook's Record).
type webhookCall struct {
	Start                                    time.Time
	Hook, UID, Namespace, Name, GenerateName string
	Patched, Allowed, NewConnection          bool
	HandlingMs, ConnectMs                    float64
}

// webhookCalls reads the webhook server's log for the mutate calls of Pods in ns, by the
// AdmissionReview's UID, waiting for at least want of them.
func webhookCalls(t *testing.T, e *Env, ns string, want int) map[string]webhookCall {
	t.Helper()
	calls := map[string]webhookCall{}
	Eventually(t, 10*time.Second, "the webhook server's log lines for the Pods of "+ns, func() (bool, error) {
		data, err := os.ReadFile(filepath.Join(e.State, "logs", "webhook.log"))
		if err != nil {
			return false, err
		}
		clear(calls)
		for _, line := range strings.Split(string(data), "\n") {
			var c webhookCall
			if json.Unmarshal([]byte(line), &c) == nil && c.Namespace == ns && c.Hook == "mutate" && c.UID != "" {
				calls[c.UID] = c
			}
		}
		return len(calls) >= want, fmt.Errorf("%d mutate calls for %s logged, want %d", len(calls), ns, want)
	})
	return calls
}

// checkWebhookSpan: the Pod's trace holds one mutating webhook span, beneath its create
// request inside phase, naming the local injector; the call it copies is the one the webhook
// server logged for this Pod (the AdmissionReview's UID, the Pod's namespace and name or
// generateName); it holds the server's own measure of the request's handling on the same clock,
// and ends before the request's etcd write begins. It returns by how much the span exceeds the
// handling (ok false if there is no such span), for the log: the HTTPS round trip on loopback (a
// new connection's handshake too), the AdmissionReview's encoding and decoding and the patch's
// application, 0.7–4.5 ms for most calls on a quiet 2-core machine, 5.5–13.1 ms when the
// apiserver waits for a core, 59–103 ms with the machine saturated. A bound on it would fail on
// a busy machine and tell nothing the UID does not.
func checkWebhookSpan(t *testing.T, tr *Trace, p corev1.Pod, phase, createName string, calls map[string]webhookCall) (excess time.Duration, ok bool) {
	t.Helper()
	sidecar := false
	for _, c := range p.Spec.Containers {
		sidecar = sidecar || c.Name == "readyspan-sidecar"
	}
	if !sidecar {
		t.Errorf("no injected sidecar in the Pod: it did not pass through the webhook")
	}
	hooks := descendants(tr, phase, "apiserver.admission.mutating_webhook")
	creates := descendants(tr, phase, createName)
	if len(hooks) != 1 || len(creates) != 1 {
		t.Errorf("%d mutating webhook spans and %d %s inside %s, want one of each (%s)", len(hooks), len(creates), createName, phase, tr.Summary())
		return 0, false
	}
	hook := hooks[0]
	if !slices.Contains(tr.Descendants(creates[0]), hook) {
		t.Errorf("%s is not beneath %s", hook, creates[0])
	}
	if w := hook.StrTag("webhook"); w != injectWebhook {
		t.Errorf("%s names webhook %q, want %q", hook, w, injectWebhook)
	}
	uid := hook.StrTag("UID")
	c, logged := calls[uid]
	switch {
	case !logged:
		t.Errorf("%s copies the call of AdmissionReview %q, which the webhook server did not log for this namespace", hook, uid)
		return 0, false
	case c.Name != p.Name && (c.GenerateName == "" || !strings.HasPrefix(p.Name, c.GenerateName)):
		t.Errorf("%s copies the call of AdmissionReview %s, which the webhook server logged for %q (generateName %q), not %s", hook, uid, c.Name, c.GenerateName, p.Name)
	case !c.Patched || !c.Allowed:
		t.Errorf("the webhook server's call %s: %+v, want patched and allowed", uid, c)
	}
	// The server's clock is the apiserver's (one machine): the request it handled, from its
	// arrival to its answer, lies inside the span. A new connection's accept and TLS handshake
	// (ConnectMs) need not: the apiserver's client may open the connection before the span
	// begins (seen 3.3 ms before it).
	handled := time.Duration(c.HandlingMs * float64(time.Millisecond))
	d := hook.Duration() - handled
	t.Logf("webhook call %s: the apiserver's span %v, the server's handling %.3fms (new connection: %v, %.3fms before it): %+v",
		uid, hook.Duration(), c.HandlingMs, c.NewConnection, c.ConnectMs, d)
	answered := c.Start.Add(handled)
	if hook.StartTime().After(c.Start.Add(webhookSpanRounding)) || hook.EndTime().Before(answered.Add(-webhookSpanRounding)) {
		t.Errorf("webhook call %s: the apiserver's span [%v, %v] does not hold the server's handling [%v, %v]",
			uid, hook.StartTime().Format(time.RFC3339Nano), hook.EndTime().Format(time.RFC3339Nano),
			c.Start.Format(time.RFC3339Nano), answered.Format(time.RFC3339Nano))
	}
	// Nothing more of the request: the write to etcd comes after the admission chain.
	for _, w := range tr.Descendants(creates[0]) {
		if w.OperationName == "apiserver.etcd" && w.StartTime().Before(hook.EndTime()) {
			t.Errorf("%s ends at %v, after %s began (%v): the span holds more than the call",
				hook, hook.EndTime().Format(time.RFC3339Nano), w, w.StartTime().Format(time.RFC3339Nano))
		}
	}
	return d, true
}

// checkCallHistograms: readyspan's webhook histogram counts the injector's calls exactly as
// the webhook server logged them (only this test's Pods carry the label since readyspan was
// restarted for it), and its etcd histogram at least each Pod's create.
func checkCallHistograms(t *testing.T, calls map[string]webhookCall, pods int) {
	t.Helper()
	hooks, err := metricValue(`readyspan_admission_webhook_duration_seconds_count{type="mutating",webhook="` + injectWebhook + `"}`)
	if err != nil || hooks != float64(len(calls)) {
		t.Errorf("readyspan_admission_webhook_duration_seconds_count for %s: %v (%v), want %d (the calls the webhook server logged)", injectWebhook, hooks, err, len(calls))
	}
	creates, err := metricValue(`readyspan_etcd_write_duration_seconds_count{operation="create"}`)
	if err != nil || creates < float64(pods) {
		t.Errorf("readyspan_etcd_write_duration_seconds_count{operation=\"create\"}: %v (%v), want at least %d", creates, err, pods)
	}
	t.Logf("readyspan's histograms: %v webhook calls of %s, %v etcd creates", hooks, injectWebhook, creates)
}

// metricValue is the value of one series on the local readyspan's /metrics (labels as
// Prometheus's text format writes them, sorted).
func metricValue(series string) (float64, error) {
	resp, err := http.Get("http://127.0.0.1:8080/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no series %s", series)
}

// receivedFromAPIServer is how many spans the local readyspan's OTLP input received from the
// apiserver, from its /metrics.
func receivedFromAPIServer() (float64, error) {
	return readyspanMetric(`readyspan_otlp_received_spans_total{component="kube-apiserver"}`)
}

// logJoinWait logs readyspan's own measure of the export lag the join added: the wait of each
// trace for the components' spans after it settled.
func (e *Env) logJoinWait(t *testing.T) {
	resp, err := http.Get("http://127.0.0.1:8080/metrics")
	if err != nil {
		t.Logf("no readyspan metrics: %v", err)
		return
	}
	defer resp.Body.Close()
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "readyspan_otlp_") {
			lines = append(lines, l)
		}
	}
	t.Logf("readyspan's OTLP input:\n  %s", strings.Join(lines, "\n  "))
}
