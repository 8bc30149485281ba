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

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
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

// A slow backend (every request answered 5 s late) and one answering errors (Unavailable for the
// first 60 s, then well): readyspan neither waits on it (the Pods' traces queue) nor sends twice,
// and counts the errors.
func TestFaultOTLPBackendSlowOrErroring(t *testing.T) {
	for _, tc := range []struct {
		name    string
		witness []string // otlpcapture's flags
		errors  bool     // readyspan_export_errors_total must rise
	}{
		{"slow", []string{"--delay", "5s"}, false},
		{"erroring", []string{"--refuse-for", "60s"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := Setup(t)
			errorsBefore := metric(t, "readyspan_export_errors_total")
			fault(t, append([]string{"otlp-restart"}, tc.witness...)...)
			defer fault(t, "otlp-restart") // a good backend again
			began := time.Now()
			ns := e.faultRollout(t, "otlp-"+tc.name)
			lost, dup, _, done := e.judge(t, ns, 4*time.Minute)
			errs := metric(t, "readyspan_export_errors_total") - errorsBefore
			t.Logf("FAULT otlp-%s %v: lost %d, duplicated %d, export errors counted %v, all delivered %.1fs after the rollout began, readyspan peak RSS %s",
				tc.name, tc.witness, lost, dup, errs, done.Sub(began).Seconds(), peakRSS(t, "readyspan"))
			if lost != 0 || dup != 0 {
				t.Errorf("lost %d, duplicated %d: want none", lost, dup)
			}
			if tc.errors && errs <= 0 {
				t.Errorf("the backend's errors were not counted in readyspan_export_errors_total")
			}
		})
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

// metricWhere adds the samples of a labelled family whose labels contain match (e.g.
// `reason="relist"`).
func metricWhere(t *testing.T, name, match string) float64 {
	t.Helper()
	_, body := readyspanGet(t, "/metrics")
	sum := 0.0
	for _, line := range strings.Split(body, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && strings.HasPrefix(f[0], name+"{") && strings.Contains(f[0], match) {
			v, _ := strconv.ParseFloat(f[1], 64)
			sum += v
		}
	}
	return sum
}

func cpuSeconds(t *testing.T, name string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(fault(t, "cpu-seconds", name), 64)
	if err != nil {
		t.Fatalf("cpu-seconds %s: %v", name, err)
	}
	return v
}

// waitReadyAtLeast waits until n of the namespace's app=web Pods are Ready.
func (e *Env) waitReadyAtLeast(t *testing.T, ns string, n int) {
	t.Helper()
	Eventually(t, 2*time.Minute, fmt.Sprintf("%d Pods Ready", n), func() (bool, error) {
		l, err := e.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false, err
		}
		ready := 0
		for i := range l.Items {
			if PodReady(&l.Items[i]) {
				ready++
			}
		}
		return ready >= n, nil
	})
}

// The kubelet SIGKILLed while the rollout's Pods start, and started again 5 s later: every Pod's
// trace is complete, exported once, and consistent (phases in order, every span inside its parent,
// every boundary with its source), although the restarted kubelet re-reports what it had done.
func TestFaultKubeletRestarted(t *testing.T) {
	e := Setup(t)
	ns := e.faultRollout(t, "kubelet")
	time.Sleep(2 * time.Second) // the first Pods bound, their sandboxes and containers starting
	fault(t, "kill", "kubelet")
	killed := time.Now()
	time.Sleep(outage(5 * time.Second))
	fault(t, "restart", "kubelet")
	lost, dup, pods, done := e.judge(t, ns, 3*time.Minute)
	for uid, name := range pods {
		pod, err := e.Kube.CoreV1().Pods(ns).Get(Ctx(t), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		checkStartupTrace(t, e.WaitTrace(t, uid, time.Minute, complete), pod, "ready", true)
	}
	t.Logf("FAULT kubelet-sigkill: lost %d, duplicated %d, all delivered %.1fs after the kill, readyspan peak RSS %s",
		lost, dup, done.Sub(killed).Seconds(), peakRSS(t, "readyspan"))
	if lost != 0 || dup != 0 {
		t.Errorf("lost %d, duplicated %d: want none", lost, dup)
	}
}

// readyspan cut off from the apiserver (its packets dropped, nobody else's) for 60 s while the
// rollout goes on: it reports unready within the outage grace, ready again after, and exports
// every Pod's trace once.
func TestFaultCutOffFromApiserver(t *testing.T) {
	e := Setup(t)
	ns := e.faultRollout(t, "cutoff")
	e.waitReadyAtLeast(t, ns, 3)
	cutFor := outage(60 * time.Second)
	fault(t, "cut-off")
	defer fault(t, "reconnect") // idempotent
	cut := time.Now()
	var unready time.Duration
	var unreadyBody string
	Eventually(t, 45*time.Second, "/readyz 503 while cut off", func() (bool, error) {
		code, body := readyspanGet(t, "/readyz")
		unready, unreadyBody = time.Since(cut), body
		return code == http.StatusServiceUnavailable, nil
	})
	time.Sleep(time.Until(cut.Add(cutFor)))
	fault(t, "reconnect")
	back := time.Now()
	var readyAgain time.Duration
	Eventually(t, 2*time.Minute, "/readyz 200 after the cut", func() (bool, error) {
		code, _ := readyspanGet(t, "/readyz")
		readyAgain = time.Since(back)
		return code == 200, nil
	})
	lost, dup, _, done := e.judge(t, ns, 3*time.Minute)
	t.Logf("FAULT cut-off %v: lost %d, duplicated %d, unready %.1fs after the cut (%q), ready %.1fs after it ended, all delivered %.1fs after it ended, readyspan peak RSS %s",
		cutFor, lost, dup, unready.Seconds(), strings.TrimSpace(unreadyBody), readyAgain.Seconds(), done.Sub(back).Seconds(), peakRSS(t, "readyspan"))
	if !strings.Contains(unreadyBody, "apiserver") {
		t.Errorf("/readyz while cut off says %q, want the apiserver named", unreadyBody)
	}
	if lost != 0 || dup != 0 {
		t.Errorf("lost %d, duplicated %d: want none", lost, dup)
	}
}

// A relist forced by 410 Gone. readyspan is cut off from the apiserver while the rollout goes on,
// so the changes it misses move etcd past the resourceVersions it last saw; the apiserver is then
// stopped, etcd compacted at its current revision and the apiserver started again, so its watch
// cache starts after them: every watch resuming from what readyspan saw is refused as expired
// and its informer lists again. (With the apiserver merely restarted nothing is written while it
// is down, readyspan resumes from the newest revision, and no watch expires.) Shown independently
// by a watch of the test's own from the resourceVersion of the cut; readyspan counts the relists
// and loses and doubles nothing.
func TestFaultRelistAfter410(t *testing.T) {
	e := Setup(t)
	ns := e.Namespace(t, "fault-relist")
	e.createService(t, ns, service("web"))
	relistsBefore := metricWhere(t, "readyspan_watch_restarts_total", `reason="relist"`)
	expiredBefore := metricWhere(t, "readyspan_watch_errors_total", `reason="expired"`)
	fault(t, "cut-off")
	defer fault(t, "reconnect")
	l, err := e.Kube.CoreV1().Pods(ns).List(Ctx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	oldRV := l.ResourceVersion
	e.createDeployment(t, ns, webDeployment("web", faultReplicas))
	time.Sleep(outage(8 * time.Second)) // Pods created, bound, starting: unseen by readyspan
	fault(t, "kill", "kube-apiserver")
	stopped := time.Now()
	rev := fault(t, "compact")
	fault(t, "restart", "kube-apiserver")
	Eventually(t, 90*time.Second, "the apiserver back", func() (bool, error) {
		_, err := e.Kube.Discovery().ServerVersion()
		return err == nil, err
	})
	back := time.Now()
	// The evidence that the fault is the one meant: resuming from before is 410 Gone.
	gone := false
	wctx, cancel := context.WithTimeout(Ctx(t), 10*time.Second)
	defer cancel()
	w, err := e.Kube.CoreV1().Pods(ns).Watch(wctx, metav1.ListOptions{ResourceVersion: oldRV})
	switch {
	case err != nil:
		gone = apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
	default:
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				st, ok := ev.Object.(*metav1.Status)
				gone = ok && st.Code == http.StatusGone
				break
			}
		}
		w.Stop()
	}
	if !gone {
		t.Fatalf("a watch from resourceVersion %s after compacting etcd at %s was not refused with 410 Gone: the fault did not happen", oldRV, rev)
	}
	fault(t, "reconnect")
	lost, dup, _, done := e.judge(t, ns, 3*time.Minute)
	relists := metricWhere(t, "readyspan_watch_restarts_total", `reason="relist"`) - relistsBefore
	expired := metricWhere(t, "readyspan_watch_errors_total", `reason="expired"`) - expiredBefore
	t.Logf("FAULT relist-410 (cut off from resourceVersion %s, etcd compacted at %s, apiserver down %.1fs): lost %d, duplicated %d, relists counted %v (expired watches %v), all delivered %.1fs after the apiserver returned, readyspan peak RSS %s",
		oldRV, rev, back.Sub(stopped).Seconds(), lost, dup, relists, expired, done.Sub(back).Seconds(), peakRSS(t, "readyspan"))
	if relists <= 0 {
		t.Errorf("no relist counted in readyspan_watch_restarts_total{reason=\"relist\"}")
	}
	if lost != 0 || dup != 0 {
		t.Errorf("lost %d, duplicated %d: want none", lost, dup)
	}
}

// stormDeployment is one of the storm's workloads: busybox running command, with a readiness
// probe on a port nothing listens on when failProbe.
func stormDeployment(name string, replicas int32, command string, failProbe bool) *appsv1.Deployment {
	c := corev1.Container{Name: "app", Image: BusyboxImage, ImagePullPolicy: corev1.PullIfNotPresent, Command: []string{"sh", "-c", command}}
	if failProbe {
		c.ReadinessProbe = &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080)}},
			PeriodSeconds: 1, FailureThreshold: 1,
		}
	}
	labels := LocalPodLabels(map[string]string{"app": name})
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: int32p(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken: boolp(false), TerminationGracePeriodSeconds: int64p(0),
					Containers: []corev1.Container{c},
				},
			},
		},
	}
}

