package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/readyspan/readyspan/safetext"
)

// Strings a tenant who may create Pods and Events controls, as JSON string contents: an OSC that
// retitles the terminal, a screen clear and cursor home, a carriage return that overwrites the
// line, a bell, a tab and a newline that would break a table's row, a CSI as the C1 control
// U+009B, DEL, and bidirectional overrides and isolates.
const (
	hostilePodSuffix = `-sw\u001b]0;TITLE\u0007lx4`
	hostileContainer = `sl\u001b[2J\u001b[Heep\rOVERWRITE`
	hostileNode      = `node\u202etset\u2066x\u2069`
	hostileImage     = `127.0.0.1:5000/test/big2\u009b31m\u007f:1`
	hostileReason    = `Evil\u001b[31mREASON`
	hostileMessage   = `\u001b]0;TITLE\u0007\u001b[2J\u001b[H…\rOVERWRITE\tcol\nrow\u202eevil\u0085`
)

// hostileRecording copies the real capture run8-slow-pull-watch (a Deployment of two Pods, a
// cold pull) with hostile strings in a Pod's name, the container's name, the node's name and
// the image, consistently through every object, list and event that names them, and a Warning
// Event on that Pod with a hostile reason and message.
func hostileRecording(t *testing.T) (dir, namespace string) {
	t.Helper()
	src := filepath.Join("..", "..", "tracer", "testdata", "real-node", "run8-slow-pull-watch")
	dir = t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	container := regexp.MustCompile(`sleep([^e])`)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		s := strings.ReplaceAll(string(b), "-swlx4", hostilePodSuffix)
		s = container.ReplaceAllString(s, hostileContainer+"$1")
		s = strings.ReplaceAll(s, "nodetest", hostileNode)
		s = strings.ReplaceAll(s, "127.0.0.1:5000/test/big2:1", hostileImage)
		if e.Name() == "watch.events.core.v1.jsonl" {
			s += warningEventLine(t, s)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, "run8-slow-pull-watch"
}

// warningEventLine is a copy of the hostile Pod's Scheduled event, made a Warning with the
// hostile reason and message (a new name and UID, so it is an Event of its own).
func warningEventLine(t *testing.T, stream string) string {
	t.Helper()
	for _, line := range strings.Split(stream, "\n") {
		if !strings.Contains(line, `"reason":"Scheduled"`) || !strings.Contains(line, "TITLE") {
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatal(err)
		}
		obj := ev["object"].(map[string]any)
		var reason, message string
		if err := json.Unmarshal([]byte(`"`+hostileReason+`"`), &reason); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(`"`+hostileMessage+`"`), &message); err != nil {
			t.Fatal(err)
		}
		obj["type"], obj["reason"], obj["message"] = "Warning", reason, message
		md := obj["metadata"].(map[string]any)
		md["name"] = md["name"].(string) + "0"
		md["uid"] = "4e6f7448-6f73-7469-6c65-000000000001"
		out, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		return string(out) + "\n"
	}
	t.Fatal("the capture has no Scheduled event for the hostile Pod")
	return ""
}

// assertTerminalSafe fails if out holds anything a terminal would act on rather than draw: a
// byte that is not UTF-8, a C0 control but '\n', DEL, a C1 control, a bidirectional control or
// a line separator.
func assertTerminalSafe(t *testing.T, what string, out []byte) {
	t.Helper()
	for i := 0; i < len(out); {
		r, size := utf8.DecodeRune(out[i:])
		bad := ""
		switch {
		case r == utf8.RuneError && size == 1:
			bad = fmt.Sprintf("byte 0x%02x that is not UTF-8", out[i])
		case r < 0x20 && r != '\n', r >= 0x7f && r <= 0x9f:
			bad = fmt.Sprintf("control U+%04X", r)
		case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x2028, r == 0x2029:
			bad = fmt.Sprintf("bidirectional control or separator U+%04X", r)
		}
		if bad != "" {
			lo := max(0, i-60)
			t.Fatalf("%s: %s at byte %d, after %q", what, bad, i, out[lo:i])
		}
		i += size
	}
}

