package daemon

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/readyspan/readyspan/dataplane"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
)

// DefaultLastMileWait is how long a Pod trace waits, at most, for every node reporting to put
// the Pod in its rules (and a rollout for its old Pods to leave them). kube-proxy applies
// changes at most every minSyncPeriod (1 s by default) and a sync of a large cluster's rules
// takes seconds more; a node past this is named on the trace as not having programmed it.
const DefaultLastMileWait = 10 * time.Second

// lastMileStage stands between the correlator and the join stage when readyspan's node
// components report the nodes' kube-proxy rules (package dataplane). A Pod trace whose Pod
// entered its Services' endpoints while nodes were reporting waits until each of them put its
// address in its rules, or the wait has passed, and is drawn again with their programming; a
// rollout waits likewise for its old Pods to leave the rules. Traces nothing was reported for
// go on at once. It never blocks the correlator: its own goroutine works through the lists.
type lastMileStage struct {
	table       *dataplane.Table
	wait        time.Duration
	nextPod     func(*phases.Trace)
	nextRollout func(*rollout.Trace)
	now         func() time.Time

	mu       sync.Mutex
	pods     []waitingPod
	rollouts []waitingRollout
	loop     stageLoop
}

type waitingPod struct {
	t        *phases.Trace
	nodes    []string
	mode     string
	since    time.Time // the Pod's address in its Services' endpoints
	deadline time.Time
}

type waitingRollout struct {
	t        *rollout.Trace
	olds     []waitingOld
	deadline time.Time
}

// waitingOld is an old Pod of the rollout that nodes were reporting for when it was deleted.
type waitingOld struct {
	index int // into the rollout's OldPods
	nodes []string
	mode  string
	since time.Time
}

func newLastMileStage(table *dataplane.Table, wait time.Duration, nextPod func(*phases.Trace), nextRollout func(*rollout.Trace)) *lastMileStage {
	return &lastMileStage{table: table, wait: wait, nextPod: nextPod, nextRollout: nextRollout, now: time.Now,
		loop: newStageLoop()}
}

// pod takes a finished Pod trace.
func (s *lastMileStage) pod(t *phases.Trace) {
	p := t.Pod
	if p == nil || !p.HasService || len(p.Addresses) == 0 || t.Summary.Outcome != phases.OutcomeReady {
		s.nextPod(t)
		return
	}
	at, _ := p.EndpointsReady.Resolve()
	since := at.Time()
	nodes, mode := s.table.Reporting(since)
	if since.IsZero() || len(nodes) == 0 {
		s.nextPod(t)
		return
	}
	s.mu.Lock()
	s.pods = append(s.pods, waitingPod{t: t, nodes: nodes, mode: mode, since: since, deadline: s.now().Add(s.wait)})
	s.mu.Unlock()
	s.loop.wake()
}

// rollout takes a finished rollout trace.
func (s *lastMileStage) rollout(t *rollout.Trace) {
	var olds []waitingOld
	for i := range t.Rollout.OldPods {
		o := &t.Rollout.OldPods[i]
		at, _ := o.Deleted.Resolve()
		if len(o.Addresses) == 0 || at.Time().IsZero() {
			continue
		}
		if nodes, mode := s.table.Reporting(at.Time()); len(nodes) > 0 {
			olds = append(olds, waitingOld{index: i, nodes: nodes, mode: mode, since: at.Time()})
		}
	}
	if len(olds) == 0 {
		s.nextRollout(t)
		return
	}
	s.mu.Lock()
	s.rollouts = append(s.rollouts, waitingRollout{t: t, olds: olds, deadline: s.now().Add(s.wait)})
	s.mu.Unlock()
	s.loop.wake()
}

// run works through the waiting traces until ctx ends; flush then sends what still waits.
func (s *lastMileStage) run(ctx context.Context) { s.loop.run(ctx, 100*time.Millisecond, s.step) }

// flush sends every waiting trace now, with what was reported (the daemon's stop).
func (s *lastMileStage) flush() { s.step(true) }

// step sends on the traces whose nodes all reported, or whose wait is over.
func (s *lastMileStage) step(all bool) {
	now := s.now()
	s.mu.Lock()
	pods, rollouts := s.pods, s.rollouts
	s.pods, s.rollouts = nil, nil
	s.mu.Unlock()
	var keepPods []waitingPod
	for _, w := range pods {
		got := s.table.First(w.t.Pod.Namespace, w.t.Pod.Addresses, true, w.since, w.nodes)
		if !all && now.Before(w.deadline) && !allReported(got) {
			keepPods = append(keepPods, w)
			continue
		}
		s.finishPod(w, got)
	}
	var keepRollouts []waitingRollout
	for _, w := range rollouts {
		got, out := s.removals(w)
		if !all && now.Before(w.deadline) && !out {
			keepRollouts = append(keepRollouts, w)
			continue
		}
		s.finishRollout(w, got)
	}
	s.mu.Lock()
	s.pods = append(keepPods, s.pods...)
	s.rollouts = append(keepRollouts, s.rollouts...)
	s.mu.Unlock()
}

func allReported(nodes []phases.NodeProgramming) bool {
	return !slices.ContainsFunc(nodes, func(n phases.NodeProgramming) bool { return n.At.IsZero() })
}

// finishPod draws the Pod's trace again with the nodes' programming. The correlator keeps the
// trace it handed over (its rollout reads it), so the Pod is copied, never changed. Build draws
// only the links the Pod's observations make; the one to its rollout, which the rollout tracker
// puts on the root once the trace is built, is carried over.
func (s *lastMileStage) finishPod(w waitingPod, got []phases.NodeProgramming) {
	p := *w.t.Pod
	p.Programming = &phases.Programming{Mode: w.mode, Nodes: got, Wait: s.wait}
	t := phases.Build(&p, w.t.Options)
	carryLinks(t.Root(), w.t.Root())
	s.nextPod(t)
}

// carryLinks adds to a span the links of from it does not have.
func carryLinks(to, from *phases.Span) {
	for _, l := range from.Links() {
		if !slices.ContainsFunc(to.Links(), func(h phases.Link) bool { return h.TraceID == l.TraceID && h.SpanID == l.SpanID }) {
			to.AddLink(l)
		}
	}
}

// removals finds, for each waiting old Pod, when each node took it out of its rules, and
// reports whether every one is out of every node's.
func (s *lastMileStage) removals(w waitingRollout) (got [][]phases.NodeProgramming, out bool) {
	out = true
	for _, o := range w.olds {
		old := &w.t.Rollout.OldPods[o.index]
		nodes := s.table.First(w.t.Rollout.Workload.Namespace, old.Addresses, false, o.since, o.nodes)
		got = append(got, nodes)
		out = out && allReported(nodes)
	}
	return got, out
}

// finishRollout draws the rollout again with its old Pods' removal from the nodes' rules.
func (s *lastMileStage) finishRollout(w waitingRollout, got [][]phases.NodeProgramming) {
	r := *w.t.Rollout
	r.OldPods = slices.Clone(r.OldPods)
	for i, o := range w.olds {
		r.OldPods[o.index].Rotation = &phases.Programming{Mode: o.mode, Nodes: got[i], Wait: s.wait}
	}
	s.nextRollout(rollout.Build(&r))
}
