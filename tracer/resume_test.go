package tracer

import (
	"testing"
	"time"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/watch"
)

// A restarted readyspan traces Pods that became Ready while it was down, except those the
// previous run exported, and skips older Ready Pods.
func TestResumeAfterRestart(t *testing.T) {
	s := newSim(t, "default")
	for _, n := range []string{"before", "exported", "during"} {
		s.pod(n, nil, nil, web, 0)
		s.bind(n, 20)
	}
	s.ready("before", 1000)   // Ready long before the previous run stopped
	s.ready("exported", 4000) // Ready and exported just before it stopped
	s.ready("during", 6000)   // Ready while readyspan was down
	stopped := s.at(5000)
	var got []string
	c := New(Config{ResumeAfter: stopped, ResumeSkip: map[string]bool{string(s.pods["exported"].UID): true}},
		SinkFunc(func(tr *phases.Trace) { got = append(got, tr.Pod.Name) }), nil, nil)
	// The new run's initial list: the final state of each Pod.
	for _, n := range []string{"before", "exported", "during"} {
		c.Handle(watch.Delta{Resource: ResourcePods, Type: watch.Added, Object: s.pods[n].DeepCopy(), Recv: s.at(9000), Initial: true})
	}
	if len(got) != 1 || got[0] != "during" {
		t.Fatalf("traced %v, want only the Pod that became Ready while readyspan was down", got)
	}
}

// Drain exports Ready Pods still waiting for their settle time or endpoints.
func TestDrain(t *testing.T) {
	s := newSim(t, "default")
	s.service("web", map[string]string{"app": "web"}, 0)
	s.pod("waiting", nil, nil, web, 0)
	s.bind("waiting", 20)
	s.ready("waiting", 1000)
	var got []*phases.Trace
	c := New(Config{Settle: 2 * time.Second}, SinkFunc(func(tr *phases.Trace) { got = append(got, tr) }), nil, nil)
	for _, d := range s.deltas {
		c.Handle(d)
	}
	if len(got) != 0 {
		t.Fatal("exported before its endpoints were ready")
	}
	c.Drain()
	if len(got) != 1 || got[0].Summary.Outcome != phases.OutcomeReady {
		t.Fatalf("drain exported %d traces", len(got))
	}
}
