package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/tracecontext"
)

var t0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

// podTrace is a minimal Pod trace: a root span of one second, started n seconds after t0.
func podTrace(uid string, n int) *phases.Trace {
	start := t0.Add(time.Duration(n) * time.Second)
	id := phases.TraceIDFor(uid)
	return &phases.Trace{TraceID: id, Pod: &phases.Pod{UID: uid, Name: "web-" + uid, Namespace: "prod", Controllers: []phases.Controller{{Kind: "Deployment", Name: "web"}}},
		Spans:   []phases.Span{{Name: phases.RootSpanName, SpanID: phases.SpanIDFor(uid, phases.RootSpanName), Start: start, End: start.Add(time.Second)}},
		Summary: phases.Summary{Outcome: phases.OutcomeReady}}
}

// rolloutTrace is a rollout of Deployment uid's generation, with no steps or Pods.
func rolloutTrace(uid string, generation int64) *rollout.Trace {
	start := t0.Add(time.Duration(generation) * time.Second)
	return rollout.Build(&rollout.Rollout{
		Workload: rollout.Workload{Kind: rollout.Deployment, Name: "web-" + uid, Namespace: "prod", UID: uid},
		Kind:     rollout.KindUpdate, Generation: generation, Outcome: rollout.OutcomeComplete,
		Start:    phases.Times{{At: phases.InstantOf(start), Source: phases.SourceWatch}},
		Complete: phases.Times{{At: phases.InstantOf(start.Add(time.Second)), Source: phases.SourceWatch}},
		Strategy: rollout.Strategy{Partition: -1},
	})
}

func TestRingBounds(t *testing.T) {
	type add struct {
		pod     string // a Pod UID, or
		rollout int64  // a generation of Deployment "d"
	}
	pods := func(uids ...string) []add {
		var as []add
		for _, u := range uids {
			as = append(as, add{pod: u})
		}
		return as
	}
	podSize := NewRing(RingConfig{}).sizeOfPod(podTrace("a", 0))
	for _, tc := range []struct {
		name         string
		cfg          RingConfig
		adds         []add
		wantPods     []string // newest first
		wantRollouts int
	}{
		{"under the limits", RingConfig{MaxPods: 5}, pods("a", "b", "c"), []string{"c", "b", "a"}, 0},
		{"the oldest Pods leave", RingConfig{MaxPods: 2}, pods("a", "b", "c", "d"), []string{"d", "c"}, 0},
		{"a Pod seen again replaces itself", RingConfig{MaxPods: 2}, pods("a", "b", "a", "a", "a"), []string{"a", "b"}, 0},
		{"rollouts have their own count", RingConfig{MaxPods: 2, MaxRollouts: 2},
			[]add{{rollout: 1}, {pod: "a"}, {rollout: 2}, {rollout: 3}, {pod: "b"}}, []string{"b", "a"}, 2},
		{"the byte budget takes the oldest of either kind", RingConfig{MaxPods: 100, MaxBytes: 3*podSize + podSize/2},
			pods("a", "b", "c", "d", "e"), []string{"e", "d", "c"}, 0},
		{"the newest stays even over the budget", RingConfig{MaxBytes: 1}, pods("a", "b"), []string{"b"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRing(tc.cfg)
			for i, a := range tc.adds {
				if a.pod != "" {
					r.AddPod(podTrace(a.pod, i))
				} else {
					r.AddRollout(rolloutTrace("d", a.rollout))
				}
			}
			var got []string
			var bytes int64
			for _, p := range r.Pods(Filter{}) {
				got = append(got, p.UID)
				bytes += r.sizeOfPod(podTrace(p.UID, 0))
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.wantPods) {
				t.Errorf("Pods held: %v, want %v", got, tc.wantPods)
			}
			nr, np := r.Len()
			if nr != tc.wantRollouts || np != len(tc.wantPods) {
				t.Errorf("Len() = %d rollouts, %d Pods; want %d, %d", nr, np, tc.wantRollouts, len(tc.wantPods))
			}
			for _, ro := range r.Rollouts(Filter{}) {
				bytes += r.sizeOfRollout(rolloutTrace("d", generationOf(t, r, ro.ID)))
			}
			if r.Bytes() != bytes {
				t.Errorf("Bytes() = %d, the entries held add up to %d", r.Bytes(), bytes)
			}
		})
	}
}

