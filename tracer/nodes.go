package tracer

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/readyspan/readyspan/node"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/watch"
)

// Nodes (core/v1, cluster-scoped): a Pod that found no node and was bound to one added for it (by
// cluster-autoscaler, Karpenter or anyone) waited for that Node to be created and turn Ready. The
// Node's creation and its Ready condition end scheduling.waiting_for_node.
const (
	ResourceNodes watch.Resource = "nodes"
	StreamNodes   watch.Stream   = "nodes"
)

// nodeSeen is what readyspan keeps of a Node: its creation, when it first turned Ready and its
// network came up, and the startup taints it was seen with until the last went. A few dozen
// bytes and its name, whatever the Node's labels, images and conditions (slimNode).
type nodeSeen struct {
	uid          string
	created      phases.Times // creationTimestamp (1 s) and, seen added, the watch receive time
	ready        phases.Times // Ready's lastTransitionTime (the kubelet's clock) and the receive time
	networkReady phases.Times // NetworkUnavailable turned False: its lastTransitionTime and the receive time
	// startupTaints are the keys of the NoSchedule and NoExecute taints of its first version
	// seen added, still on it; taintsRemoved is the receive time of the version that removed
	// the last of them.
	startupTaints []string
	taintsRemoved phases.Times
	// startup is its startup while it is traced (nodestartups.go), nil otherwise; traced says
	// it was (its trace exists, or will).
	startup *nodeStartup
	traced  bool
}

type nodes = map[string]*nodeSeen

// maxNodes bounds the Nodes kept: the largest clusters have some 15,000; beyond the bound a new
// Node is not kept (its Pods' waits end unobserved) rather than memory grow without limit.
const maxNodes = 100000

func (c *Correlator) nodes() nodes { return stateOf(c, ResourceNodes, func() nodes { return nodes{} }) }

// handleNode keeps a Node's creation when it is first seen and the first time it is seen Ready.
func (c *Correlator) handleNode(d *watch.Delta, n *corev1.Node) {
	all := c.nodes()
	if d.Type == watch.Deleted {
		if cur := all[n.Name]; cur != nil && cur.startup != nil {
			c.exportNodeStartup(n.Name, cur, node.OutcomeDeleted, "Node deleted", d.Recv)
		}
		delete(all, n.Name)
		return
	}
	cur := all[n.Name]
	if cur == nil {
		if len(all) >= maxNodes {
			c.stats.Dropped("nodes_cap")
			return
		}
		cur = &nodeSeen{uid: string(n.UID)}
		cur.created.Add(n.CreationTimestamp.Time, phases.SourceMetadata)
		if d.Type == watch.Added {
			cur.created.Add(d.WatchTime(), phases.SourceWatch)
			// A Node just added carries the taints it registered with, Karpenter's and the
			// node's agents' among them: what is removed of them is its startup.
			for _, t := range n.Spec.Taints {
				cur.startupTaints = append(cur.startupTaints, t.Key)
			}
		}
		all[n.Name] = cur
		c.startNodeStartup(d, n.Name, cur)
	}
	cur.untainted(n, d.WatchTime())
	// Its first Ready and network are the ones a Pod waited for.
	for i := range n.Status.Conditions {
		cond := &n.Status.Conditions[i]
		switch {
		case cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue && !cur.ready.Known():
			cur.ready.Add(cond.LastTransitionTime.Time, phases.SourceStatus)
			cur.ready.Add(d.WatchTime(), phases.SourceWatch)
		case cond.Type == corev1.NodeNetworkUnavailable && cond.Status == corev1.ConditionFalse && !cur.networkReady.Known():
			cur.networkReady.Add(cond.LastTransitionTime.Time, phases.SourceStatus)
			cur.networkReady.Add(d.WatchTime(), phases.SourceWatch)
		}
	}
	c.checkNodeStartup(n.Name, cur, d.Recv)
}

// untainted drops the startup taints this version of the Node no longer has, and dates the
// removal of the last of them.
func (n *nodeSeen) untainted(node *corev1.Node, recv time.Time) {
	if len(n.startupTaints) == 0 {
		return
	}
	left := n.startupTaints[:0]
	for _, key := range n.startupTaints {
		if slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key }) {
			left = append(left, key)
		}
	}
	n.startupTaints = left
	if len(left) == 0 {
		n.startupTaints = nil
		n.taintsRemoved.Add(recv, phases.SourceWatch)
	}
}

