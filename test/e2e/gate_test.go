//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	junit "github.com/joshdk/go-junit"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// gateSLO bounds a web Pod's readiness at 6 s: webDeployment's probe (1 s delay, every 1 s)
// meets it with room; a 12 s initial delay cannot.
const gateSLO = `version: 1
spans:
  container.readiness: {max: 6s}
  pod.startup: {max: 2m}
  workload.rollout: {max: 4m}
failures:
  other: 0
`

// TestGate runs the real `bin/readyspan gate deployment/web` as a CI job would, twice: on a
// normal rollout it passes (exit 0); on one whose readiness probe waits 12 s it fails (exit 1),
// names container.readiness and the new Pods, and its JUnit file, read by a real JUnit parser,
// has that objective as its one failing testcase.
func TestGate(t *testing.T) {
	e := Setup(t)
	ns := e.Namespace(t, "e2e-gate")
	ctx := Ctx(t)
	bin, dir, slo := e.gateFiles(t, gateSLO)
	e.createDeployment(t, ns, webDeployment("web", 2))
	e.WaitPodsReady(t, ns, "app=web", 2, 3*time.Minute)
	created, err := e.Kube.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.rolloutTrace(t, "Deployment", ns, "web", created.Generation, 2*time.Minute) // the creation is over

	// A normal rollout: the gate passes.
	code, out, _ := e.runGate(t, bin, ns, slo, filepath.Join(dir, "normal.xml"),
		`{"spec":{"template":{"metadata":{"annotations":{"readyspan.dev/e2e-change":"1"}}}}}`)
	if code != 0 {
		t.Fatalf("gate on a normal rollout: exit %d, want 0\n%s", code, out)
	}
	if !strings.Contains(out, "PASS") || !strings.Contains(out, "the next rollout") {
		t.Errorf("gate on a normal rollout says neither PASS nor which rollout it judged:\n%s", out)
	}

	// Readiness made slow on purpose: the gate fails on container.readiness and names the Pods.
	junitFile := filepath.Join(dir, "slow.xml")
	code, out, _ = e.runGate(t, bin, ns, slo, junitFile,
		`{"spec":{"template":{"spec":{"containers":[{"name":"httpd","readinessProbe":{"initialDelaySeconds":12}}]}}}}`)
	if code != 1 {
		t.Fatalf("gate on a slow rollout: exit %d, want 1\n%s", code, out)
	}
	pods := e.WaitPodsReady(t, ns, "app=web", 2, time.Minute)
	broken := brokenLines(out)
	if len(broken) != 1 || !strings.Contains(broken[0], "container.readiness max") {
		t.Fatalf("broken objectives %q, want container.readiness max alone\n%s", broken, out)
	}
	for i := range pods {
		p := &pods[i]
		if !strings.Contains(out, ns+"/"+p.Name+" container httpd") || !strings.Contains(out, TraceID(string(p.UID))) {
			t.Errorf("the gate does not name the slow Pod %s (trace %s):\n%s", p.Name, TraceID(string(p.UID)), out)
		}
		// Independent evidence: the API's own times, from the container's start to Ready.
		if d := readinessFromAPI(p); d < 12*time.Second {
			t.Errorf("pod %s: Ready %s after its container started; the probe's delay is 12 s", p.Name, d)
		}
	}
	checkGateJUnit(t, junitFile)
}

// gateFiles are the built readyspan, a directory for the gate's files and the SLO file in it.
func (e *Env) gateFiles(t *testing.T, sloText string) (bin, dir, slo string) {
	t.Helper()
	bin = filepath.Join(e.Root, "bin", "readyspan")
	if _, err := os.Stat(bin); err != nil {
		Missing(t, "bin/readyspan missing (make build): %v", err)
	}
	dir = t.TempDir()
	slo = filepath.Join(dir, "slo.yaml")
	if err := os.WriteFile(slo, []byte(sloText), 0o644); err != nil {
		t.Fatal(err)
	}
	return bin, dir, slo
}

// runGate starts the gate on deployment/web (with extra flags), applies patch once it waits, and
// waits for it.
func (e *Env) runGate(t *testing.T, bin, ns, slo, junitFile, patch string, extra ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"gate", "deployment/web", "-n", ns, "--slo", slo, "--junit", junitFile,
		"--timeout", "4m", "--kubeconfig", e.Kubeconfig}, extra...)...)
	var out bytes.Buffer
	cmd.Stdout = &out
	errOut := &syncBuffer{}
	cmd.Stderr = errOut
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s gate: %v", bin, err)
	}
	Eventually(t, time.Minute, "the gate watching", func() (bool, error) {
		return strings.Contains(errOut.String(), "waiting for the rollout"), nil
	})
	if _, err := e.Kube.AppsV1().Deployments(ns).Patch(Ctx(t), "web", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		_ = cmd.Process.Kill()
		t.Fatalf("patch deployment/web: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			code = ee.ExitCode()
		case err != nil:
			t.Fatalf("gate: %v", err)
		}
	case <-time.After(5 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("the gate did not end within 5 min\n%s", errOut.String())
	}
	t.Logf("gate exit %d:\n%s%s", code, out.String(), errOut.String())
	return code, out.String(), errOut.String()
}

