//go:build e2e && e2e_faults

// The fault suite (make e2e-faults, deploy/local/scripts/faults.sh): each case rolls out a
// Deployment of 10 Pods, injects one fault while the Pods start, and judges readyspan by the
// OTLP witness (root spans per trace ID: lost = 0, duplicated = more than 1) and its metrics.
// Each logs a FAULT line with its measured figures (lost, duplicated, time to recover, peak
// RSS), which docs/faults.md reports.
package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const faultReplicas = 10

// fault runs an action of faults.sh.
func fault(t *testing.T, args ...string) string {
	t.Helper()
	script := os.Getenv("READYSPAN_FAULTS_SCRIPT")
	if script == "" {
		Missing(t, "READYSPAN_FAULTS_SCRIPT (make e2e-faults sets it)")
	}
	out, err := exec.Command(script, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("faults.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// rollout creates a 10-replica web Deployment and its Service in a fresh namespace and returns
// the namespace; the Pods start while the caller injects its fault.
func (e *Env) faultRollout(t *testing.T, name string) string {
	ns := e.Namespace(t, "fault-"+name)
	e.createService(t, ns, service("web"))
	e.createDeployment(t, ns, webDeployment("web", faultReplicas))
	return ns
}

// judge waits until every Ready Pod's trace reached the witness (or timeout) and returns the
// lost and duplicated counts, and when the last arrived.
func (e *Env) judge(t *testing.T, ns string, timeout time.Duration) (lost, dup int, pods map[string]string, done time.Time) {
	t.Helper()
	ready := e.WaitPodsReady(t, ns, "app=web", faultReplicas, 5*time.Minute)
	pods = map[string]string{}
	for _, p := range ready {
		pods[string(p.UID)] = p.Name
	}
	deadline := time.Now().Add(timeout)
	for {
		roots := e.CapturedRoots(t)
		lost, dup = 0, 0
		for uid := range pods {
			switch n := roots[TraceID(uid)]; {
			case n == 0:
				lost++
			case n > 1:
				dup += n - 1
			}
		}
		if lost == 0 || time.Now().After(deadline) {
			return lost, dup, pods, time.Now()
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func readyspanGet(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://127.0.0.1:8080" + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metric reads one unlabelled sample from readyspan's /metrics.
func metric(t *testing.T, name string) float64 {
	t.Helper()
	_, body := readyspanGet(t, "/metrics")
	for _, line := range strings.Split(body, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == name {
			v, _ := strconv.ParseFloat(f[1], 64)
			return v
		}
	}
	return -1
}

// metricSum adds every sample of a labelled family from readyspan's /metrics.
func metricSum(t *testing.T, name string) float64 {
	t.Helper()
	_, body := readyspanGet(t, "/metrics")
	sum := 0.0
	for _, line := range strings.Split(body, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && strings.HasPrefix(f[0], name+"{") {
			v, _ := strconv.ParseFloat(f[1], 64)
			sum += v
		}
	}
	return sum
}

func peakRSS(t *testing.T, name string) string {
	kib, err := strconv.Atoi(fault(t, "peak-rss", name))
	if err != nil {
		return "unknown"
	}
	return fmt.Sprintf("%.1f MiB", float64(kib)/1024)
}

func outage(def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv("READYSPAN_FAULT_OUTAGE")); err == nil {
		return d
	}
	return def
}

// The OTLP backend down while Pods start, then back: readyspan keeps the traces, shows the
// trouble (gauges, /readyz's second line, still 200), and delivers each once when it returns.
func TestFaultOTLPBackendDown(t *testing.T) {
	e := Setup(t)
	down := outage(90 * time.Second)
	fault(t, "otlp-down")
	defer fault(t, "otlp-up") // idempotent enough: a second start fails only on the port
	ns := e.faultRollout(t, "otlp")
	e.WaitPodsReady(t, ns, "app=web", faultReplicas, 5*time.Minute)
	Eventually(t, 60*time.Second, "readyspan_export_failing 1", func() (bool, error) {
		return metric(t, "readyspan_export_failing") == 1, nil
	})
	code, body := readyspanGet(t, "/readyz")
	if code != 200 || !strings.Contains(body, "export failing for") {
		t.Errorf("/readyz while the backend is down: %d %q, want 200 and the export line", code, body)
	}
	time.Sleep(down)
	backlog := metric(t, "readyspan_export_backlog_traces")
	backlogBytes := metric(t, "readyspan_export_backlog_bytes")
	up := time.Now()
	fault(t, "otlp-up")
	lost, dup, _, done := e.judge(t, ns, 4*time.Minute)
	if metric(t, "readyspan_export_failing") != 0 {
		t.Errorf("readyspan_export_failing still 1 after delivery")
	}
	t.Logf("FAULT otlp-down %v: lost %d, duplicated %d, backlog %v traces / %v bytes, recovered %.1fs after the backend returned, readyspan peak RSS %s",
		down, lost, dup, backlog, backlogBytes, done.Sub(up).Seconds(), peakRSS(t, "readyspan"))
	if lost != 0 || dup != 0 {
		t.Errorf("lost %d, duplicated %d: want none", lost, dup)
	}
}

// readyspan SIGKILLed (no drain, no state file written) while Pods start, then started again:
// no trace lost; duplicates are counted.
func TestFaultReadyspanKilled(t *testing.T) {
	e := Setup(t)
	ns := e.faultRollout(t, "rskill")
	Eventually(t, 2*time.Minute, "3 Pods Ready", func() (bool, error) {
		l, err := e.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=web"})
		n := 0
		for i := range l.Items {
			if PodReady(&l.Items[i]) {
				n++
			}
		}
		return n >= 3, err
	})
	fault(t, "kill", "readyspan")
	killed := time.Now()
	time.Sleep(outage(10 * time.Second))
	fault(t, "readyspan-start")
	lost, dup, _, done := e.judge(t, ns, 2*time.Minute)
	t.Logf("FAULT readyspan-sigkill: lost %d, duplicated %d, all delivered %.1fs after the kill, readyspan peak RSS %s",
		lost, dup, done.Sub(killed).Seconds(), peakRSS(t, "readyspan"))
	if lost != 0 {
		t.Errorf("lost %d traces", lost)
	}
}

// kube-apiserver SIGKILLed mid-rollout and started again: watches reconnect (counted), every
// Pod has exactly one trace.
func TestFaultApiserverKilled(t *testing.T) {
	e := Setup(t)
	ns := e.faultRollout(t, "apikill")
	time.Sleep(3 * time.Second)
	restartsBefore := metricSum(t, "readyspan_watch_restarts_total")
	fault(t, "kill", "kube-apiserver")
	killed := time.Now()
	time.Sleep(outage(10 * time.Second))
	fault(t, "restart", "kube-apiserver")
	Eventually(t, 90*time.Second, "the apiserver back", func() (bool, error) {
		_, err := e.Kube.Discovery().ServerVersion()
		return err == nil, err
	})
	back := time.Now()
	Eventually(t, 60*time.Second, "readyspan ready again", func() (bool, error) {
		code, _ := readyspanGet(t, "/readyz")
		return code == 200, nil
	})
	lost, dup, _, done := e.judge(t, ns, 2*time.Minute)
	restarts := metricSum(t, "readyspan_watch_restarts_total") - restartsBefore
	t.Logf("FAULT apiserver-sigkill: lost %d, duplicated %d, apiserver down %.1fs, all delivered %.1fs after it returned, watch restarts counted %v, readyspan peak RSS %s",
		lost, dup, back.Sub(killed).Seconds(), done.Sub(back).Seconds(), restarts, peakRSS(t, "readyspan"))
	if restarts <= 0 {
		t.Errorf("no watch restart counted across the apiserver's restart")
	}
	if lost != 0 || dup != 0 {
		t.Errorf("lost %d, duplicated %d: want none", lost, dup)
	}
}