// newNode is the Node the Pod was bound to when it was created after the Pod (so the Pod waited
// for it), nil otherwise. Both creationTimestamps are the apiserver's, in whole seconds: a Node
// created in the Pod's second counts when the watch saw it added after the Pod.
func (c *Correlator) newNode(ps *tracked) *phases.NodeSeen {
	name := ps.Pod().Spec.NodeName
	if name == "" {
		return nil
	}
	n := c.nodes()[name]
	if n == nil {
		return nil
	}
	nodeMeta, podMeta := stampOf(n.created, phases.SourceMetadata), stampOf(ps.Created(), phases.SourceMetadata)
	if nodeMeta == 0 || podMeta == 0 || nodeMeta < podMeta {
		return nil
	}
	if nodeMeta == podMeta {
		nodeWatch, podWatch := stampOf(n.created, phases.SourceWatch), stampOf(ps.Created(), phases.SourceWatch)
		if nodeWatch == 0 || podWatch == 0 || nodeWatch < podWatch {
			return nil
		}
	}
	return &phases.NodeSeen{Name: name, UID: n.uid, Traced: n.traced, Created: append(phases.Times(nil), n.created...), Ready: append(phases.Times(nil), n.ready...),
		NetworkReady: append(phases.Times(nil), n.networkReady...), TaintsRemoved: append(phases.Times(nil), n.taintsRemoved...),
		Claim: c.claimOf(name)}
}

// stampOf is the time a source observed, 0 for none.
func stampOf(t phases.Times, src phases.Source) phases.Instant {
	for _, s := range t {
		if s.Source == src {
			return s.At
		}
	}
	return 0
}

// slimNode keeps of a Node its identity, its creation, its Ready and NetworkUnavailable
// conditions and the keys of its NoSchedule and NoExecute taints (at most maxTaints): a Node's
// status holds its images (up to 50 names each) and its labels and annotations run to
// kilobytes.
func slimNode(n *corev1.Node) {
	n.ObjectMeta = metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion,
		CreationTimestamp: n.CreationTimestamp, DeletionTimestamp: n.DeletionTimestamp}
	var taints []corev1.Taint
	for _, t := range n.Spec.Taints {
		if (t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute) && len(taints) < maxTaints {
			taints = append(taints, corev1.Taint{Key: t.Key[:min(len(t.Key), maxTaintKey)], Effect: t.Effect})
		}
	}
	n.Spec = corev1.NodeSpec{Taints: taints}
	var kept []corev1.NodeCondition
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady || cond.Type == corev1.NodeNetworkUnavailable {
			kept = append(kept, corev1.NodeCondition{Type: cond.Type, Status: cond.Status, LastTransitionTime: cond.LastTransitionTime})
		}
	}
	n.Status = corev1.NodeStatus{Conditions: kept}
}

// maxTaints bounds the taints kept of a Node (a new one has a few), and maxTaintKey a key (the
// API's bound: a 253-byte prefix, a slash and a 63-byte name).
const (
	maxTaints   = 16
	maxTaintKey = 317
)

// nodeKind is the registry entry of Nodes: a Pod that waited for a node to be added waited
// for its creation and Ready.
var nodeKind = &kind{
	Kind: &watch.Kind{
		Resource: ResourceNodes, Stream: StreamNodes, Kind: "Node",
		GVR:       corev1.SchemeGroupVersion.WithResource("nodes"),
		NewObject: func() runtime.Object { return &corev1.Node{} },
		NewList:   func() runtime.Object { return &corev1.NodeList{} },
		ListWatch: func(c kubernetes.Interface, _ string, _ watch.Config) (watch.ListFunc, watch.WatchFunc) {
			x := c.CoreV1().Nodes()
			return watch.ListOf(x.List), x.Watch
		},
		Transform:     func(o runtime.Object) { slimNode(o.(*corev1.Node)) },
		ClusterScoped: true, KeepsIdentity: true,
		Snapshot: watch.SnapshotNodes, Verbs: watch.ReadVerbs,
	},
	handle: func(c *Correlator, d watch.Delta) { c.handleNode(&d, d.Object.(*corev1.Node)) },
}
