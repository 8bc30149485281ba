package rollout

import (
	"sort"
	"time"

	"github.com/readyspan/readyspan/phases"
)

// Segment is one stretch of a Pod's row in a rollout, named by what the Pod was doing: a new
// Pod's time from created to available split by its own trace's phases, or an old Pod's
// termination. Every view (the terminal Gantt, the web Gantt, the critical path's shares) draws
// or counts a Pod from its Segments (PodSegments, segmentsOf), so none can tell a different
// story about the same Pod.
type Segment struct {
	Category Category
	From, To time.Time
	cat      int // Category's index in Categories
}

// PodSegments is the row of a rollout.pod or rollout.pod.terminate span, as the critical path
// counts it: p is the new Pod the span stands for (nil for an old Pod's). Views call it for the
// rows they draw; the daemon's export path never needs it, so Build does not compute it.
func PodSegments(s *phases.Span, p *NewPod) []Segment {
	it := &item{start: s.Start, end: s.End}
	switch {
	case s.Name == TerminateSpanName:
		it.oldPod = &OldPod{}
	case p != nil:
		it.newPod = p
		if rd, ok := p.Ready.Resolve(); ok {
			it.readyAt = rd.Time()
		}
	default:
		return nil
	}
	return segmentsOf(it)
}

// segmentsOf splits one item's interval into Segments, in time order, covering it exactly:
// time after Ready is minReadySeconds; a Pod without a trace is untraced; otherwise image pulls
// and readiness first (within the kubelet and status phases; from the Pod's first container or
// volume failure on they, and the wait for volumes, are failing), then the rest of the kubelet
// phase, status, controllers and scheduling, and what no phase covers (the phases' stamps are
// coarser than the row's) untraced.
func segmentsOf(it *item) []Segment {
	var out []Segment
	add := func(cat int, ivs ...interval) {
		for _, iv := range ivs {
			if iv.length() > 0 {
				out = append(out, Segment{Category: Categories[cat], From: iv.from, To: iv.to, cat: cat})
			}
		}
	}
	row := interval{it.start, it.end}
	if it.oldPod != nil {
		add(catTermination, row)
		return out
	}
	p := it.newPod
	seg := row
	if !it.readyAt.IsZero() && it.readyAt.Before(seg.to) {
		add(catMinReady, interval{maxTime(it.readyAt, seg.from), seg.to})
		seg.to = it.readyAt
	}
	if seg.length() <= 0 {
		return sortSegments(out)
	}
	if p.Trace == nil {
		add(catUntraced, seg)
		return sortSegments(out)
	}
	phase := func(name string) []interval {
		if s := p.Trace.Phase(name); s != nil {
			return intersectAll([]interval{{s.Start, s.End}}, []interval{seg})
		}
		return nil
	}
	// The status phase begins at the last container's start and the kubelet phase ends at
	// ContainersReady, so they overlap by the wait for readiness. Readiness and pulls come
	// first; what is left of the overlap (ContainersReady is a whole-second status time) is
	// status's.
	status := merge(phase(phases.PhaseStatus))
	kubelet := merge(phase(phases.PhaseKubelet))
	pulls := intersectAll(merge(spansIn(p.Trace, phases.CategoryImagePull)), kubelet)
	readiness := subtract(intersectAll(merge(spansIn(p.Trace, phases.CategoryReadiness)), merge(append(append([]interval(nil), kubelet...), status...))), pulls)
	rest := subtract(subtract(subtract(kubelet, status), pulls), readiness)
	status = subtract(subtract(status, pulls), readiness)
	var failing []interval
	if since := p.Trace.Summary.FailingSince; !since.IsZero() && p.Trace.Summary.FailureReason != "" {
		// A volume that does not mount holds the Pod before any container: from the first
		// failure on, that wait is failing too.
		volumes := intersectAll(merge(spansIn(p.Trace, phases.CategoryVolumes)), rest)
		after := []interval{{maxTime(since, seg.from), seg.to}}
		failing = merge(concat(intersectAll(pulls, after), intersectAll(readiness, after), intersectAll(volumes, after)))
		pulls, readiness, rest = subtract(pulls, after), subtract(readiness, after), subtract(rest, failing)
	}
	controllers := phase(phases.PhaseControllers)
	scheduling := subtract(phase(phases.PhaseScheduling), merge(controllers))
	covered := merge(concat(controllers, scheduling, pulls, readiness, failing, rest, status))
	add(catControllers, controllers...)
	add(catScheduling, scheduling...)
	add(catImagePull, pulls...)
	add(catReadiness, readiness...)
	add(catFailing, failing...)
	add(catKubeletOther, rest...)
	add(catStatus, subtract(status, merge(concat(controllers, scheduling)))...)
	add(catUntraced, subtract([]interval{seg}, covered)...)
	return sortSegments(out)
}

func sortSegments(s []Segment) []Segment {
	sort.SliceStable(s, func(i, j int) bool { return s[i].From.Before(s[j].From) })
	return s
}

func concat(lists ...[]interval) []interval {
	var out []interval
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
