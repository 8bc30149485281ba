package tracer

import (
	"os"
	"testing"

	"github.com/podtrace/podtrace/exporters/terminal"
	"github.com/podtrace/podtrace/phases"
)

func TestScratchReplay(t *testing.T) {
	dir := os.Getenv("SCRATCH_DIR")
	if dir == "" {
		t.Skip()
	}
	ds, err := LoadRecording(dir)
	if err != nil {
		t.Log(err)
	}
	c := New(Config{Backfill: true}, SinkFunc(func(tr *phases.Trace) { terminal.Waterfall(os.Stdout, tr) }), nil, nil)
	Replay(c, ds)
}