// Every text path that prints what the cluster said — replay's waterfalls and Gantt chart, its
// JSON lines, its warnings, explain's waterfalls and Gantt chart (from an apiserver serving the
// same objects), and the errors a command ends with — shows the hostile strings escaped, and
// shows them (an escape, not silence).
func TestHostileStringsNeverReachTheTerminal(t *testing.T) {
	dir, ns := hostileRecording(t)
	for _, args := range [][]string{
		{"replay", dir},
		{"replay", "-o", "json", dir},
	} {
		var stdout, stderr bytes.Buffer
		if err := run(context.Background(), args, &stdout, &stderr); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		assertTerminalSafe(t, fmt.Sprintf("%v stdout", args), stdout.Bytes())
		assertTerminalSafe(t, fmt.Sprintf("%v stderr", args), stderr.Bytes())
		if args[1] == "-o" {
			// The guard's escapes of what JSON leaves raw (U+202E, U+0085) are JSON's own.
			for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
				if !json.Valid([]byte(line)) {
					t.Fatalf("not a JSON line: %s", line)
				}
			}
			if !strings.Contains(stdout.String(), `\u202e`) {
				t.Errorf("the JSON lines do not carry the node's override, escaped")
			}
		} else {
			for _, want := range []string{`sw\x1b]0;TITLE\x07lx4`, `sl\x1b[2J\x1b[Heep\`, `deployment run8-slow-pull-watch/sleeper`} {
				if !strings.Contains(stdout.String(), want) {
					t.Errorf("%v: the output does not show %q escaped:\n%s", args, want, stdout.String())
				}
			}
		}
	}

	srv := serveCapture(t, dir, ns)
	kubeconfig := writeKubeconfig(t, srv.URL)
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"explain", "deployment/sleeper", "--pods", "-n", ns, "--kubeconfig", kubeconfig}, &stdout, &stderr); err != nil {
		t.Fatalf("explain: %v\n%s", err, stderr.String())
	}
	assertTerminalSafe(t, "explain stdout", stdout.Bytes())
	assertTerminalSafe(t, "explain stderr", stderr.Bytes())
	if !strings.Contains(stdout.String(), `sw\x1b]0;TITLE\x07lx4`) {
		t.Errorf("explain does not show the hostile Pod escaped:\n%s", stdout.String())
	}

	// An apiserver's error names what it was asked for; a command's error says it back.
	stderr.Reset()
	err := run(context.Background(), []string{"explain", "pod/x\x1b]0;T\x07", "-n", ns, "--kubeconfig", kubeconfig}, &stdout, &stderr)
	if err == nil {
		t.Fatal("explain of a Pod that does not exist succeeded")
	}
	printError(&stderr, err)
	assertTerminalSafe(t, "explain's error", stderr.Bytes())
}

// The printer watch uses for each trace, and the warnings every command prints, escape as
// replay's do, and a message of 1 MiB is cut to a line.
func TestWarningsAndLogsAreEscaped(t *testing.T) {
	var msg string
	if err := json.Unmarshal([]byte(`"`+hostileMessage+`"`), &msg); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	printWarning(&out, msg)
	printWarning(&out, strings.Repeat("x", 1<<20))
	assertTerminalSafe(t, "warning", out.Bytes())
	if out.Len() > 2*maxMessage+200 {
		t.Errorf("a 1 MiB warning printed %d bytes", out.Len())
	}
	out.Reset()
	log, err := newLogger(safetext.NewWriter(&out), "info")
	if err != nil {
		t.Fatal(err)
	}
	log.Warn(msg, "reason", msg, "pod", "ns/"+msg, "err", fmt.Errorf("wrapped: %s", msg))
	assertTerminalSafe(t, "log line", out.Bytes())
	if !strings.Contains(out.String(), `\x1b]0;TITLE`) && !strings.Contains(out.String(), `\u001b]0;TITLE`) {
		t.Errorf("the log line does not show the hostile message escaped: %s", out.String())
	}
}

// serveCapture answers the reads explain makes from a capture's list files.
func serveCapture(t *testing.T, dir, ns string) *httptest.Server {
	t.Helper()
	lists := map[string]string{
		"/api/v1/namespaces/" + ns + "/pods":                             "pods.json",
		"/apis/apps/v1/namespaces/" + ns + "/replicasets":                "replicasets.json",
		"/apis/apps/v1/namespaces/" + ns + "/deployments":                "deployments.json",
		"/api/v1/namespaces/" + ns + "/services":                         "services.json",
		"/api/v1/namespaces/" + ns + "/events":                           "events.core.v1.json",
		"/apis/discovery.k8s.io/v1/namespaces/" + ns + "/endpointslices": "endpointslices.json",
		"/version": "apiserver-version.json",
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if f, ok := lists[r.URL.Path]; ok {
			b, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				t.Error(err)
			}
			w.Write(b)
			return
		}
		if name, ok := strings.CutPrefix(r.URL.Path, "/apis/apps/v1/namespaces/"+ns+"/deployments/"); ok {
			b, _ := os.ReadFile(filepath.Join(dir, "deployments.json"))
			var list struct{ Items []json.RawMessage }
			if err := json.Unmarshal(b, &list); err != nil {
				t.Error(err)
			}
			for _, item := range list.Items {
				var o struct{ Metadata struct{ Name string } }
				_ = json.Unmarshal(item, &o)
				if o.Metadata.Name == name {
					w.Write(item)
					return
				}
			}
		}
		// A kind the capture holds no list of has none, as an apiserver answers.
		for suffix, list := range map[string]string{
			"/controllerrevisions":    `"kind":"ControllerRevisionList","apiVersion":"apps/v1"`,
			"/statefulsets":           `"kind":"StatefulSetList","apiVersion":"apps/v1"`,
			"/daemonsets":             `"kind":"DaemonSetList","apiVersion":"apps/v1"`,
			"/jobs":                   `"kind":"JobList","apiVersion":"batch/v1"`,
			"/cronjobs":               `"kind":"CronJobList","apiVersion":"batch/v1"`,
			"/persistentvolumeclaims": `"kind":"PersistentVolumeClaimList","apiVersion":"v1"`,
		} {
			if strings.HasSuffix(r.URL.Path, suffix) {
				fmt.Fprintf(w, `{%s,"metadata":{},"items":[]}`, list)
				return
			}
		}
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":%q,"reason":"NotFound","code":404}`, r.URL.Path+" not found")
	}))
	t.Cleanup(srv.Close)
	return srv
}

