//go:build e2e

package e2e

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
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
	// Jaeger's exporter to readyspan has failed since the cluster came up (nothing listened), and
	// its gRPC connection backs off up to 2 min between attempts: wait until spans arrive again.
	Eventually(t, 3*time.Minute, "the apiserver's spans reaching readyspan through Jaeger", func() (bool, error) {
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
// inside controllers (a Deployment's Pods) or apiserver (a bare Pod) with its authorization and
// etcd write, the Binding inside scheduling, the kubelet's syncPod and CRI calls inside kubelet
// with containerd's network setup beneath RunPodSandbox, each copy's link resolving to the
// component's own span in Jaeger with the same start and length, nothing marked missing, and
// every trace still exported exactly once (the OTLP witness).
func TestComponentSpansJoined(t *testing.T) {
	e := Setup(t)
	e.withOTLPReceive(t)
	ns := e.Namespace(t, "e2e-chain")
	ctx := Ctx(t)
	e.createService(t, ns, service("chain"))
	e.createService(t, ns, service("bare"))
	e.createDeployment(t, ns, webDeployment("chain", 3))
	bare := sleeper("bare", BusyboxImage)
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
	for _, p := range pods {
		tr := traces[string(p.UID)]
		t.Run(p.Name, func(t *testing.T) {
			if v := tr.Root().StrTag("readyspan.components.missing"); v != "" {
				t.Errorf("marked missing: %s", v)
			}
			createPhase, createName := "controllers", "controllers.pod_create"
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
	e.logJoinWait(t)
}

// receivedFromAPIServer is how many spans the local readyspan's OTLP input received from the
// apiserver, from its /metrics.
func receivedFromAPIServer() (float64, error) {
	resp, err := http.Get("http://127.0.0.1:8080/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), `readyspan_otlp_received_spans_total{component="kube-apiserver"} `); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, sc.Err()
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
