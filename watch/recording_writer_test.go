package watch_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/readyspan/readyspan/internal/captures"
	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/watch"
)

// TestRecorderReadsBackItsOwnBytes: a recording written by the watch.Recorder loads into deltas that
// the watch.Recorder writes again byte for byte, so the writer and the reader agree on the format.
func TestRecorderReadsBackItsOwnBytes(t *testing.T) {
	deltas, err := tracer.Kinds.LoadRecording(captures.Path("run8-slow-pull-watch"))
	if err != nil {
		t.Fatal(err)
	}
	record := func(ds []watch.Delta) string {
		dir := t.TempDir()
		rec := watch.NewRecorder(tracer.Kinds, dir)
		for _, d := range ds {
			rec.Write(d)
		}
		if err := rec.Close(); err != nil {
			t.Fatal(err)
		}
		if rec.Written() != len(ds) {
			t.Fatalf("recorded %d of %d deltas", rec.Written(), len(ds))
		}
		return dir
	}
	first := record(deltas)
	again, err := tracer.Kinds.LoadRecording(first)
	if err != nil {
		t.Fatal(err)
	}
	second := record(again)
	files, _ := filepath.Glob(filepath.Join(first, "*"))
	if len(files) == 0 {
		t.Fatal("nothing recorded")
	}
	for _, f := range files {
		a, _ := os.ReadFile(f)
		b, err := os.ReadFile(filepath.Join(second, filepath.Base(f)))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs when recorded again (%v)", filepath.Base(f), err)
		}
	}
}