func writeKubeconfig(t *testing.T, server string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubeconfig")
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
users: [{name: u, user: {}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`, server)
	if err := os.WriteFile(p, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A webhook's refusal is the webhook author's text, quoted by the apiserver into every
// FailedCreate and the Deployment's ReplicaFailure condition: the real capture of a denying
// webhook, its message made hostile, replays to a blocked rollout whose Gantt chart (sentence,
// error, rejection row) shows it escaped.
func TestHostileRejectionNeverReachesTheTerminal(t *testing.T) {
	src := filepath.Join("..", "..", "tracer", "testdata", "real-node", "rejections-webhook")
	dir := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		s := strings.ReplaceAll(string(b), "Pods labelled readyspan.dev/deny are denied", hostileMessage)
		if err := os.WriteFile(filepath.Join(dir, e.Name()), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"replay", dir}, &stdout, &stderr); err != nil {
		t.Fatalf("replay: %v", err)
	}
	assertTerminalSafe(t, "replay of a hostile rejection", stdout.Bytes())
	assertTerminalSafe(t, "replay's stderr", stderr.Bytes())
	out := stdout.String()
	if !strings.Contains(out, "blocked (admission_webhook: admission webhook") || !strings.Contains(out, "OVERWRITE") {
		t.Errorf("the blocked rollout and its escaped message are not shown:\n%s", out)
	}
}
