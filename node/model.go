// Package node is the pure model of a new Node's startup, as package rollout is of a rollout's:
// what was observed of it (Startup: its provisioner's NodeClaim, the Node's creation, Ready,
// network, startup taints, its DaemonSet Pods, the Pods that waited for it) in, and its trace
// (node.startup and its steps, every boundary with its source) out. No client-go.
package node

import (
	"time"

	"github.com/readyspan/readyspan/phases"
)

// Startup is what was observed of one Node's startup.
type Startup struct {
	Name string // the Node's name, "" while only its NodeClaim exists
	UID  string // the Node's UID
	// Provisioner is the autoscaler that added it (phases.ServiceKarpenter with a NodeClaim), ""
	// when nothing says.
	Provisioner string
	// Claim is Karpenter's NodeClaim for it, nil where none made it.
	Claim *phases.NodeClaimSeen

	Created       phases.Times // the Node's creationTimestamp and the watch's receive time
	Ready         phases.Times // Ready True: its lastTransitionTime (the kubelet's clock) and the watch
	NetworkReady  phases.Times // NetworkUnavailable False, where the Node reports it
	TaintsRemoved phases.Times // the watch's first version without the taints it was added with

	// DaemonPods are its DaemonSet Pods, in the order they were seen, at most MaxDaemonPods:
	// the node serves its Pods fully once they are Ready (its CNI, proxy, log and metrics
	// agents).
	DaemonPods []DaemonPod
	// Waiters are Pods that waited for it (their scheduling.waiting_for_node), at most
	// MaxWaiters, each linked from its root.
	Waiters []phases.PodRef

	// Outcome is how its trace ended; End when, for outcomes other than ready.
	Outcome Outcome
	End     time.Time
	Reason  string
}

// DaemonPod is one DaemonSet Pod on the Node.
type DaemonPod struct {
	phases.PodRef
	DaemonSet string
	Ready     phases.Times
}

// MaxDaemonPods bounds the DaemonSet Pods a node's trace draws; MaxWaiters the Pods it links to.
const (
	MaxDaemonPods = 32
	MaxWaiters    = 32
)

// Outcome is how a node's startup trace ended.
type Outcome string

const (
	OutcomeReady      Outcome = "ready"       // it took Pods, its DaemonSet Pods Ready
	OutcomeStuck      Outcome = "stuck"       // not done within the stuck deadline
	OutcomeDeleted    Outcome = "deleted"     // the Node or its NodeClaim went first
	OutcomeInProgress Outcome = "in-progress" // still starting when the trace was asked for
)

// LinkWaited is the relation (phases.AttrLinkRelation) of a node trace's root's link to a Pod
// that waited for the node; the Pod's wait links back as phases.LinkNodeStartup.
const LinkWaited = "waited"

// TraceIDFor is a node's trace ID (phases.NodeStartupKey): its NodeClaim's UID where Karpenter
// made it (the claim exists before the Node, so a Pod still waiting links to the same trace),
// else the Node's.
func TraceIDFor(claimUID, nodeUID string) phases.TraceID {
	return phases.TraceIDFor(phases.NodeStartupKey(claimUID, nodeUID))
}

// RootSpanIDFor is the span ID of a node trace's root, which Pods' waits link to.
func RootSpanIDFor(claimUID, nodeUID string) phases.SpanID {
	return phases.SpanIDFor(phases.NodeStartupKey(claimUID, nodeUID), RootSpanName)
}