func generationOf(t *testing.T, r *Ring, id string) int64 {
	for g := int64(0); g < 100; g++ {
		if rollout.RootSpanIDFor("d", g, 0).String() == id {
			return g
		}
	}
	t.Fatalf("no generation of d has the rollout ID %s", id)
	return 0
}

func TestRingFilter(t *testing.T) {
	r := NewRing(RingConfig{})
	a, b := podTrace("a", 1), podTrace("b", 2)
	b.Pod.Namespace, b.Pod.Controllers = "dev", []phases.Controller{{Kind: "Deployment", Name: "api"}}
	r.AddPod(a)
	r.AddPod(b)
	for _, tc := range []struct {
		f    Filter
		want int
	}{
		{Filter{}, 2}, {Filter{Namespace: "prod"}, 1}, {Filter{Workload: "api"}, 1},
		{Filter{Namespace: "prod", Workload: "api"}, 0}, {Filter{Namespace: "none"}, 0},
	} {
		if got := len(r.Pods(tc.f)); got != tc.want {
			t.Errorf("Pods(%+v): %d, want %d", tc.f, got, tc.want)
		}
	}
}

func (r *Ring) sizeOfPod(t *phases.Trace) int64      { return podEntry(t).size }
func (r *Ring) sizeOfRollout(t *rollout.Trace) int64 { return rolloutEntry(t).size }

// The ring keeps a Pod's spans and encodes its waterfall when asked: what it serves is the view
// the trace makes (the report inlines the same), and the trace's spans are left as they were.
func TestRingPodEncodedOnRead(t *testing.T) {
	for _, dir := range realCaptures(t) {
		pods, _ := replay(t, dir)
		r := NewRing(RingConfig{})
		for _, p := range pods {
			r.AddPod(p)
		}
		for _, p := range pods {
			want, err := json.Marshal(podView(p))
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Pod(p.Pod.UID); !bytes.Equal(got, want) {
				t.Errorf("%s: Pod %s served\n%s\nwant\n%s", filepath.Base(dir), p.Pod.Name, got, want)
			}
		}
	}
}

// Rollouts a CI job's trace context was written for share the job's trace ID: each keeps its
// own entry, found by its own ID, and each names the shared trace for the trace viewer.
func TestRingRolloutsInOneTrace(t *testing.T) {
	c, _, ok := tracecontext.Parse("00-4bf92f3577b34da6a3ce929d0e0e4737-00f067aa0ba902b7-01")
	if !ok {
		t.Fatal("refused")
	}
	r := NewRing(RingConfig{})
	var traces []*rollout.Trace
	for _, uid := range []string{"a", "b"} {
		ro := *rolloutTrace(uid, 2).Rollout
		ro.TraceContext = phases.TraceContext{Context: c, Source: phases.TraceContextWorkload, Relation: phases.TraceContextChild}
		tr := rollout.Build(&ro)
		traces = append(traces, tr)
		r.AddRollout(tr)
	}
	if traces[0].TraceID != traces[1].TraceID {
		t.Fatal("the two rollouts are not in one trace: the test would prove nothing")
	}
	list := r.Rollouts(Filter{})
	if len(list) != 2 {
		t.Fatalf("%d rollouts listed, want both", len(list))
	}
	for _, tr := range traces {
		var v RolloutView
		body := r.Rollout(tr.Root().SpanID.String())
		if body == nil {
			t.Fatalf("rollout %s not found by its ID", tr.Rollout.Workload.Name)
		}
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatal(err)
		}
		if v.Workload != tr.Rollout.Workload.Name || v.TraceID != c.String()[3:35] {
			t.Errorf("found %s in trace %s, want %s in %s", v.Workload, v.TraceID, tr.Rollout.Workload.Name, c.String()[3:35])
		}
	}
}
