package tracer

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/readyspan/readyspan/phases"
)

// replaySim replays a simulated stream and returns the traces and Replay's warnings.
func replaySim(t *testing.T, deltas []Delta, stats Stats) ([]*phases.Trace, []string) {
	t.Helper()
	var traces []*phases.Trace
	c := New(Config{}, SinkFunc(func(tr *phases.Trace) { traces = append(traces, tr) }), stats, nil)
	warnings := Replay(c, deltas)
	if n := c.InFlight(); n != 0 {
		t.Fatalf("%d Pods left in flight", n)
	}
	return traces, warnings
}

// Pods at the API's limits: many containers, names at their maximum lengths (a Pod name is a
// 253-character DNS subdomain, a container name a 63-character label), non-ASCII where the API
// allows it (images, messages). Each gives one complete trace with every container in it.
func TestPodsAtTheLimits(t *testing.T) {
	long := func(prefix string, n int) string { return prefix + strings.Repeat("x", n-len(prefix)) }
	for _, tc := range []struct {
		name           string
		pod            string
		inits, ctrs    int
		ctrName, image string
	}{
		{"100 containers and 50 init containers", "many", 50, 100, "c", "busybox"},
		{"names at maximum length", long("p", 253), 1, 1, long("c", 60), long("registry.example/", 200) + ":v1"},
		{"non-ASCII image and messages", "unicode", 1, 2, "c", "registry.example/ウェブ/画像:版"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t, "default")
			var inits, ctrs []container
			for i := range tc.inits {
				name := fmt.Sprintf("%s-init-%d", tc.ctrName, i)
				if len(name) > 63 {
					name = name[len(name)-63:]
				}
				inits = append(inits, container{name: name, image: tc.image})
			}
			for i := range tc.ctrs {
				name := fmt.Sprintf("%s-%d", tc.ctrName, i)
				if len(name) > 63 {
					name = name[len(name)-63:]
				}
				ctrs = append(ctrs, container{name: name, image: tc.image})
			}
			if tc.inits == 1 && tc.ctrs == 1 { // distinct names at 63 characters
				inits[0].name, ctrs[0].name = long("i", 63), long("c", 63)
			}
			s.pod(tc.pod, nil, inits, ctrs, 0)
			s.bind(tc.pod, 20)
			s.kubeletStart(tc.pod, 40, 300)
			ms := 310
			for _, c := range inits {
				ms = s.run(tc.pod, c.name, true, false, 0, ms) + 5
				s.kubeletEvent(tc.pod, c.name, true, corev1.EventTypeWarning, "BackOff", "Back-off restarting — 再起動 \u00e9t\u00e9", ms)
			}
			for _, c := range ctrs {
				ms = s.run(tc.pod, c.name, false, false, 0, ms) + 1
			}
			for _, c := range ctrs {
				s.running(tc.pod, c.name, false, ms-100, ms+1000, true)
			}
			s.ready(tc.pod, ms+1100)
			traces, _ := replaySim(t, s.deltas, nil)
			if len(traces) != 1 {
				t.Fatalf("%d traces, want 1", len(traces))
			}
			tr := traces[0]
			if tr.Pod.Name != tc.pod || tr.Summary.Outcome != phases.OutcomeReady {
				t.Fatalf("trace of %q, outcome %s", tr.Pod.Name, tr.Summary.Outcome)
			}
			per := map[string]int{}
			for _, sp := range tr.Spans {
				per[sp.Name]++
			}
			if per["container.init"] != tc.inits || per["container"] != tc.ctrs {
				t.Fatalf("%d init and %d container spans, want %d and %d", per["container.init"], per["container"], tc.inits, tc.ctrs)
			}
		})
	}
}

// Events about objects readyspan does not know (a Pod it never saw, one already traced and
// deleted, a kind it does not read) are kept within the pending cap, dropped with a count
// beyond it, and never make a trace.
func TestEventsAboutUnknownObjects(t *testing.T) {
	for _, tc := range []struct {
		name        string
		events      int
		kind        string
		wantPending int
		wantDropped int
	}{
		{"a few for a Pod never seen", 10, "Pod", 10, 0},
		{"beyond the pending cap", maxPendingEvents + 25, "Pod", maxPendingEvents, 25},
		{"a kind readyspan does not read", 50, "Node", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t, "default")
			for i := range tc.events {
				ref := &corev1.ObjectReference{Kind: tc.kind, Namespace: "default", Name: fmt.Sprintf("gone-%d", i), UID: s.uid("gone"), FieldPath: "spec.containers{c}"}
				s.coreEvent(ref, "kubelet", "n", corev1.EventTypeNormal, "Pulled", `Container image "b" already present on machine`, i)
			}
			stats := &dropStats{}
			var traces int
			c := New(Config{}, SinkFunc(func(*phases.Trace) { traces++ }), stats, nil)
			for _, d := range s.deltas {
				c.Handle(d)
			}
			if c.pendingCount != tc.wantPending || stats.get("pending_events_cap") != tc.wantDropped || traces != 0 {
				t.Fatalf("pending %d, dropped %d, traces %d: want %d, %d, 0", c.pendingCount, stats.get("pending_events_cap"), traces, tc.wantPending, tc.wantDropped)
			}
		})
	}
	// A Pod traced and deleted: its late events are ignored, not kept.
	s := newSim(t, "default")
	s.pod("p", nil, nil, []container{{name: "c", image: "b"}}, 0)
	s.bind("p", 20)
	s.kubeletStart("p", 40, 300)
	ms := s.run("p", "c", false, false, 0, 310)
	s.running("p", "c", false, ms, ms+1000, true)
	s.ready("p", ms+1100)
	s.delete("p", ms+2000)
	for i := range 20 {
		s.kubeletEvent("p", "c", false, corev1.EventTypeWarning, "Unhealthy", "Readiness probe failed", ms+2100+i)
	}
	traces, _ := replaySim(t, s.deltas, nil)
	if len(traces) != 1 {
		t.Fatalf("%d traces for one Pod with late events after its deletion, want 1", len(traces))
	}
}

