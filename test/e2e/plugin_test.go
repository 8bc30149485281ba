//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestKubectlPlugin installs readyspan with `make install` into a temporary prefix, puts its bin/
// on PATH, and runs it the way a platform engineer would: through the real kubectl as the plugin
// `kubectl readyspan`. explain must find the Pod in the namespace -n names, reconstruct its trace
// from the API (trace ID = Pod UID, scheduling ending at the Scheduled event's eventTime), and
// name itself "kubectl readyspan" in help and errors.
func TestKubectlPlugin(t *testing.T) {
	e := Setup(t)
	kubectl := filepath.Join(e.Root, "bin", "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		Missing(t, "bin/kubectl (make cluster-build): %v", err)
	}
	prefix := t.TempDir()
	install := exec.Command("make", "-C", e.Root, "install", "PREFIX="+prefix)
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("make install PREFIX=%s: %v\n%s", prefix, err, out)
	}
	link, err := os.Readlink(filepath.Join(prefix, "bin", "kubectl-readyspan"))
	if err != nil || link != "readyspan" {
		t.Fatalf("kubectl-readyspan links to %q (%v), want readyspan", link, err)
	}
	env := append(os.Environ(), "PATH="+filepath.Join(prefix, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+e.Kubeconfig)
	plugin := func(args ...string) (stdout, stderr string, err error) {
		cmd := exec.Command(kubectl, args...)
		cmd.Env = env
		var o, s bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &s
		err = cmd.Run()
		return o.String(), s.String(), err
	}

	out, _, err := plugin("plugin", "list")
	if err != nil || !strings.Contains(out, filepath.Join(prefix, "bin", "kubectl-readyspan")) {
		t.Errorf("kubectl plugin list does not list the installed plugin (%v):\n%s", err, out)
	}
	version, err := os.ReadFile(filepath.Join(e.Root, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	out, stderr, err := plugin("readyspan", "version")
	if err != nil || !strings.HasPrefix(out, "readyspan "+strings.TrimSpace(string(version))+" ") {
		t.Errorf("kubectl readyspan version: %q %q (%v), want readyspan %s", out, stderr, err, strings.TrimSpace(string(version)))
	}
	_, stderr, err = plugin("readyspan", "explain", "-h")
	if !strings.Contains(stderr, "kubectl readyspan explain (pod|deployment|statefulset|daemonset|job|cronjob|node|rollout)/NAME") || !strings.Contains(stderr, "--request-timeout") {
		t.Errorf("kubectl readyspan explain -h (%v) does not name the plugin or lacks kubectl's flags:\n%s", err, stderr)
	}

	ns := e.Namespace(t, "plugin")
	pod := e.createPod(t, ns, sleeper("explained", BusyboxImage))
	ready := e.WaitPodsReady(t, ns, "app=explained", 1, 90*time.Second)[0]

	// The kubeconfig's context has no namespace: without -n, the Pod is not found in "default".
	_, stderr, err = plugin("readyspan", "explain", "pod/explained")
	if err == nil || !strings.Contains(stderr, "kubectl readyspan: pod default/explained not found") {
		t.Errorf("explain without -n: error %v, stderr %q; want the Pod looked up in default and the error to name kubectl readyspan", err, stderr)
	}
	out, stderr, err = plugin("readyspan", "explain", "pod/explained", "-n", ns, "-o", "json", "--request-timeout", "20s")
	if err != nil {
		t.Fatalf("kubectl readyspan explain pod/explained -n %s: %v\n%s", ns, err, stderr)
	}
	type span struct { // as terminal.JSONLines writes it
		TraceID string `json:"trace_id"`
		Name    string `json:"name"`
		End     string `json:"end"`
	}
	spans := map[string]span{}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var s span
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatalf("explain -o json line %q: %v", sc.Text(), err)
		}
		if s.TraceID != TraceID(string(pod.UID)) {
			t.Errorf("span %s has trace ID %s, want the Pod UID %s", s.Name, s.TraceID, TraceID(string(pod.UID)))
		}
		spans[s.Name] = s
	}
	for _, name := range append([]string{"pod.startup"}, Phases...) {
		if _, ok := spans[name]; !ok {
			t.Errorf("explain output has no %s span:\n%s", name, out)
		}
	}
	var scheduled time.Time
	for _, ev := range e.PodEvents(t, ns, ready.Name) {
		if ev.Reason == "Scheduled" {
			scheduled = EventTime(&ev)
		}
	}
	end, err := time.Parse(time.RFC3339Nano, spans["scheduling"].End)
	if err != nil || scheduled.IsZero() || !end.Equal(scheduled) {
		t.Errorf("explain's scheduling ends at %s (%v), the Scheduled event's eventTime is %s: want them equal", spans["scheduling"].End, err, scheduled.Format(time.RFC3339Nano))
	}
}
