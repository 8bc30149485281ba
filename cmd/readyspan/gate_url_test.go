package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/pipeline"
	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/rollout/tracker"
	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/web"
)

// runGateArgs runs `readyspan gate` with slo and args, and returns its exit status as main
// would set it, stdout and stderr.
func runGateArgs(t *testing.T, slo string, args ...string) (int, string, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "slo.yaml")
	if err := os.WriteFile(path, []byte(slo), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), append([]string{"gate", "--slo", path}, args...), &stdout, &stderr)
	code := 0
	if err != nil {
		code = 1
		var ec *exitCode
		if errors.As(err, &ec) {
			code = ec.code
		}
		if ec == nil || ec.err != nil {
			stderr.WriteString(err.Error())
		}
	}
	return code, stdout.String(), stderr.String()
}

// hostileDaemon serves a real capture's traces the way readyspan run does, with one Pod renamed
// to carry terminal escapes; they reach the ring only after the gate first asked for the
// rollouts, so that the gate waits for it (it began, in the capture, before the gate started).
func hostileDaemon(t *testing.T) (url, namespace, workload string) {
	t.Helper()
	deltas, err := tracer.Kinds.LoadRecording(filepath.Join("..", "..", "tracer", "testdata", "real-node", "run3-always-pull"))
	if err != nil {
		t.Fatal(err)
	}
	var pods []*phases.Trace
	var rollouts []*rollout.Trace
	pipeline.Replay(pipeline.Options{}, deltas, pipeline.Sinks{
		Pods:     tracer.SinkFunc(func(tr *phases.Trace) { pods = append(pods, tr) }),
		Rollouts: tracker.SinkFunc(func(tr *rollout.Trace) { rollouts = append(rollouts, tr) }),
	})
	if len(rollouts) != 1 || len(pods) != 2 {
		t.Fatalf("%d rollouts, %d Pods in the capture", len(rollouts), len(pods))
	}
	// The Pod with the slower pull gets the hostile name.
	hostile := "sleeper-54cc969757-rmkbd\x1b]8;;http://evil\x07\nFAKE: PASS"
	for i, p := range pods {
		if p.Pod.Name == "sleeper-54cc969757-rmkbd" {
			cp, pod := *p, *p.Pod
			pod.Name = hostile
			cp.Pod = &pod
			pods[i] = &cp
		}
	}
	ring := web.NewRing(web.RingConfig{})
	ui := web.NewServer(ring, web.ServerConfig{})
	var asked atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/rollouts" && !asked.Swap(true) {
			ui.ServeHTTP(w, r) // empty: nothing has ended yet
			for _, p := range pods {
				ring.AddPod(p)
			}
			ring.AddRollout(rollouts[0])
			return
		}
		ui.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	w := rollouts[0].Rollout.Workload
	return srv.URL, w.Namespace, w.Name
}

// TestGateURL: gate --url waits for the workload's next rollout in the daemon's ring and judges
// it: a slow pull breaks the gate and names the Pod (its hostile name escaped on the terminal
// and in the JUnit file), a lenient file passes; a daemon down, or answering something that is
// not its API, is exit 2 with what went wrong.
func TestGateURL(t *testing.T) {
	old := daemonPoll
	daemonPoll = 10 * time.Millisecond
	defer func() { daemonPoll = old }()

	url, ns, name := hostileDaemon(t)
	junitFile := filepath.Join(t.TempDir(), "gate.xml")
	code, out, errs := runGateArgs(t, "version: 1\nspans:\n  container.image_pull: {max: 100ms}\n",
		"deployment/"+name, "-n", ns, "--url", url, "--timeout", "20s", "--junit", junitFile)
	if code != 1 {
		t.Fatalf("a pull of 199 ms against 100 ms: exit %d\n%s%s", code, out, errs)
	}
	if !strings.Contains(out, "BROKEN       container.image_pull max") || !strings.Contains(out, "a4685581a94f4cf8bbd58c06af71625b") ||
		!strings.Contains(out, "judged the rollout in progress when the gate started: create, generation 1") || strings.Contains(out, "sleeper-54cc969757-96rj9") {
		t.Errorf("the output does not name the objective, the slow Pod's trace and the rollout:\n%s", out)
	}
	if strings.ContainsAny(out, "\x1b\x07") || strings.Contains(out, "\nFAKE: PASS") {
		t.Errorf("the hostile name reached the terminal raw:\n%q", out)
	}
	if b, err := os.ReadFile(junitFile); err != nil || bytes.ContainsAny(b, "\x1b\x07") || !strings.Contains(string(b), "container.image_pull max") {
		t.Errorf("junit: %v\n%q", err, b)
	}
	if !strings.Contains(errs, "waiting for the rollout of deployment/"+name) {
		t.Errorf("stderr: %q", errs)
	}

	url, ns, name = hostileDaemon(t)
	if code, out, errs := runGateArgs(t, "version: 1\nspans:\n  container.image_pull: {max: 1s}\n  workload.rollout: {max: 1m}\n",
		"deployment/"+name, "-n", ns, "--url", url, "-o", "json"); code != 0 || !strings.Contains(out, `"verdict": "pass"`) {
		t.Errorf("lenient: exit %d\n%s%s", code, out, errs)
	}

	garbage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("<html>login</html>")) }))
	defer garbage.Close()
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	met := "version: 1\nspans:\n  pod.startup: {max: 1m}\n"
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"down", []string{"deployment/web", "-n", "x", "--url", down.URL}, "connection refused"},
		{"garbage", []string{"deployment/web", "-n", "x", "--url", garbage.URL}, "not the API's JSON"},
		{"window, down", []string{"--for", "1h", "-n", "x", "--url", down.URL}, "connection refused"},
		{"bad url", []string{"deployment/web", "-n", "x", "--url", "ftp://x"}, "want http:// or https://"},
		{"token without url", []string{"deployment/web", "-n", "x", "--token-file", "t"}, "give its --url"},
		{"recording and url", []string{"--recording", "r", "--url", "http://x"}, "give one"},
		{"selector", []string{"--for", "1m", "-l", "a=b", "--url", "http://x"}, "narrow by namespace"},
		{"no token", []string{"deployment/web", "-n", "x", "--url", "http://x", "--token-file", filepath.Join(t.TempDir(), "none")}, "--token-file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := runGateArgs(t, met, tc.args...)
			if code != 2 || !strings.Contains(errs, tc.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, errs, tc.want)
			}
		})
	}
}
