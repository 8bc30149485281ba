package pod

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/readyspan/readyspan/events"
	"github.com/readyspan/readyspan/phases"
)

// gateState is what was seen of a Pod's scheduling gates.
type gateState struct {
	gated, removedSeen bool
	removedAt          phases.Instant // the receive time of the first version without gates
	removedMeta        phases.Instant // the remover's managedFields time (1 s)
	removedBy          string         // the remover's field manager
}

// update follows the gates from one version of the Pod (prev) to the next (p), received at.
func (g *gateState) update(prev, p *corev1.Pod, at phases.Instant) {
	if len(p.Spec.SchedulingGates) > 0 {
		g.gated = true
		return
	}
	if !g.gated || g.removedSeen {
		return
	}
	g.removedSeen, g.removedAt = true, at
	if prev != p {
		g.removedBy, g.removedMeta = changedManager(prev, p)
	}
}

// changedManager is the field manager whose managedFields entry the write that made cur from
// prev changed (a new entry or a later time), and that time; "" when none did. An Update changes
// its manager's time only when it set a field: a write that only removed fields (a gate) leaves
// every entry as it was, and then nothing says who made it or when.
func changedManager(prev, cur *corev1.Pod) (string, phases.Instant) {
	var by string
	var at phases.Instant
	for i := range cur.ManagedFields {
		f := &cur.ManagedFields[i]
		if f.Subresource != "" || f.Time == nil {
			continue
		}
		var before *metav1.Time
		for j := range prev.ManagedFields {
			if g := &prev.ManagedFields[j]; g.Manager == f.Manager && g.Operation == f.Operation && g.Subresource == f.Subresource {
				before = g.Time
			}
		}
		if before != nil && !f.Time.After(before.Time) {
			continue
		}
		if t := events.WallOf(f.Time.Time); t > at {
			by, at = f.Manager, t
		}
	}
	return by[:min(len(by), maxManager)], at
}

// maxManager bounds a field manager's name kept (the API allows 128 bytes).
const maxManager = 128
