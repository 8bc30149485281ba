package web

import (
	"time"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
)

// The waterfall's parts of an image pull (Pulling → Pulled, see pullParts): the wait in the
// kubelet's pull queue before its transfer, and the transfer.
const (
	CatQueued    = "queued"
	CatImagePull = string(phases.CategoryImagePull)
)

// rowSegments is a Pod's row as rollout.PodSegments has it (the same stretches the terminal
// Gantt draws and the critical path counts), in milliseconds from t0.
func rowSegments(segs []rollout.Segment, t0 time.Time) []Segment {
	out := make([]Segment, 0, len(segs))
	for _, sg := range segs {
		cat := sg.Category.Page
		s := Segment{Cat: cat, StartMs: ms(sg.From.Sub(t0)), EndMs: ms(sg.To.Sub(t0))}
		if n := len(out); n > 0 && out[n-1].Cat == cat && out[n-1].EndMs == s.StartMs {
			out[n-1].EndMs = s.EndMs
			continue
		}
		out = append(out, s)
	}
	return out
}
