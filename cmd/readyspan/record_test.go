package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/readyspan/readyspan/internal/captures"
	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/watch"
)

// A recording written by `record` replays to the same traces as the stream it recorded.
func TestRecordReplayRoundTrip(t *testing.T) {
	src := filepath.Join("..", "..", "tracer", "testdata", "real-node", "run8-slow-pull-watch")
	deltas, err := tracer.Kinds.LoadRecording(src)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rec := watch.NewRecorder(tracer.Kinds, dir)
	for _, d := range deltas {
		rec.Write(d)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	var a, b bytes.Buffer
	if err := run(context.Background(), []string{"replay", src, "-o", "json"}, &a, &a); err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), []string{"replay", "-o", "json", dir}, &b, &b); err != nil {
		t.Fatal(err)
	}
	if a.Len() == 0 || !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatalf("replay of the re-recorded stream differs:\n%s\n---\n%s", a.String()[:min(400, a.Len())], b.String()[:min(400, b.Len())])
	}
}

func TestCommandErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"replay"}, "replay needs one argument"},
		{[]string{"replay", "/nonexistent-dir"}, "no such file or directory"},
		{[]string{"explain", "pod"}, "want pod/NAME, deployment/NAME, statefulset/NAME, daemonset/NAME, job/NAME, cronjob/NAME, node/NAME or rollout/NAME"},
		{[]string{"run", "--kubeconfig", "/nonexistent"}, "kubeconfig /nonexistent"},
		{[]string{"watch", "-o", "yaml", "--kubeconfig", "/nonexistent"}, `unknown output "yaml"`},
		{[]string{"explain", "pod/web", "--kubeconfig", "/nonexistent"}, "kubeconfig /nonexistent"},
		{[]string{"explain", "pod/web", "--no-such-flag"}, "unknown flag: --no-such-flag"},
		{[]string{"run", "extra"}, "run takes no arguments"},
		{[]string{"run", "--shard", "2", "--total-shards", "2"}, "--shard must be in [0, 2) for --total-shards=2, got 2"},
		{[]string{"run", "--total-shards", "0"}, "--total-shards must be at least 1"},
		{[]string{"run", "--metrics-pod-labels", "namespace,pod"}, `--metrics-pod-labels: unknown label "pod" (allowed: namespace, workload)`},
		{[]string{"run", "--metrics-pod-labels", "workload", "--metrics-label-limit", "0"}, "--metrics-label-limit must be at least 1"},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		err := run(context.Background(), tt.args, &out, &out)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: error %v, want it to say %q", tt.args, err, tt.want)
		}
	}
}

// Invoked by kubectl as its plugin, help and errors name "kubectl readyspan".
func TestHelpNamesThePlugin(t *testing.T) {
	defer func(p string) { prog = p }(prog)
	prog = programName("/usr/local/bin/kubectl-readyspan")
	var out bytes.Buffer
	if err := run(context.Background(), []string{"help"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "kubectl readyspan explain  (pod|deployment|statefulset|daemonset|job|cronjob|node|rollout)/NAME") || strings.Contains(out.String(), "\n  readyspan ") {
		t.Errorf("help does not name the plugin:\n%s", out.String())
	}
	out.Reset()
	err := run(context.Background(), []string{"explain", "-h"}, &out, &out)
	if err == nil || !strings.Contains(out.String(), "Usage:\n  kubectl readyspan explain (pod|deployment|statefulset|daemonset|job|cronjob|node|rollout)/NAME") || !strings.Contains(out.String(), "--context string") {
		t.Errorf("explain -h (error %v) does not name the plugin or lacks kubectl's flags:\n%s", err, out.String())
	}
	out.Reset()
	err = run(context.Background(), []string{"frobnicate"}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), `"kubectl readyspan help"`) {
		t.Errorf("unknown command error %v does not name the plugin", err)
	}
}

// replay and explain print, as warnings, the traces whose timestamps cannot be in that order: a
// real capture with one Pod's Ready moved thirty years back.
func TestReplayPrintsImpossibleOrderWarnings(t *testing.T) {
	const pod = "sleeper-7b67f9b4dd-hfswn"
	dir := captures.Copy(t, "run2-ifnotpresent", map[string]func([]byte) []byte{"pods.json": func(b []byte) []byte {
		var list struct {
			Items []map[string]any `json:"items"`
		}
		if err := json.Unmarshal(b, &list); err != nil {
			t.Fatal(err)
		}
		moved := false
		for _, p := range list.Items {
			if p["metadata"].(map[string]any)["name"] != pod {
				continue
			}
			for _, c := range p["status"].(map[string]any)["conditions"].([]any) {
				if c := c.(map[string]any); c["type"] == "Ready" {
					c["lastTransitionTime"], moved = "1996-11-30T08:36:24Z", true
				}
			}
		}
		if !moved {
			t.Fatalf("no Ready condition of %s in run2-ifnotpresent", pod)
		}
		b, err := json.Marshal(map[string]any{"kind": "List", "apiVersion": "v1", "items": list.Items})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}})
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"replay", dir}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	warnings := strings.Count(stderr.String(), "warning: pod ")
	if warnings != 1 || !strings.Contains(stderr.String(), pod+" (trace ") || !strings.Contains(stderr.String(), "timestamps out of order") {
		t.Errorf("replay printed %d warnings, want one naming %s:\n%s", warnings, pod, stderr.String())
	}
}
