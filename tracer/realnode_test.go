package tracer

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/readyspan/readyspan/phases"
)

// replayDir rebuilds the traces of a recording as `readyspan replay` does.
func replayDir(t *testing.T, dir string) []*phases.Trace {
	t.Helper()
	deltas, err := LoadRecording(dir)
	if err != nil {
		t.Fatal(err)
	}
	var traces []*phases.Trace
	c := New(Config{Backfill: true}, SinkFunc(func(tr *phases.Trace) { traces = append(traces, tr) }), nil, nil)
	Replay(c, deltas)
	return traces
}

// realNodeDirs lists the capture directories in testdata/real-node.
func realNodeDirs(t *testing.T) []string {
	t.Helper()
	matches, _ := filepath.Glob(filepath.Join("testdata", "real-node", "run*"))
	var dirs []string
	for _, m := range matches {
		if fi, err := os.Stat(m); err == nil && fi.IsDir() {
			dirs = append(dirs, m)
		}
	}
	if len(dirs) == 0 {
		t.Fatal("no captures in testdata/real-node")
	}
	return dirs
}

// TestRealNode replays the captures from a real v1.37.2 control plane and kubelet
// (testdata/real-node, copied from the shared fixtures) and compares with golden output.
func TestRealNode(t *testing.T) {
	for _, dir := range realNodeDirs(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			traces := replayDir(t, dir)
			if len(traces) == 0 {
				t.Fatal("no traces")
			}
			for _, tr := range traces {
				checkShape(t, tr)
			}
			spans, waterfall := render(t, traces)
			again, _ := render(t, replayDir(t, dir))
			if !bytes.Equal(spans, again) {
				t.Fatal("replay is not deterministic")
			}
			golden(t, filepath.Join("testdata", "real-node", filepath.Base(dir)+".txtar"), spans, waterfall)
		})
	}
}

// TestRealNodeSlowPull checks the reconstruction against what the kubelet itself stated in
// run8's Pulled messages: "in 4.778s (4.779s including waiting)" and "in 26ms (4.471s
// including waiting)" (two Pods pulling one image; the second waited behind the first).
func TestRealNodeSlowPull(t *testing.T) {
	traces := replayDir(t, filepath.Join("testdata", "real-node", "run8-slow-pull-watch"))
	want := map[string][2]time.Duration{
		"sleeper-6b9c87548b-swlx4": {4779 * time.Millisecond, 4778 * time.Millisecond},
		"sleeper-6b9c87548b-ghwzl": {4471 * time.Millisecond, 26 * time.Millisecond},
	}
	for _, tr := range traces {
		w, ok := want[tr.Pod.Name]
		if !ok {
			continue
		}
		delete(want, tr.Pod.Name)
		pull := tr.Find("container/sleep/image_pull")
		transfer := tr.Find("container/sleep/image_pull/transfer")
		if pull == nil || transfer == nil {
			t.Fatalf("%s: missing pull spans", tr.Pod.Name)
		}
		// Pulling → Pulled from the events' nanosecond names brackets the kubelet's own
		// "including waiting" figure (same clock): never shorter, longer by less than the
		// figure's truncation plus the events' stamping (evidence_test.go states both).
		if over := pull.Duration() - w[0]; over < 0 || over >= pulledTruncation+pulledStampSlack {
			t.Errorf("%s: pull %v, kubelet said %v", tr.Pod.Name, pull.Duration(), w[0])
		}
		if transfer.Duration() != w[1] || !transfer.End.Equal(pull.End) {
			t.Errorf("%s: transfer %v ending %v, want %v ending at Pulled %v", tr.Pod.Name, transfer.Duration(), transfer.End, w[1], pull.End)
		}
		if pull.Attr(phases.AttrImageCache) != "cold" || pull.Attr(phases.AttrImageSize) != int64(34704198) {
			t.Errorf("%s: pull attrs %v", tr.Pod.Name, pull.Attrs)
		}
		if tr.Summary.Outcome != phases.OutcomeReady {
			t.Errorf("%s: outcome %s", tr.Pod.Name, tr.Summary.Outcome)
		}
	}
	if len(want) > 0 {
		t.Fatalf("no trace for %v", want)
	}
}

// TestLoadRecordingBadLines: a malformed line is reported with its place and the rest loads.
func TestLoadRecordingBadLines(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join("testdata", "real-node", "run8-slow-pull-watch", "watch.pods.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	bad := append([]byte("{not json\n{\"type\":\"SURPRISE\",\"object\":{}}\n"), src...)
	if err := os.WriteFile(filepath.Join(dir, "watch.pods.jsonl"), bad, 0o644); err != nil {
		t.Fatal(err)
	}
	deltas, err := LoadRecording(dir)
	le, ok := err.(*LoadError)
	if !ok || len(le.Problems) != 2 {
		t.Fatalf("want a LoadError with 2 problems, got %v", err)
	}
	if len(deltas) != bytes.Count(src, []byte("\n")) {
		t.Fatalf("loaded %d deltas, want every good line (%d)", len(deltas), bytes.Count(src, []byte("\n")))
	}
	if _, err := LoadRecording(t.TempDir()); err == nil {
		t.Fatal("an empty directory must be an error")
	}
}
