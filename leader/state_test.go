package leader

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

func TestStateFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state")
	if st, err := ReadState(path); st != nil || err != nil {
		t.Fatalf("missing state file: %v %v", st, err)
	}
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.FixedZone("CET", 3600))
	clk := testingclock.NewFakePassiveClock(now.Add(-3 * time.Minute))
	rec := newRecorder()
	g := New(Config{Sink: rec, Metrics: rec, Clock: clk})
	for _, e := range []struct {
		uid string
		at  time.Time
	}{{"old", now.Add(-3 * time.Minute)}, {"a", now.Add(-time.Second)}, {"b", now}} {
		clk.SetTime(e.at)
		g.Offer(watchTrace(e.uid, e.at))
	}
	if err := g.WriteState(path); err != nil {
		t.Fatal(err)
	}
	// The format is what earlier versions wrote and read: keep it.
	b, _ := os.ReadFile(path)
	if want := `{"stoppedAt":"2026-11-30T09:00:00Z","exported":["a","b"]}`; string(b) != want {
		t.Fatalf("state file %s, want %s", b, want)
	}
	st, err := ReadState(path)
	if err != nil {
		t.Fatal(err)
	}
	if !st.StoppedAt.Equal(now) || len(st.Exported) != 2 || !st.Skip()["a"] || !st.Skip()["b"] {
		t.Fatalf("state %+v: want the stop time and the 2 recent exports", st)
	}
	if err := os.WriteFile(path, []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadState(path); err == nil || !strings.Contains(err.Error(), "not a readyspan state file") {
		t.Fatalf("garbage state file: error %v", err)
	}
}
