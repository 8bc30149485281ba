package web

import (
	"sort"
	"time"

	"github.com/readyspan/readyspan/phases"
)

// Segment categories of a rollout's Gantt rows: the terminal Gantt's letters, named.
const (
	CatScheduling  = "scheduling"
	CatImagePull   = "image_pull"
	CatKubelet     = "kubelet" // sandbox, volumes, create, start
	CatReadiness   = "readiness"
	CatStatus      = "status"
	CatMinReady    = "min_ready"
	CatUntraced    = "untraced" // a Pod whose own trace readyspan has not exported
	CatTerminating = "terminating"
)

// podSegments colours a new Pod's row created → available by what it was doing, as the
// terminal Gantt does: its scheduling, kubelet and status phases (where kubelet and status
// overlap, the time is status's, as the critical path counts it), within those its image pulls
// and readiness probes, and after its last phase minReadySeconds.
func podSegments(pod *phases.Span, phaseSpans []*phases.Span, tr *phases.Trace, t0 time.Time) []Segment {
	if len(phaseSpans) == 0 {
		return []Segment{{Cat: CatUntraced, StartMs: ms(pod.Start.Sub(t0)), EndMs: ms(pod.End.Sub(t0))}}
	}
	type interval struct{ start, end time.Time }
	var sched, kubelet, status, pulls, readiness []interval
	last := pod.Start
	for _, ph := range phaseSpans {
		iv := interval{ph.Start, ph.End}
		switch ph.Name {
		case phases.PhaseScheduling:
			sched = append(sched, iv)
		case phases.PhaseKubelet:
			kubelet = append(kubelet, iv)
		case phases.PhaseStatus:
			status = append(status, iv)
		default:
			continue
		}
		if ph.End.After(last) {
			last = ph.End
		}
	}
	if tr != nil {
		for i := range tr.Spans {
			s := &tr.Spans[i]
			switch s.Name {
			case "container.image_pull":
				pulls = append(pulls, interval{s.Start, s.End})
			case "container.readiness":
				readiness = append(readiness, interval{s.Start, s.End})
			}
		}
	}
	// Cut the row at every boundary and name each piece by what covers its middle.
	cuts := []time.Time{pod.Start, pod.End}
	for _, l := range [][]interval{sched, kubelet, status, pulls, readiness} {
		for _, iv := range l {
			cuts = append(cuts, iv.start, iv.end)
		}
	}
	sort.Slice(cuts, func(i, j int) bool { return cuts[i].Before(cuts[j]) })
	in := func(l []interval, t time.Time) bool {
		for _, iv := range l {
			if !t.Before(iv.start) && t.Before(iv.end) {
				return true
			}
		}
		return false
	}
	var out []Segment
	for i := 0; i+1 < len(cuts); i++ {
		a, b := cuts[i], cuts[i+1]
		if !b.After(a) || a.Before(pod.Start) || b.After(pod.End) {
			continue
		}
		mid := a.Add(b.Sub(a) / 2)
		var cat string
		inNode := in(kubelet, mid) || in(status, mid)
		switch {
		case inNode && in(pulls, mid):
			cat = CatImagePull
		case inNode && in(readiness, mid):
			cat = CatReadiness
		case in(status, mid):
			cat = CatStatus
		case in(kubelet, mid):
			cat = CatKubelet
		case in(sched, mid):
			cat = CatScheduling
		case !mid.Before(last):
			cat = CatMinReady // Ready, waiting out minReadySeconds
		default:
			continue
		}
		s := Segment{Cat: cat, StartMs: ms(a.Sub(t0)), EndMs: ms(b.Sub(t0))}
		if n := len(out); n > 0 && out[n-1].Cat == cat && out[n-1].EndMs == s.StartMs {
			out[n-1].EndMs = s.EndMs
			continue
		}
		out = append(out, s)
	}
	return out
}
