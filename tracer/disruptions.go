package tracer

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/readyspan/readyspan/events"
	"github.com/readyspan/readyspan/phases"
)

// Disruption: a node autoscaler that takes a node away (Karpenter's consolidation, drift or
// repair; cluster-autoscaler's scale-down) evicts its Pods first and says so in an Event about
// each (events.ParseDisruption). The Pod that replaces one names the cause and the node in its
// trace, and links to that node's startup trace.

// disruption is what an Event said of an evicted Pod, and when it came.
type disruption struct {
	events.Disruption
	at time.Time
}

// maxDisruptions bounds the evicted Pods remembered: a consolidation evicts a node's Pods,
// some hundred at most.
const maxDisruptions = 4096

// noteDisruption keeps who evicted a Pod to take its node away, and why.
func (c *Correlator) noteDisruption(e *events.Event, d events.Disruption) {
	if c.disruptions == nil {
		c.disruptions = map[types.UID]disruption{}
	}
	if _, ok := c.disruptions[e.Regarding.UID]; !ok && len(c.disruptions) >= maxDisruptions {
		c.stats.Dropped("disruptions_cap")
		return
	}
	c.disruptions[e.Regarding.UID] = disruption{Disruption: d, at: e.Recv.Time()}
}

// disrupted fills what is known of why the Pod a new one replaces went: the autoscaler that
// evicted it and why, and the startup trace of the node it took away, when that was traced and
// the node is still known.
func (c *Correlator) disrupted(r *phases.Replaced) {
	d, ok := c.disruptions[types.UID(r.UID)]
	if !ok {
		return
	}
	r.DisruptedBy, r.Disruption = d.By, d.Cause
	if n := c.nodes()[r.Node]; n != nil && n.traced {
		r.NodeTrace = phases.NodeStartupKey(c.claimUIDOf(r.Node), n.uid)
	}
}

// pruneDisruptions forgets the evictions older than a replacement can follow.
func (c *Correlator) pruneDisruptions(now time.Time) {
	for uid, d := range c.disruptions {
		if !d.at.IsZero() && now.Sub(d.at) > selfHealWindow {
			delete(c.disruptions, uid)
		}
	}
}
