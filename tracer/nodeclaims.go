package tracer

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/watch"
)

// Karpenter's NodeClaim (karpenter.sh/v1, cluster-scoped): Karpenter's record of one node it
// decided to add, made before the instance exists. Its creation is the decision; its
// conditions Launched (the cloud provider's create returned), Registered (a Node with its
// provider ID joined, and Karpenter synced it) and Initialized (the Node Ready, its startup
// taints gone) are the steps a Pod that waited for the node waited through
// (scheduling.node.*). It is a custom resource: watched only where its CRD is installed.
const (
	ResourceNodeClaims watch.Resource = "nodeclaims.karpenter.sh"
	StreamNodeClaims   watch.Stream   = "nodeclaims.karpenter.sh"
)

var nodeClaimsGVR = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodeclaims"}

// nodePoolLabel names a NodeClaim's NodePool.
const nodePoolLabel = "karpenter.sh/nodepool"

// nodeClaim is what readyspan reads of a NodeClaim: its metadata, the Node it registered, and
// its conditions. Decoding skips the rest (its requirements, resources, the NodeClass).
type nodeClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              nodeClaimSpec   `json:"spec,omitempty"`
	Status            nodeClaimStatus `json:"status,omitempty"`
}

// nodeClaimSpec holds the taints the Node starts with until a node agent removes them.
type nodeClaimSpec struct {
	StartupTaints []corev1.Taint `json:"startupTaints,omitempty"`
}

type nodeClaimStatus struct {
	NodeName   string               `json:"nodeName,omitempty"`
	Conditions []nodeClaimCondition `json:"conditions,omitempty"`
}

// nodeClaimCondition is one of its status conditions (operatorpkg's status.Condition): its
// lastTransitionTime is Karpenter's clock, in whole seconds.
type nodeClaimCondition struct {
	Type               string      `json:"type"`
	Status             string      `json:"status"`
	LastTransitionTime metav1.Time `json:"lastTransitionTime"`
}

func (n *nodeClaim) DeepCopyObject() runtime.Object {
	out := &nodeClaim{TypeMeta: n.TypeMeta, Status: nodeClaimStatus{NodeName: n.Status.NodeName}}
	out.Spec.StartupTaints = append([]corev1.Taint(nil), n.Spec.StartupTaints...)
	n.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Status.Conditions = append([]nodeClaimCondition(nil), n.Status.Conditions...)
	return out
}

// The NodeClaim conditions a Pod's wait for its node is made of.
const (
	claimLaunched    = "Launched"
	claimRegistered  = "Registered"
	claimInitialized = "Initialized"
)

// slimNodeClaim keeps of a NodeClaim its identity, its NodePool, the Node it registered and the
// conditions read, their strings bounded (anyone who may write NodeClaims writes them).
func slimNodeClaim(n *nodeClaim) {
	pool := n.Labels[nodePoolLabel]
	n.ObjectMeta = metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion,
		CreationTimestamp: n.CreationTimestamp, DeletionTimestamp: n.DeletionTimestamp}
	if pool != "" {
		n.Labels = map[string]string{nodePoolLabel: pool[:min(len(pool), maxLabelValue)]}
	}
	n.Status.NodeName = n.Status.NodeName[:min(len(n.Status.NodeName), maxNodeName)]
	var startup []corev1.Taint
	for _, t := range n.Spec.StartupTaints {
		if len(startup) < maxTaints {
			startup = append(startup, corev1.Taint{Key: t.Key[:min(len(t.Key), maxTaintKey)], Effect: t.Effect})
		}
	}
	n.Spec = nodeClaimSpec{StartupTaints: startup}
	kept := n.Status.Conditions[:0]
	for _, c := range n.Status.Conditions {
		switch c.Type {
		case claimLaunched, claimRegistered, claimInitialized:
			if c.Status == string(metav1.ConditionTrue) {
				kept = append(kept, nodeClaimCondition{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime})
			}
		}
	}
	n.Status.Conditions = kept
}

// maxLabelValue is the API's bound on a label's value; maxNodeName its bound on a Node's name.
const (
	maxLabelValue = 63
	maxNodeName   = 253
)

// nodeClaimSeen is what readyspan keeps of a NodeClaim: when it was made and each condition first
// seen True, and the Node it registered.
type nodeClaimSeen struct {
	uid, nodePool, node string
	startupTaints       []string // the keys of its spec.startupTaints
	created             phases.Times
	launched            phases.Times
	registered          phases.Times
	initialized         phases.Times
}