// Bounds the storm case holds readyspan to (docs/faults.md states them).
const (
	stormMaxCores  = 0.25             // readyspan's CPU over the storm, in cores
	stormMaxRSSMiB = 128              // its peak RSS: half the manifests' 256Mi limit
	stormMaxLagP99 = time.Second      // export lag of the other Pods, beyond the settle time
	stormCrashing  = 50               // crash-looping Pods
	stormUnhealthy = 5                // Pods whose readiness probe always fails
	stormWarmup    = 90 * time.Second // for the storm to build up before the measured rollout
)

// An event storm (50 crash-looping Pods and a Deployment whose readiness probes fail every
// second, 5 min by default, READYSPAN_FAULT_STORM): readyspan's CPU and memory stay within the
// bounds above and a 10-Pod rollout's traces in the middle of it are exported on time.
func TestFaultEventStorm(t *testing.T) {
	e := Setup(t)
	stormFor := 5 * time.Minute
	if d, err := time.ParseDuration(os.Getenv("READYSPAN_FAULT_STORM")); err == nil {
		stormFor = d
	}
	storm := e.Namespace(t, "fault-storm")
	cpu0, began := cpuSeconds(t, "readyspan"), time.Now()
	e.createDeployment(t, storm, stormDeployment("crash", stormCrashing, "echo crashing; exit 1", false))
	e.createDeployment(t, storm, stormDeployment("unhealthy", stormUnhealthy, "exec sleep 3600", true))
	time.Sleep(stormWarmup)
	crashing, restarts := 0, int32(0)
	if l, err := e.Kube.CoreV1().Pods(storm).List(Ctx(t), metav1.ListOptions{LabelSelector: "app=crash"}); err == nil {
		for _, p := range l.Items {
			for _, cs := range p.Status.ContainerStatuses {
				if cs.RestartCount > 0 {
					crashing++
					restarts += cs.RestartCount
				}
			}
		}
	}
	if crashing < stormCrashing/2 {
		t.Fatalf("only %d of %d Pods crash-looping after %v: no storm to measure in", crashing, stormCrashing, stormWarmup)
	}
	ns := e.Namespace(t, "fault-stormed")
	sw := e.watchServing(t, ns)
	e.createService(t, ns, service("web"))
	e.createDeployment(t, ns, webDeployment("web", faultReplicas))
	lost, dup, pods, _ := e.judge(t, ns, 3*time.Minute)
	lags := sw.exportLags(t, e, pods)
	time.Sleep(time.Until(began.Add(stormFor)))
	events, _ := e.Kube.CoreV1().Events(storm).List(Ctx(t), metav1.ListOptions{})
	cores := (cpuSeconds(t, "readyspan") - cpu0) / time.Since(began).Seconds()
	rssKiB, _ := strconv.Atoi(fault(t, "peak-rss", "readyspan"))
	p50, p99, worst := quantile(lags, 0.5), quantile(lags, 0.99), quantile(lags, 1)
	t.Logf("FAULT event-storm %v (%d crash-looping, %d restarts at the rollout, %d failing probes, %d Event objects after): lost %d, duplicated %d, export lag beyond the settle p50 %v p99 %v max %v, readyspan %.3f cores, peak RSS %.1f MiB",
		stormFor.Round(time.Second), crashing, restarts, stormUnhealthy, len(events.Items), lost, dup,
		p50.Round(time.Millisecond), p99.Round(time.Millisecond), worst.Round(time.Millisecond), cores, float64(rssKiB)/1024)
	if lost != 0 || dup != 0 {
		t.Errorf("lost %d, duplicated %d: want none", lost, dup)
	}
	if p99 >= stormMaxLagP99 {
		t.Errorf("export lag p99 %v, want < %v", p99, stormMaxLagP99)
	}
	if cores > stormMaxCores {
		t.Errorf("readyspan used %.3f cores during the storm, bound %v", cores, stormMaxCores)
	}
	if float64(rssKiB)/1024 > stormMaxRSSMiB {
		t.Errorf("readyspan peak RSS %.1f MiB, bound %d MiB", float64(rssKiB)/1024, stormMaxRSSMiB)
	}
}
