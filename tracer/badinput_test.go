package tracer

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/watch"
)

// replaySim replays a simulated stream and returns the traces and Replay's warnings.
func replaySim(t *testing.T, deltas []watch.Delta, stats Stats) ([]*phases.Trace, []string) {
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
		mangle      func(ds []watch.Delta) []watch.Delta
		wantWarning bool
		wantTraces  int
	}{
		{"as recorded", func(ds []watch.Delta) []watch.Delta { return ds }, false, 1},
		{"every watch event twice", func(ds []watch.Delta) []watch.Delta {
			var out []watch.Delta
			for _, d := range ds {
				out = append(out, d, d)
			}
			return out
		}, false, 1},
		{"events in reverse order", func(ds []watch.Delta) []watch.Delta {
			out := make([]watch.Delta, len(ds))
			for i, d := range ds {
				out[len(ds)-1-i] = d
			}
			return out
		}, false, 0}, // first seen Ready: not traced without --backfill, as documented
		{"Ready stamped years before creation", func(ds []watch.Delta) []watch.Delta {
			last := ds[len(ds)-1].Object.(*corev1.Pod).DeepCopy()
			for i := range last.Status.Conditions {
				last.Status.Conditions[i].LastTransitionTime.Time = last.Status.Conditions[i].LastTransitionTime.AddDate(-3, 0, 0)
			}
			ds[len(ds)-1].Object = last
			return ds
		}, true, 1},
		{"receive times going backwards by an hour", func(ds []watch.Delta) []watch.Delta {
			for i := range ds {
				if i%2 == 1 {
					ds[i].Recv = ds[i].Recv.Add(-time.Hour)
				}
			}
			return ds
		}, false, 1},
		{"year 9999 and zero receive times", func(ds []watch.Delta) []watch.Delta {
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
