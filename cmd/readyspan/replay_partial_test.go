package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/readyspan/readyspan/internal/captures"
)

// copyRecording copies the real capture run8 (watch streams) into a temporary directory and
// passes the named file through edit.
func copyRecording(t *testing.T, file string, edit func([]byte) []byte) string {
	t.Helper()
	return captures.Copy(t, "run8-slow-pull-watch", map[string]func([]byte) []byte{file: edit})
}

// A replay that skipped part of its recording exits non-zero and names what it skipped; with
// --allow-partial it warns and replays the rest. A directory that is no recording is an error
// either way. A line over the old 16 MiB cap is no part lost.
func TestReplayPartialRecording(t *testing.T) {
	src := captures.Path("run8-slow-pull-watch")
	var whole bytes.Buffer
	if err := run(context.Background(), []string{"replay", src, "-o", "json"}, &whole, &whole); err != nil {
		t.Fatal(err)
	}
	// A Node in the Pods' stream, at line 3 (run8's lines carry no kind-less Nodes).
	node := `{"type":"ADDED","object":{"kind":"Node","apiVersion":"v1","metadata":{"name":"x","uid":"0b1e0b1e-0000-4000-8000-000000000001"}}}` + "\n"
	withNode := copyRecording(t, "watch.pods.jsonl", func(b []byte) []byte {
		lines := strings.SplitAfter(string(b), "\n")
		return []byte(strings.Join(lines[:2], "") + node + strings.Join(lines[2:], ""))
	})
	// A 17 MiB label value on the first Pod's first line.
	longLine := copyRecording(t, "watch.pods.jsonl", func(b []byte) []byte {
		return bytes.Replace(b, []byte(`"labels":{`), []byte(`"labels":{"padding":"`+strings.Repeat("x", 17<<20)+`",`), 1)
	})
	garbage := t.TempDir()
	for _, name := range []string{"watch.pods.jsonl", "watch.events.core.v1.jsonl", "watch.replicasets.jsonl"} {
		if err := os.WriteFile(filepath.Join(garbage, name), []byte(strings.Repeat("\x1b[2J garbage\n", 7)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	empty := t.TempDir()
	for _, name := range []string{"watch.pods.jsonl", "pods.json", "watch.events.core.v1.jsonl"} {
		if err := os.WriteFile(filepath.Join(empty, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name       string
		args       []string
		wantErr    string   // "" for success
		wantStderr []string // in the order given
		sameOutput bool     // stdout is the whole capture's replay
	}{
		{
			name:       "skipped line",
			args:       []string{"replay", withNode, "-o", "json"},
			wantErr:    "skipped 1 entry: " + filepath.Join(withNode, "watch.pods.jsonl") + `:3: a "Node" object in the pods stream, which holds Pods; --allow-partial replays the rest`,
			wantStderr: []string{"skipped: " + filepath.Join(withNode, "watch.pods.jsonl") + ":3: "},
		},
		{
			name:       "skipped line allowed",
			args:       []string{"replay", withNode, "-o", "json", "--allow-partial"},
			wantStderr: []string{"skipped: " + filepath.Join(withNode, "watch.pods.jsonl") + ":3: ", "warning: skipped 1 entry: ", "(replaying the rest: --allow-partial)"},
			sameOutput: true,
		},
		{
			name:       "long line",
			args:       []string{"replay", longLine, "-o", "json"},
			sameOutput: true,
		},
		{
			name:    "garbage",
			args:    []string{"replay", garbage, "--allow-partial"},
			wantErr: garbage + " is not a readyspan recording: found watch.replicasets.jsonl (7 lines, none a watch event), watch.events.core.v1.jsonl (7 lines, none a watch event), watch.pods.jsonl (7 lines, none a watch event); first: ",
		},
		{
			name:    "empty files",
			args:    []string{"replay", empty},
			wantErr: empty + " is not a readyspan recording: found watch.events.core.v1.jsonl (empty), watch.pods.jsonl (empty)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tt.args, &stdout, &stderr)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("error %v, want success", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("error %v, want one saying %q", err, tt.wantErr)
			}
			if err != nil {
				t.Log(err)
			}
			rest := stderr.String()
			for _, w := range tt.wantStderr {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("stderr %q: want it to say %q", stderr.String(), w)
				}
				rest = rest[i+len(w):]
			}
			if tt.wantErr != "" && stdout.Len() > 0 {
				t.Errorf("a refused replay printed %d bytes of traces", stdout.Len())
			}
			if tt.sameOutput && !bytes.Equal(stdout.Bytes(), whole.Bytes()) {
				t.Errorf("output (%d bytes) differs from the whole capture's replay (%d bytes)", stdout.Len(), whole.Len())
			}
		})
	}
}

// A $KUBECONFIG that names no file is said to be so, as a missing --kubeconfig is, not reported
// as an unreachable http://localhost:8080 (where client-go goes without a configuration).
func TestKubeconfigEnvMissing(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // not in a Pod: no in-cluster configuration
	t.Setenv("KUBECONFIG", "/nonexistent")
	for _, args := range [][]string{
		{"explain", "pod/web", "--request-timeout", "2s"},
		{"watch", "--for", "1s"},
		{"record", filepath.Join(t.TempDir(), "rec"), "--for", "1s"},
		{"run", "--metrics-addr", "127.0.0.1:0"},
	} {
		var out bytes.Buffer
		err := run(context.Background(), args, &out, &out)
		const want = "kubeconfig not found: $KUBECONFIG names /nonexistent, and no such file exists"
		if err == nil || err.Error() != want {
			t.Errorf("%v: error %v, want %q", args, err, want)
		}
	}
	// A list with one file that exists is a kubeconfig.
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config")
	if err := os.WriteFile(cfg, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", "/nonexistent"+string(os.PathListSeparator)+cfg)
	if err := missingKubeconfigEnv(); err != nil {
		t.Errorf("KUBECONFIG with one existing file: %v", err)
	}
}
