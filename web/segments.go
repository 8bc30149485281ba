package web

import (
	"time"

	"github.com/readyspan/readyspan/rollout"
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
	CatFailing     = "failing"    // a Pod's pulls and readiness from its first container failure on
	CatUnobserved  = "unobserved" // old Pods terminating that the trace did not see (critical path only)
	// CatQueued is the part of an image pull (Pulling → Pulled) before its transfer: the wait
	// in the kubelet's pull queue (a Pod waterfall's pull bar, see pullParts).
	CatQueued = "queued"
)

// segmentCat is the page's name of each rollout.Categories entry where the two differ.
var segmentCat = map[string]string{"kubelet_other": CatKubelet, "termination": CatTerminating}

// rowSegments is a Pod's row as rollout.PodSegments has it (the same stretches the terminal
// Gantt draws and the critical path counts), in milliseconds from t0.
func rowSegments(segs []rollout.Segment, t0 time.Time) []Segment {
	out := make([]Segment, 0, len(segs))
	for _, sg := range segs {
		cat := sg.Category.Name
		if c, ok := segmentCat[cat]; ok {
			cat = c
		}
		s := Segment{Cat: cat, StartMs: ms(sg.From.Sub(t0)), EndMs: ms(sg.To.Sub(t0))}
		if n := len(out); n > 0 && out[n-1].Cat == cat && out[n-1].EndMs == s.StartMs {
			out[n-1].EndMs = s.EndMs
			continue
		}
		out = append(out, s)
	}
	return out
}