// TestGateURL runs `bin/readyspan gate --url` against the suite's readyspan daemon (its OTLP
// input on, the node component reporting the node's kube-proxy rules), as a CI job holding only
// the daemon's address would. On a rolling update whose old Pods keep answering after SIGTERM
// (busybox httpd ignores it) without a preStop hook, `rotation: {max_pods: 0}` fails (exit 1)
// and names the old Pods: each one the rollout's rotation spans in Jaeger say was late, and
// these are the Pods the Deployment had before the change. With `preStop: {sleep: {seconds: 3}}`
// on the old Pods the next rollout passes (exit 0). The JUnit file, read by go-junit, has the
// rotation objective as its one failing testcase.
func TestGateURL(t *testing.T) {
	e := Setup(t)
	e.withOTLPReceive(t)
	e.withNodeComponent(t)
	ns := e.Namespace(t, "e2e-gate-url")
	ctx := Ctx(t)
	bin, dir, slo := e.gateFiles(t, "version: 1\nrotation: {max_pods: 0}\n")
	e.createService(t, ns, service("web"))
	d := webDeployment("web", 3)
	d.Spec.Template.Spec.TerminationGracePeriodSeconds = int64p(8) // httpd answers until removed from the rules
	e.createDeployment(t, ns, d)
	before := e.WaitPodsReady(t, ns, "app=web", 3, 2*time.Minute)
	created, err := e.Kube.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.rolloutTrace(t, "Deployment", ns, "web", created.Generation, 2*time.Minute) // the creation is over
	url := []string{"--url", "http://127.0.0.1:8080"}

	// The old Pods have no preStop hook: they are in the rules after their stop.
	junitFile := filepath.Join(dir, "late.xml")
	code, out, _ := e.runGate(t, bin, ns, slo, junitFile,
		`{"spec":{"template":{"spec":{"containers":[{"name":"httpd","lifecycle":{"preStop":{"sleep":{"seconds":3}}}}]}}}}`, url...)
	if code != 1 {
		t.Fatalf("gate --url on old Pods in rotation after their stop: exit %d, want 1\n%s", code, out)
	}
	if broken := brokenLines(out); len(broken) != 1 || !strings.Contains(broken[0], "rotation max_pods") {
		t.Fatalf("broken objectives %q, want rotation max_pods alone\n%s", broken, out)
	}
	updated, err := e.Kube.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rt := e.rolloutTrace(t, "Deployment", ns, "web", updated.Generation, 2*time.Minute)
	late := map[string]bool{}
	for _, sp := range rt.FindAll("rollout.pod.rotation") {
		if n, _ := sp.Tag("readyspan.pod.rotation.late"); fmt.Sprint(n) != "0" {
			late[sp.StrTag("k8s.pod.name")] = true
		}
	}
	if len(late) != len(before) {
		t.Errorf("Jaeger's rotation spans say %d old Pods were late, want the %d the Deployment had", len(late), len(before))
	}
	for _, p := range before {
		if !late[p.Name] || !strings.Contains(out, ns+"/"+p.Name+" ") {
			t.Errorf("old Pod %s: late in Jaeger %v; the gate must name it:\n%s", p.Name, late[p.Name], out)
		}
	}
	checkJUnitFailing(t, junitFile, "rotation max_pods", before[0].Name)

	// These old Pods sleep 3 s in their preStop hook: out of the rules before their stop.
	code, out, _ = e.runGate(t, bin, ns, slo, filepath.Join(dir, "sleep.xml"),
		`{"spec":{"template":{"metadata":{"annotations":{"e2e/rev":"3"}}}}}`, url...)
	if code != 0 || !strings.Contains(out, "met          rotation max_pods") {
		t.Fatalf("gate --url on old Pods with a preStop sleep: exit %d, want 0 and rotation met\n%s", code, out)
	}
}

// brokenLines are the text output's broken objectives.
func brokenLines(out string) []string {
	var b []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "BROKEN") {
			b = append(b, l)
		}
	}
	return b
}

// readinessFromAPI is the Pod's Ready condition's time less its container's start, as the
// kubelet wrote them in the status.
func readinessFromAPI(p *corev1.Pod) time.Duration {
	var ready, started time.Time
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			ready = c.LastTransitionTime.Time
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == "httpd" && cs.State.Running != nil {
			started = cs.State.Running.StartedAt.Time
		}
	}
	return ready.Sub(started)
}

// checkGateJUnit reads the slow rollout's JUnit file with go-junit: one suite, one failing
// testcase, container.readiness max, whose text names the Pods.
func checkGateJUnit(t *testing.T, path string) {
	t.Helper()
	checkJUnitFailing(t, path, "container.readiness max", "container httpd")
}

// checkJUnitFailing reads a gate's JUnit file with go-junit: one suite whose one failing
// testcase is objective, its text holding want.
func checkJUnitFailing(t *testing.T, path, objective, want string) {
	t.Helper()
	suites, err := junit.IngestFile(path)
	if err != nil {
		t.Fatalf("go-junit: %v", err)
	}
	if len(suites) != 1 {
		t.Fatalf("%d testsuites, want 1", len(suites))
	}
	var failed []junit.Test
	for _, tc := range suites[0].Tests {
		if tc.Status == junit.StatusFailed || tc.Status == junit.StatusError {
			failed = append(failed, tc)
		}
	}
	if len(failed) != 1 || failed[0].Name != objective {
		b, _ := json.MarshalIndent(suites, "", "  ")
		t.Fatalf("failing testcases %v, want %s alone\n%s", failed, objective, b)
	}
	if !strings.Contains(failed[0].Error.Error(), want) {
		t.Errorf("the failure does not name %q: %v", want, failed[0].Error)
	}
}

// syncBuffer is a bytes.Buffer a process writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