type dropStats struct {
	noStats
	mu      sync.Mutex
	dropped map[string]int
}

func (d *dropStats) Dropped(reason string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dropped == nil {
		d.dropped = map[string]int{}
	}
	d.dropped[reason]++
}

func (d *dropStats) get(reason string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dropped[reason]
}

// Recordings that contradict themselves: impossible timestamps, the same watch event twice,
// events out of order. Each replays to one trace per Pod, with a one-line warning where the
// timestamps cannot be believed.
func TestRecordingsThatContradictThemselves(t *testing.T) {
	build := func(t *testing.T) *sim {
		s := newSim(t, "default")
		s.pod("p", nil, nil, []container{{name: "c", image: "b"}}, 0)
		s.bind("p", 20)
		s.kubeletStart("p", 40, 300)
		ms := s.run("p", "c", false, false, 0, 310)
		s.running("p", "c", false, ms, ms+1000, true)
		s.ready("p", ms+1100)
		return s
	}
	for _, tc := range []struct {
		name        string
		mangle      func(ds []Delta) []Delta
		wantWarning bool
		wantTraces  int
	}{
		{"as recorded", func(ds []Delta) []Delta { return ds }, false, 1},
		{"every watch event twice", func(ds []Delta) []Delta {
			var out []Delta
			for _, d := range ds {
				out = append(out, d, d)
			}
			return out
		}, false, 1},
		{"events in reverse order", func(ds []Delta) []Delta {
			out := make([]Delta, len(ds))
			for i, d := range ds {
				out[len(ds)-1-i] = d
			}
			return out
		}, false, 0}, // first seen Ready: not traced without --backfill, as documented
		{"Ready stamped years before creation", func(ds []Delta) []Delta {
			last := ds[len(ds)-1].Object.(*corev1.Pod).DeepCopy()
			for i := range last.Status.Conditions {
				last.Status.Conditions[i].LastTransitionTime.Time = last.Status.Conditions[i].LastTransitionTime.AddDate(-3, 0, 0)
			}
			ds[len(ds)-1].Object = last
			return ds
		}, true, 1},
		{"receive times going backwards by an hour", func(ds []Delta) []Delta {
			for i := range ds {
				if i%2 == 1 {
					ds[i].Recv = ds[i].Recv.Add(-time.Hour)
				}
			}
			return ds
		}, false, 1},
		{"year 9999 and zero receive times", func(ds []Delta) []Delta {
			ds[0].Recv = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
			ds[1].Recv = time.Time{}
			return ds
		}, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := build(t)
			traces, warnings := replaySim(t, tc.mangle(s.deltas), nil)
			if len(traces) != tc.wantTraces {
				t.Fatalf("%d traces for one Pod, want %d", len(traces), tc.wantTraces)
			}
			for _, w := range warnings {
				if strings.Contains(w, "\n") {
					t.Fatalf("warning is not one line: %q", w)
				}
			}
			if tc.wantWarning && len(warnings) == 0 {
				t.Fatalf("no warning for impossible timestamps")
			}
			for _, tr := range traces {
				for _, sp := range tr.Spans {
					if sp.End.Before(sp.Start) {
						t.Fatalf("span %s ends before it starts", sp.Name)
					}
				}
			}
		})
	}
}

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
	deltas, err := LoadRecording(dir)
	le, ok := err.(*LoadError)
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
	out := make(chan Delta, 100)
	errs := &countErrors{}
	done := make(chan error, 1)
	go func() { done <- TailAudit(ctx, path, out, errs, slog.New(slog.DiscardHandler)) }()
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
	if n := errs.snapshot()["audit/unreadable"]; n != 2 {
		t.Fatalf("%d unreadable audit lines counted, want 2 (%v)", n, errs.snapshot())
	}
	select {
	case d := <-out:
		t.Fatalf("unexpected extra entry %+v", d.Audit)
	default:
	}
}
