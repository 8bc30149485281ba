package tracer

import (
	"bytes"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/watch"
)

// countStats counts the correlator's Unparsed calls by reason.
type countStats struct {
	noStats
	unparsed map[string]int
}

func (c *countStats) Unparsed(reason string) {
	if c.unparsed == nil {
		c.unparsed = map[string]int{}
	}
	c.unparsed[reason]++
}

// TestUnparsedMessages: an event message in an unknown format is counted once per Event (not
// per version of it) under its reason, and logged once per reason and format shape.
func TestUnparsedMessages(t *testing.T) {
	s := newSim(t, "default")
	d := s.deployment("web", 1, 0)
	rs := s.replicaSet(d, "7d9f8c6b5", 5) // a known "Scaled up replica set" message
	ref := &corev1.ObjectReference{Kind: "Deployment", Namespace: s.ns, Name: d.Name, UID: d.UID, APIVersion: "apps/v1"}
	e := s.coreEvent(ref, "deployment-controller", "", corev1.EventTypeNormal, "ScalingReplicaSet", "Resized replica set "+rs.Name+" to 3", 10)
	e = e.DeepCopy() // the same Event, merged again: one Event, two versions
	e.Count, e.ResourceVersion = 2, s.nextRV()
	s.emit(ResourceEvents, watch.Modified, e, s.at(11))
	for i, msg := range []string{
		`Fetched image "a:1" in 3.2s`, // two images, one shape
		`Fetched image "b:2" in 1.1s`,
		`Image "c:3" came from the cache`,
		`Successfully pulled image "d:4" in 1s (1s including waiting). Image size: 10 bytes.`, // known
	} {
		name := fmt.Sprintf("p%d", i)
		ms := 100 + 1000*i
		s.pod(name, nil, nil, []container{{name: "web", image: "img"}}, ms)
		s.bind(name, ms+10)
		s.kubeletStart(name, ms+30, ms+60)
		s.kubeletEvent(name, "web", false, corev1.EventTypeNormal, "Pulled", msg, ms+100)
		s.kubeletEvent(name, "web", false, corev1.EventTypeNormal, "Created", "Container created", ms+110)
		s.kubeletEvent(name, "web", false, corev1.EventTypeNormal, "Started", "Container started", ms+120)
		s.kubeletEvent(name, "web", false, corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container web in pod "+name+"_default(uid)", ms+130)
		s.kubeletEvent(name, "web", false, corev1.EventTypeWarning, "Failed", "Error: failed to create containerd task", ms+140)
		s.running(name, "web", false, ms+150, ms+160, true)
		s.ready(name, ms+170)
	}
	var logs bytes.Buffer
	stats := &countStats{}
	var traces int
	c := New(Config{}, SinkFunc(func(*phases.Trace) { traces++ }), stats, slog.New(slog.NewTextHandler(&logs, nil)))
	for _, d := range s.deltas {
		c.Handle(d)
	}
	if traces != 4 {
		t.Fatalf("%d traces, want 4", traces)
	}
	if want := map[string]int{"Pulled": 3, "ScalingReplicaSet": 1}; !maps.Equal(stats.unparsed, want) {
		t.Errorf("unparsed %v, want %v", stats.unparsed, want)
	}
	if n := strings.Count(logs.String(), "unknown format"); n != 3 {
		t.Errorf("%d warnings, want one per reason and shape (3):\n%s", n, logs.String())
	}
	for _, want := range []string{`Fetched image \"a:1\" in 3.2s`, `Image \"c:3\" came from the cache`, "Resized replica set"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no warning quoting %s:\n%s", want, logs.String())
		}
	}

	// Every message in the real captures is in a known format.
	matches, _ := filepath.Glob(filepath.Join("testdata", "real-node", "run*"))
	var dirs []string
	for _, dir := range matches {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			continue
		}
		dirs = append(dirs, dir)
		deltas, err := Kinds.LoadRecording(dir)
		if err != nil {
			t.Fatal(err)
		}
		stats := &countStats{}
		Replay(New(Config{Backfill: true}, SinkFunc(func(*phases.Trace) {}), stats, nil), deltas)
		if len(stats.unparsed) > 0 {
			t.Errorf("%s: unparsed %v", dir, stats.unparsed)
		}
	}
	if len(dirs) == 0 {
		t.Error("no captures")
	}
}
