package tracer

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

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

// nodeSeen is what readyspan keeps of a Node: its creation and when it first turned Ready. A few
// dozen bytes and its name, whatever the Node's labels, images and conditions (slimNode).
type nodeSeen struct {
	created phases.Times // creationTimestamp (1 s) and, seen added, the watch receive time
	ready   phases.Times // Ready's lastTransitionTime (the kubelet's clock) and the receive time
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
		delete(all, n.Name)
		return
	}
	cur := all[n.Name]
	if cur == nil {
		if len(all) >= maxNodes {
			c.stats.Dropped("nodes_cap")
			return
		}
		cur = &nodeSeen{}
		cur.created.Add(n.CreationTimestamp.Time, phases.SourceMetadata)
		if d.Type == watch.Added {
			cur.created.Add(d.WatchTime(), phases.SourceWatch)
		}
		all[n.Name] = cur
	}
	if cur.ready.Known() {
		return // its first Ready is the one a Pod waited for
	}
	for i := range n.Status.Conditions {
		if cond := &n.Status.Conditions[i]; cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
			cur.ready.Add(cond.LastTransitionTime.Time, phases.SourceStatus)
			cur.ready.Add(d.WatchTime(), phases.SourceWatch)
		}
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
	return &phases.NodeSeen{Name: name, Created: append(phases.Times(nil), n.created...), Ready: append(phases.Times(nil), n.ready...)}
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

// slimNode keeps of a Node its identity, its creation and its Ready condition: a Node's status
// holds its images (up to 50 names each) and its labels and annotations run to kilobytes.
func slimNode(n *corev1.Node) {
	n.ObjectMeta = metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion,
		CreationTimestamp: n.CreationTimestamp, DeletionTimestamp: n.DeletionTimestamp}
	n.Spec = corev1.NodeSpec{}
	var ready []corev1.NodeCondition
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			ready = []corev1.NodeCondition{{Type: cond.Type, Status: cond.Status, LastTransitionTime: cond.LastTransitionTime}}
		}
	}
	n.Status = corev1.NodeStatus{Conditions: ready}
}

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
