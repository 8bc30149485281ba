package tracker

import (
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/readyspan/readyspan/events"
	"github.com/readyspan/readyspan/rollout"
)

// DefaultBlockedAfter: a rollout whose Pod creates have been refused this long, with
// none made since, is exported as blocked (long before the stuck deadline or the Deployment's
// progress deadline), so a trace backend shows why it does not progress while it does not.
const DefaultBlockedAfter = 30 * time.Second

// Limits of what is kept of rejections.
const (
	// maxRejections bounds the rejections a rollout keeps; later ones of a kind already kept
	// still count into it.
	maxRejections = 32
	// maxRejectionEvents bounds the FailedCreate Events whose counts are remembered (to count
	// each occurrence once, however many versions of its Event arrive).
	maxRejectionEvents = 4096
)

// failedCreate is the reason every controller gives a refused Pod create (the replicaset, job
// and daemonset controllers' "Error creating: %v"; the statefulset controller's
// "create Pod %s in StatefulSet %s failed error: %v").
const failedCreate = "FailedCreate"

// rejectionState is a rejection as an active rollout holds it: its receive times too, which
// order it against the Pods' creations on one clock, readyspan's.
type rejectionState struct {
	rollout.Rejection
	firstSeen, lastSeen time.Time
	fromCondition       bool // stated by the Deployment's ReplicaFailure condition, no Event yet
}

// rejectionMessage is the apiserver's error an Event or condition quotes, with the recorder's
// and the controller's prefixes dropped.
func rejectionMessage(msg string) string {
	msg = strings.TrimPrefix(msg, events.CombinedPrefix)
	msg = strings.TrimPrefix(msg, "Error creating: ")
	if i := strings.Index(msg, " failed error: "); i >= 0 && strings.HasPrefix(strings.ToLower(msg), "create pod ") {
		msg = msg[i+len(" failed error: "):] // the statefulset controller's
	}
	return rollout.BoundMessage(msg)
}

// HandleRejection reads a controller's FailedCreate: each new occurrence counts into the
// rejected-creates counter, and into the rollout in progress of the workload whose Pods were
// refused (a ReplicaSet's Deployment, a StatefulSet, a DaemonSet).
func (r *Tracker) HandleRejection(e *events.Event) bool {
	if e.Reason != failedCreate {
		return true
	}
	n := max(e.Count, 1)
	prev := r.rejectionCounts[e.UID]
	if n <= prev {
		return true // a version of the Event already counted
	}
	if len(r.rejectionCounts) >= maxRejectionEvents {
		r.rejectionCounts = map[types.UID]int32{} // bounded; a reset only risks counting one twice
	}
	r.rejectionCounts[e.UID] = n
	fresh := n - prev
	msg := rejectionMessage(e.Message)
	class := rollout.ClassifyRejection(msg)
	if r.cfg.Rejected != nil && !e.Recv.IsZero() {
		// Live occurrences only: an initial list's Events happened before readyspan watched
		// (a restart would count them again).
		r.cfg.Rejected.PodCreatesRejected(class, int(fresh))
	}
	var uid types.UID
	switch e.Regarding.Kind {
	case "ReplicaSet":
		uid = r.rsOwner[e.Regarding.UID]
	case "StatefulSet", "DaemonSet":
		uid = e.Regarding.UID
	}
	w := r.workloads[uid]
	if uid == "" || w == nil || w.cur == nil {
		return true
	}
	a := w.cur
	first := e.When().Time()
	last := first
	if prev > 0 || n > 1 {
		// A later occurrence: its Event's lastTimestamp (or series) says when, to the second.
		if l := e.Last.Time(); l.After(last) {
			last = l
		}
		if prev > 0 {
			first = last
		}
	}
	if first.Before(a.from) {
		return true // before this rollout began
	}
	seen := e.Recv.Time()
	if seen.IsZero() {
		seen = last
	}
	a.reject(rollout.Rejection{Owner: e.Regarding.Name, Reason: failedCreate, Class: class, Message: msg,
		Count: fresh, First: first, Last: last}, seen)
	return true
}

