package tracer

import (
	"context"
	"slices"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/readyspan/readyspan/node"
	"github.com/readyspan/readyspan/objects"
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

// nodeSeen is what readyspan keeps of a Node: its creation, when it first turned Ready, its
// network came up and it was first Ready without a startup taint. A few dozen bytes and its
// name, whatever the Node's labels, images and conditions (slimNode).
type nodeSeen struct {
	uid          string
	created      phases.Times // creationTimestamp (1 s) and, seen added, the watch receive time
	ready        phases.Times // Ready's lastTransitionTime (the kubelet's clock) and the receive time
	networkReady phases.Times // NetworkUnavailable turned False: its lastTransitionTime and the receive time
	// tainted: a version had a startup taint (startupTaint), and the last one has; untainted:
	// some version had one. taintsRemoved is the receive time of the first version Ready without
	// one, after one was seen: when the Node could take Pods.
	tainted, untaintedSince bool
	taintsRemoved           phases.Times
	// startup is its startup while it is traced (nodestartups.go), nil otherwise; traced says
	// it was (its trace exists, or will).
	startup *nodeStartup
	traced  bool
	// info is what its last version said of itself: its Pods' traces carry it.
	info phases.NodeInfo
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
		}
		all[n.Name] = cur
		c.startNodeStartup(d, n.Name, cur)
	}
	cur.info = infoOf(n)
	// Its first Ready, network and Ready without startup taints are the ones a Pod waited for.
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
	cur.tainted = c.hasStartupTaint(n)
	if cur.tainted {
		cur.untaintedSince = true
	} else if cur.untaintedSince && !cur.taintsRemoved.Known() && objects.NodeReady(n) {
		cur.taintsRemoved.Add(d.WatchTime(), phases.SourceWatch)
	}
	c.checkNodeStartup(n.Name, cur, d.Recv)
}

// ephemeralTaints are the taints a starting Node carries until it can take Pods, whoever made
// it: the node lifecycle controller's, the cloud controller manager's, Karpenter's (its known
// ephemeral taints, pkg/scheduling/taints.go). A NodeClaim's startupTaints are added to them.
var ephemeralTaints = map[string]bool{
	corev1.TaintNodeNotReady: true, corev1.TaintNodeUnreachable: true, corev1.TaintNodeNetworkUnavailable: true,
	"node.cloudprovider.kubernetes.io/uninitialized": true, "karpenter.sh/unregistered": true,
}

// hasStartupTaint reports whether the Node carries a taint of its startup: an ephemeral one, one
// of the readiness.k8s.io/ gates, or one its NodeClaim lists as a startup taint (a node agent's,
// which the agent removes once it runs).
func (c *Correlator) hasStartupTaint(n *corev1.Node) bool {
	var claim *nodeClaimSeen
	if name := claimOwnerOf(n); name != "" {
		claim = c.nodeClaims().byName[name]
	}
	for _, t := range n.Spec.Taints {
		if ephemeralTaints[t.Key] || strings.HasPrefix(t.Key, "readiness.k8s.io/") || claim != nil && slices.Contains(claim.startupTaints, t.Key) {
			return true
		}
	}
	return false
}

// claimOwnerOf is the name of the NodeClaim that owns the Node (Karpenter sets it at
// registration), "" for none.
func claimOwnerOf(n *corev1.Node) string {
	for _, r := range n.OwnerReferences {
		if r.Kind == "NodeClaim" && strings.HasPrefix(r.APIVersion, "karpenter.sh/") {
			return r.Name
		}
	}
	return ""
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

// slimNode keeps of a Node its identity, its NodeClaim, its creation, its Ready and
// NetworkUnavailable conditions and the keys of its NoSchedule and NoExecute taints (at most
// maxTaints): a Node's status holds its images (up to 50 names each) and its labels and
// annotations run to kilobytes.
func slimNode(n *corev1.Node) {
	var owners []metav1.OwnerReference
	if name := claimOwnerOf(n); name != "" {
		owners = []metav1.OwnerReference{{APIVersion: "karpenter.sh/v1", Kind: "NodeClaim", Name: name[:min(len(name), maxNodeName)]}}
	}
	var labels map[string]string
	if label, pool := nodePoolOf(n.Labels); pool != "" {
		labels = map[string]string{label: pool[:min(len(pool), maxLabelValue)]}
	}
	n.ObjectMeta = metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion,
		CreationTimestamp: n.CreationTimestamp, DeletionTimestamp: n.DeletionTimestamp, OwnerReferences: owners, Labels: labels}
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
	info := n.Status.NodeInfo
	n.Status = corev1.NodeStatus{Conditions: kept, NodeInfo: corev1.NodeSystemInfo{
		KubeletVersion:          cut(info.KubeletVersion, maxNodeInfo),
		ContainerRuntimeVersion: cut(info.ContainerRuntimeVersion, maxNodeInfo+len("://")+maxNodeInfo)}}
}

// nodePoolLabels are the labels that name a node's pool, in the order they are looked for:
// Karpenter's NodePool, then GKE's, EKS's and AKS's pools.
var nodePoolLabels = []string{nodePoolLabel, "cloud.google.com/gke-nodepool", "eks.amazonaws.com/nodegroup", "kubernetes.azure.com/agentpool"}

// nodePoolOf returns the first of nodePoolLabels the labels carry, and its value.
func nodePoolOf(labels map[string]string) (label, pool string) {
	for _, l := range nodePoolLabels {
		if v := labels[l]; v != "" {
			return l, v
		}
	}
	return "", ""
}

// infoOf is what a Node (slimmed) says of itself for its Pods' traces (phases.NodeInfo).
func infoOf(n *corev1.Node) phases.NodeInfo {
	_, pool := nodePoolOf(n.Labels)
	info := phases.NodeInfo{KubeletVersion: cut(n.Status.NodeInfo.KubeletVersion, maxNodeInfo), Pool: pool}
	rt := n.Status.NodeInfo.ContainerRuntimeVersion
	if name, version, ok := strings.Cut(rt, "://"); ok {
		info.RuntimeName, info.RuntimeVersion = cut(name, maxNodeInfo), cut(version, maxNodeInfo)
	} else {
		info.RuntimeName = cut(rt, maxNodeInfo)
	}
	return info
}

// cut bounds s to n bytes, at a rune's start so the result stays valid UTF-8.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// maxNodeInfo bounds each string kept of a Node's status.nodeInfo: the API sets no bound, and a
// version is a few dozen bytes.
const maxNodeInfo = 128

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
		Explain: []string{"node", "nodes", "no"},
		Get: func(ctx context.Context, c kubernetes.Interface, _, name string) (metav1.Object, error) {
			return c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		},
	},
	handle: func(c *Correlator, d watch.Delta) { c.handleNode(&d, d.Object.(*corev1.Node)) },
}

// nodeInfoOf is what the Pod's node said of itself, zero when it is not known.
func (c *Correlator) nodeInfoOf(name string) phases.NodeInfo {
	if n := c.nodes()[name]; n != nil {
		return n.info
	}
	return phases.NodeInfo{}
}
