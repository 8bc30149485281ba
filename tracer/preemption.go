package tracer

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/readyspan/readyspan/events"
	"github.com/readyspan/readyspan/objects"
	"github.com/readyspan/readyspan/phases"
)

// Preemption. To place a Pod (the preemptor) the scheduler evicts lower-priority Pods (the
// victims): it sets each victim's DisruptionTarget condition (reason PreemptionByScheduler),
// deletes it, and then records a Preempted event about it naming the preemptor's UID. The
// preemptor's trace links to each victim's, and a victim still starting says who preempted it
// and links back.

// preemptedWait is how long the trace of a victim deleted before Ready waits for the scheduler's
// Preempted event, which it records after its delete returned: without it, the trace cannot say
// who preempted the Pod.
const preemptedWait = 3 * time.Second

// awaitsPreempted reports whether the scheduler preempted the Pod (its DisruptionTarget
// condition says so) and its Preempted event has not arrived yet.
func (ps *podState) awaitsPreempted() bool {
	cond := objects.Condition(ps.pod, corev1.DisruptionTarget)
	if cond == nil || cond.Status != corev1.ConditionTrue || cond.Reason != corev1.PodReasonPreemptionByScheduler {
		return false
	}
	for _, e := range ps.events {
		if e.Reason == "Preempted" {
			return false
		}
	}
	return true
}

// preempted adds the victim of a Preempted event to its preemptor's trace, when the preemptor
// is in flight here (with shards, the victim's Event reaches the victim's shard only).
func (c *Correlator) preempted(e *events.Event) {
	uid, ok := events.ParsePreemptedMessage(e.Message)
	if !ok {
		return
	}
	ps := c.pods[types.UID(uid)]
	if ps == nil || len(ps.victims) >= phases.MaxVictims {
		return
	}
	for _, v := range ps.victims {
		if v.UID == string(e.Regarding.UID) {
			return
		}
	}
	ref := phases.PodRef{Namespace: e.Namespace, Name: e.Regarding.Name, UID: string(e.Regarding.UID)}
	// An Event's strings are anyone's who may write Events: bounded as the API bounds a Pod's.
	ref.Namespace, ref.Name, ref.UID = ref.Namespace[:min(len(ref.Namespace), maxNodeName)], ref.Name[:min(len(ref.Name), maxNodeName)], ref.UID[:min(len(ref.UID), events.MaxUID)]
	ps.victims = append(ps.victims, ref)
}

// preemptorOf names the preemptor of a victim's trace when it is in flight here.
func (c *Correlator) preemptorOf(ref *phases.PodRef) {
	if ps := c.pods[types.UID(ref.UID)]; ps != nil {
		ref.Namespace, ref.Name = ps.pod.Namespace, ps.pod.Name
	}
}