// reject folds one occurrence (or several, counted) into the rollout's rejections: into the one
// of the same owner, reason and class that still holds, or as a new one.
func (a *activeRollout) reject(j rollout.Rejection, seen time.Time) {
	for i := len(a.rejections) - 1; i >= 0; i-- {
		s := &a.rejections[i]
		if !s.Cleared.IsZero() || s.Class != j.Class || s.Reason != j.Reason {
			continue
		}
		if s.fromCondition {
			// The condition said it first; its Event names the owner and counts, and states the
			// time within the condition's second (lastTransitionTime is to the second).
			s.Owner, s.fromCondition = j.Owner, false
			if !j.First.Before(s.First) && j.First.Before(s.First.Add(time.Second)) {
				s.First = j.First
			}
		} else if s.Owner != j.Owner {
			continue
		}
		s.Count += j.Count
		s.Message = j.Message
		if j.First.Before(s.First) {
			s.First = j.First
		}
		if j.Last.After(s.Last) {
			s.Last = j.Last
		}
		if seen.After(s.lastSeen) {
			s.lastSeen = seen
		}
		return
	}
	if len(a.rejections) >= maxRejections {
		// Counted into the latest kept, as a later occurrence of it.
		s := &a.rejections[len(a.rejections)-1]
		s.Count += j.Count
		return
	}
	a.rejections = append(a.rejections, rejectionState{Rejection: j, firstSeen: seen, lastSeen: seen})
}

// replicaFailure reads the Deployment's ReplicaFailure condition (the deployment controller's
// copy of its new ReplicaSet's): a rejection stated without an Event (Events are best effort),
// until its Event comes; its removal clears what only it stated.
func (a *activeRollout) replicaFailure(c *deploymentCondition, recv time.Time) {
	if c == nil {
		for i := range a.rejections {
			if s := &a.rejections[i]; s.fromCondition && s.Cleared.IsZero() {
				s.Cleared = recv
			}
		}
		return
	}
	if a.blocked() != nil {
		return // an Event said so already
	}
	msg := rejectionMessage(c.message)
	at := c.since
	if at.IsZero() || at.Before(a.from) {
		at = recv
	}
	seen := recv
	if seen.IsZero() {
		seen = at
	}
	a.rejections = append(a.rejections, rejectionState{Rejection: rollout.Rejection{Reason: c.reason,
		Class: rollout.ClassifyRejection(msg), Message: msg, First: at, Last: at}, firstSeen: seen, lastSeen: seen, fromCondition: true})
}

// deploymentCondition is a Deployment's ReplicaFailure condition, when it is True.
type deploymentCondition struct {
	reason, message string
	since           time.Time // lastTransitionTime (1 s)
}

// podCreated clears the rejections of the Pod's owner that it came after: the controller made a
// Pod again. created is its receive time (or its creation's best stamp without one).
func (a *activeRollout) podCreated(owner string, created time.Time) {
	for i := range a.rejections {
		s := &a.rejections[i]
		if s.Cleared.IsZero() && (s.Owner == owner || s.fromCondition) && created.After(s.lastSeen) {
			s.Cleared = created
		}
	}
}

// blocked is the rejection that holds the rollout now, the one that began first, or nil.
func (a *activeRollout) blocked() *rejectionState {
	var b *rejectionState
	for i := range a.rejections {
		if s := &a.rejections[i]; s.Cleared.IsZero() && (b == nil || s.firstSeen.Before(b.firstSeen)) {
			b = s
		}
	}
	return b
}

// latestBlocked is the rejection that holds the rollout and was seen last: what the rollout's
// reason and the gauge's class name.
func (a *activeRollout) latestBlocked() *rejectionState {
	var b *rejectionState
	for i := range a.rejections {
		if s := &a.rejections[i]; s.Cleared.IsZero() && (b == nil || !s.lastSeen.Before(b.lastSeen)) {
			b = s
		}
	}
	return b
}

// rejectionsOf are the rejections as the rollout's trace carries them.
func (a *activeRollout) rejectionsOf() []rollout.Rejection {
	if len(a.rejections) == 0 {
		return nil
	}
	out := make([]rollout.Rejection, len(a.rejections))
	for i := range a.rejections {
		out[i] = a.rejections[i].Rejection
	}
	return out
}

// replicaFailureOf reads a Deployment's ReplicaFailure condition, when True.
func replicaFailureOf(conds []appsv1.DeploymentCondition) *deploymentCondition {
	for i := range conds {
		c := &conds[i]
		if c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue {
			return &deploymentCondition{reason: c.Reason, message: c.Message, since: c.LastTransitionTime.Time}
		}
	}
	return nil
}
