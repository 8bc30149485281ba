package rollout

import (
	"fmt"
	"slices"
	"time"

	"github.com/readyspan/readyspan/phases"
)

// RotationSpanName is an old Pod's last mile: its deletion → the last node's kube-proxy
// taking it out of its Services' rotation. Drawn under rollout.pod.terminate when readyspan's
// node component reports the nodes' rules.
const RotationSpanName = "rollout.pod.rotation"

// rotationSlowest is how many of the last nodes to take the Pod out the span names as events.
const rotationSlowest = 5

// lateRotation is an old Pod still in some nodes' rules after its containers were told to
// stop: traffic those nodes send it then meets a stopping container.
type lateRotation struct {
	pod         *OldPod
	late, nodes int
	after       time.Duration // the last node's removal after the stop (or the wait's end)
	exact       bool
}

// rotationOf measures an old Pod's removal from the nodes' rules against its stop; ok is false
// when no node component reported or the deletion is unknown.
func rotationOf(o *OldPod) (lr lateRotation, ok bool) {
	g := o.Rotation
	stop, exact := o.Stop()
	if g == nil || len(g.Nodes) == 0 || stop.IsZero() {
		return lateRotation{}, false
	}
	lr = lateRotation{pod: o, nodes: len(g.Nodes), exact: exact}
	deleted, _ := o.Deleted.Resolve()
	waitEnd := deleted.Time().Add(g.Wait)
	for _, n := range g.Nodes {
		at := n.At
		if at.IsZero() {
			at = maxTime(waitEnd, stop) // still in the rules when readyspan stopped waiting
		}
		if at.After(stop) {
			lr.late++
			lr.after = max(lr.after, at.Sub(stop))
		}
	}
	return lr, true
}

// rotationSpan draws an old Pod's removal from the nodes' rules under its terminate span.
func rotationSpan(o *OldPod, parent phases.SpanID, critical bool, span spanMaker) (phases.Span, bool) {
	lr, ok := rotationOf(o)
	if !ok {
		return phases.Span{}, false
	}
	deleted, _ := o.Deleted.Resolve()
	end := deleted.Time()
	removed := 0
	for _, n := range o.Rotation.Nodes {
		if !n.At.IsZero() {
			removed++
			end = maxTime(end, n.At)
		}
	}
	if removed < len(o.Rotation.Nodes) {
		end = maxTime(end, deleted.Time().Add(o.Rotation.Wait))
	}
	sp := span(RotationSpanName, "terminate/"+o.UID+"/rotation", phases.ServiceKubeProxy, parent, deleted.Time(), end)
	sp.Attrs = []phases.Attr{
		{Key: phases.AttrPodName, Value: o.Name}, {Key: AttrRotationNodes, Value: int64(lr.nodes)},
		{Key: AttrRotationRemoved, Value: int64(removed)}, {Key: AttrRotationLate, Value: int64(lr.late)},
		{Key: AttrRotationAfterStop, Value: float64(lr.after.Microseconds()) / 1000},
		{Key: AttrRotationStop, Value: stopWords(o)}, {Key: AttrCritical, Value: critical},
	}
	if o.Rotation.Mode != "" {
		sp.Attrs = append(sp.Attrs, phases.Attr{Key: phases.AttrProgrammingMode, Value: o.Rotation.Mode})
	}
	if lr.late > 0 {
		sp.Status, sp.StatusMessage = phases.StatusError, lr.words()
	}
	sp.AddEvent(lastRemovals(o, deleted.Time())...)
	return sp, true
}

// lastRemovals are events at the last nodes' removals, latest first.
func lastRemovals(o *OldPod, from time.Time) []phases.Event {
	nodes := slices.DeleteFunc(slices.Clone(o.Rotation.Nodes), func(n phases.NodeProgramming) bool { return n.At.IsZero() })
	slices.SortFunc(nodes, func(a, b phases.NodeProgramming) int { return b.At.Compare(a.At) })
	var out []phases.Event
	for _, n := range nodes[:min(rotationSlowest, len(nodes))] {
		out = append(out, phases.Event{Name: EventNodeRemoved, Time: n.At, Attrs: []phases.Attr{
			{Key: phases.AttrNodeName, Value: n.Node},
			{Key: phases.AttrProgrammingDelay, Value: float64(max(n.At.Sub(from), 0).Microseconds()) / 1000}}})
	}
	return out
}

// EventNodeRemoved marks, on rollout.pod.rotation, one of the last nodes taking the Pod out.
const EventNodeRemoved = "node.removed"

// stopWords says what the stop was measured from.
func stopWords(o *OldPod) string {
	switch {
	case o.PreStopOther && o.PreStopSleep > 0:
		return fmt.Sprintf("deletion + preStop sleep %s + a preStop hook (not observed)", fmtSeconds(o.PreStopSleep))
	case o.PreStopOther:
		return "deletion + a preStop hook (not observed)"
	case o.PreStopSleep > 0:
		return "deletion + preStop sleep " + fmtSeconds(o.PreStopSleep)
	}
	return "deletion"
}

// words: "web-abc was still in the rules of 2 of 3 nodes 1.4 s after it was told to stop".
func (lr lateRotation) words() string {
	s := fmt.Sprintf("%s was still in the rules of %d of %d nodes %s after it was told to stop",
		lr.pod.Name, lr.late, lr.nodes, fmtSeconds(lr.after))
	if !lr.exact {
		s += " at most (a preStop hook ran first, its end unseen)"
	}
	return s
}

// rotationWords is the sentence's finding: the old Pod longest in rotation after its stop, and
// how many more were.
func rotationWords(r *Rollout) string {
	var worst lateRotation
	n := 0
	for i := range r.OldPods {
		lr, ok := rotationOf(&r.OldPods[i])
		if !ok || lr.late == 0 {
			continue
		}
		n++
		if worst.pod == nil || lr.after > worst.after {
			worst = lr
		}
	}
	switch n {
	case 0:
		return ""
	case 1:
		return worst.words()
	}
	return fmt.Sprintf("%s (and %d more old Pods)", worst.words(), n-1)
}

// AfterStop is how long after its stop the last node took the old Pod out of its rules; late
// is false when every node reporting did so before the stop, or none reported.
func (o *OldPod) AfterStop() (after time.Duration, late bool) {
	lr, ok := rotationOf(o)
	return lr.after, ok && lr.late > 0
}
