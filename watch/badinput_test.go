package watch_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/watch"
)

// A recording directory with unreadable and truncated lines loads what it can and names each
// bad line once, on one line.
func TestLoadRecordingTruncatedLines(t *testing.T) {
	dir := t.TempDir()
	lines := []string{
		`{"type":"ADDED","object":{"metadata":{"name":"p","namespace":"d","uid":"u1","resourceVersion":"1"}},"recv":"2026-01-02T03:04:05Z"}`,
		`{"type":"ADDED","object":{"metadata":{"name":"p"`, // truncated: the recorder was killed
		`not json at all`,
		`{"type":"SOMETHING","object":{}}`,
		`{"type":"MODIFIED","object":{"metadata":{"name":"p","namespace":"d","uid":"u1","resourceVersion":"2"}},"recv":"2026-01-02T03:04:06Z"}`,
	}
	if err := os.WriteFile(filepath.Join(dir, "watch.pods.jsonl"), []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "audit.jsonl"), []byte("{\"stage\":\"ResponseComplete\"\n{broken\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	deltas, err := tracer.Kinds.LoadRecording(dir)
	le, ok := err.(*watch.LoadError)
	if !ok || len(le.Problems) != 5 || len(deltas) != 2 {
		t.Fatalf("got %d deltas, error %v; want 2 deltas and 5 problems", len(deltas), err)
	}
	if strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "skipped 5 entries") {
		t.Fatalf("error %q: want one line counting the 5 bad lines", err)
	}
}

// The audit log followed live: bad and truncated lines are counted and skipped, a line written
// in two pieces is read once whole, and a rotated or truncated log is read from its start.
func TestTailAuditBadLinesAndRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	good := func(name string) string {
		return fmt.Sprintf(`{"stage":"ResponseComplete","verb":"create","userAgent":"kubectl/v1.37.2","objectRef":{"resource":"pods","namespace":"d","name":%q},"responseStatus":{"code":201},"requestReceivedTimestamp":"2026-01-02T03:04:05.000001Z","stageTimestamp":"2026-01-02T03:04:05.010001Z"}`+"\n", name)
	}
	appendTo := func(s string) {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	appendTo("")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := make(chan watch.Delta, 100)
	errs := &watch.CountErrors{}
	done := make(chan error, 1)
	go func() { done <- tracer.Kinds.TailAudit(ctx, path, out, errs, slog.New(slog.DiscardHandler)) }()
	next := func(want string) {
		t.Helper()
		select {
		case d := <-out:
			if d.Audit.ObjectRef.Name != want {
				t.Fatalf("got the audit entry of %q, want %q", d.Audit.ObjectRef.Name, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no audit entry for %q", want)
		}
	}
	appendTo(good("a") + "{\"stage\":\"Resp\n" + "garbage\n")
	next("a")
	half := good("b")
	appendTo(half[:40])
	time.Sleep(300 * time.Millisecond) // the tailer sees the partial line at EOF
	appendTo(half[40:])
	next("b")
	// Rotated: renamed away, a new file at the path.
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	appendTo(good("c"))
	next("c")
	// Truncated in place (copytruncate), then written again.
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	appendTo(good("d"))
	next("d")
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := errs.Snapshot()["audit/unreadable"]; n != 2 {
		t.Fatalf("%d unreadable audit lines counted, want 2 (%v)", n, errs.Snapshot())
	}
	select {
	case d := <-out:
		t.Fatalf("unexpected extra entry %+v", d.Audit)
	default:
	}
}