// nodeClaimsSeen holds the NodeClaims by name, and their names by the Node each registered.
type nodeClaimsSeen struct {
	byName map[string]*nodeClaimSeen
	byNode map[string]string
}

func (c *Correlator) nodeClaims() *nodeClaimsSeen {
	return stateOf(c, ResourceNodeClaims, func() *nodeClaimsSeen {
		return &nodeClaimsSeen{byName: map[string]*nodeClaimSeen{}, byNode: map[string]string{}}
	})
}

// handleNodeClaim keeps a NodeClaim's creation and the first time each of its conditions read
// is seen True. A deleted NodeClaim is forgotten: its Node goes with it.
func (c *Correlator) handleNodeClaim(d *watch.Delta, n *nodeClaim) {
	all := c.nodeClaims()
	cur := all.byName[n.Name]
	if d.Type == watch.Deleted {
		if cur != nil && all.byNode[cur.node] == n.Name {
			delete(all.byNode, cur.node)
		}
		delete(all.byName, n.Name)
		return
	}
	if cur == nil {
		if len(all.byName) >= maxNodes {
			c.stats.Dropped("nodeclaims_cap")
			return
		}
		cur = &nodeClaimSeen{uid: string(n.UID), nodePool: n.Labels[nodePoolLabel]}
		for _, t := range n.Spec.StartupTaints {
			cur.startupTaints = append(cur.startupTaints, t.Key)
		}
		cur.created.Add(n.CreationTimestamp.Time, phases.SourceMetadata)
		if d.Type == watch.Added {
			cur.created.Add(d.WatchTime(), phases.SourceWatch)
		}
		all.byName[n.Name] = cur
	}
	if n.Status.NodeName != "" && cur.node == "" {
		cur.node = n.Status.NodeName
		all.byNode[cur.node] = n.Name
	}
	for _, cond := range n.Status.Conditions {
		var t *phases.Times
		switch cond.Type {
		case claimLaunched:
			t = &cur.launched
		case claimRegistered:
			t = &cur.registered
		case claimInitialized:
			t = &cur.initialized
		}
		if t != nil && !t.Known() {
			t.Add(cond.LastTransitionTime.Time, phases.SourceStatus)
			t.Add(d.WatchTime(), phases.SourceWatch)
		}
	}
	if st := c.nodeStartups[cur.node]; st != nil {
		c.checkNodeStartup(cur.node, st, d.Recv)
	}
}

// claimUIDOf is the UID of the NodeClaim that made the Node, "" for none.
func (c *Correlator) claimUIDOf(node string) string {
	all := c.nodeClaims()
	if cl := all.byName[all.byNode[node]]; cl != nil {
		return cl.uid
	}
	return ""
}

// claimOf is what was seen of the NodeClaim that made the Node, nil for none.
func (c *Correlator) claimOf(node string) *phases.NodeClaimSeen {
	all := c.nodeClaims()
	name, ok := all.byNode[node]
	if !ok {
		return nil
	}
	cl := all.byName[name]
	return &phases.NodeClaimSeen{Name: name, UID: cl.uid, NodePool: cl.nodePool,
		Created: append(phases.Times(nil), cl.created...), Launched: append(phases.Times(nil), cl.launched...),
		Registered: append(phases.Times(nil), cl.registered...), Initialized: append(phases.Times(nil), cl.initialized...)}
}

// nodeClaimKind is the registry entry of Karpenter's NodeClaims.
var nodeClaimKind = &kind{
	Kind: &watch.Kind{
		Resource: ResourceNodeClaims, Stream: StreamNodeClaims, Kind: "NodeClaim",
		GVR:       nodeClaimsGVR,
		NewObject: func() runtime.Object { return &nodeClaim{} },
		NewList:   func() runtime.Object { return &watch.CustomList[nodeClaim, *nodeClaim]{} },
		ListWatch: watch.CustomResource(nodeClaimsGVR,
			func() runtime.Object { return &nodeClaim{} }, func() runtime.Object { return &watch.CustomList[nodeClaim, *nodeClaim]{} }),
		Transform: func(o runtime.Object) { slimNodeClaim(o.(*nodeClaim)) },
		JSONOnly:  true, Optional: true, ClusterScoped: true, KeepsIdentity: true,
		Snapshot: watch.SnapshotNodes, Verbs: watch.ReadVerbs,
	},
	handle: func(c *Correlator, d watch.Delta) { c.handleNodeClaim(&d, d.Object.(*nodeClaim)) },
}
