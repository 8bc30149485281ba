package tracer

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/readyspan/readyspan/events"
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

// preempted adds the victim of a Preempted event to its preemptor's trace, when the preemptor
// is in flight here (with shards, the victim's Event reaches the victim's shard only).
func (c *Correlator) preempted(e *events.Event) {
	uid, ok := events.ParsePreemptedMessage(e.Message)
	if !ok {
		return
	}
	if ps := c.pods[types.UID(uid)]; ps != nil {
		ps.AddVictim(phases.PodRef{Namespace: e.Namespace, Name: e.Regarding.Name, UID: string(e.Regarding.UID)})
	}
}

// preemptorOf names the preemptor of a victim's trace when it is in flight here.
func (c *Correlator) preemptorOf(ref *phases.PodRef) {
	if ps := c.pods[types.UID(ref.UID)]; ps != nil {
		ref.Namespace, ref.Name = ps.Pod().Namespace, ps.Pod().Name
	}
}
