package tracer

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/readyspan/readyspan/events"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/watch"
)

// PersistentVolumeClaims (core/v1): when a claim a Pod's volume names turned Bound, and when the
// scheduler picked a node for it, as the watch first showed them. The claim's status states no
// time of its own (it has no conditions for binding), so the receive time is the evidence: an
// upper bound of the binding, to the watch's latency.
const (
	ResourceClaims watch.Resource = "persistentvolumeclaims"
	StreamClaims   watch.Stream   = "persistentvolumeclaims"
)

// annSelectedNode is the annotation the scheduler's VolumeBinding plugin puts on a
// WaitForFirstConsumer claim for its provisioner: the node the Pod was placed on.
const annSelectedNode = "volume.kubernetes.io/selected-node"

// claim is what readyspan keeps of a PersistentVolumeClaim.
type claim struct {
	phase        corev1.PersistentVolumeClaimPhase
	volume       string
	created      phases.Times
	bound        phases.Times // the first watch event that showed it Bound
	selectedNode phases.Times // the first that showed the scheduler's selected node
	hasNode      bool         // the selected-node annotation, as last seen
}

// claims holds the claims by namespace and name, as Pods name them. A cluster's claims are
// bounded by the cluster (as its Services are): each is forgotten when it is deleted.
type claims = map[objectName]*claim

func (c *Correlator) claims() claims {
	return stateOf(c, ResourceClaims, func() claims { return claims{} })
}

// handleClaim keeps a claim's phase and, from a live watch event, when it first showed Bound and
// the scheduler's selected node. An initial list witnesses neither.
func (c *Correlator) handleClaim(d *watch.Delta, pvc *corev1.PersistentVolumeClaim) {
	all := c.claims()
	key := objectName{pvc.Namespace, pvc.Name}
	if d.Type == watch.Deleted {
		delete(all, key)
		return
	}
	cl := all[key]
	fresh := cl == nil
	if fresh {
		cl = &claim{}
		cl.created.Add(pvc.CreationTimestamp.Time, phases.SourceMetadata)
		if d.Type == watch.Added {
			cl.created.Add(d.WatchTime(), phases.SourceWatch)
		}
		all[key] = cl
	}
	// Only a change seen happen is stamped: a claim first seen Bound (or with a selected node)
	// was bound at a time nothing here states.
	wasBound, hadNode := cl.phase == corev1.ClaimBound, cl.hasNode
	cl.phase, cl.volume = pvc.Status.Phase, pvc.Spec.VolumeName
	_, cl.hasNode = pvc.Annotations[annSelectedNode]
	at := d.WatchTime()
	if !fresh && cl.phase == corev1.ClaimBound && !wasBound {
		cl.bound.AddFirst(at, phases.SourceWatch)
	}
	if !fresh && cl.hasNode && !hadNode {
		cl.selectedNode.AddFirst(at, phases.SourceWatch)
	}
}

// claimsOf fills the observation's claims from the Pod's volumes: a persistentVolumeClaim
// volume names its claim, a generic ephemeral volume's claim is named <pod>-<volume>.
func (c *Correlator) claimsOf(p *corev1.Pod, obs *phases.Pod) {
	var all claims
	for i := range p.Spec.Volumes {
		v := &p.Spec.Volumes[i]
		name := ""
		switch {
		case v.PersistentVolumeClaim != nil:
			name = v.PersistentVolumeClaim.ClaimName
		case v.Ephemeral != nil:
			name = p.Name + "-" + v.Name
		default:
			continue
		}
		if all == nil {
			all = c.claims()
		}
		out := phases.Claim{Name: name}
		if cl := all[objectName{p.Namespace, name}]; cl != nil {
			out.Seen, out.Phase, out.Volume = true, string(cl.phase), cl.volume
			out.Created = append(phases.Times(nil), cl.created...)
			out.Bound = append(phases.Times(nil), cl.bound...)
			out.SelectedNode = append(phases.Times(nil), cl.selectedNode...)
		}
		obs.Claims = append(obs.Claims, out)
	}
}

// slimClaim keeps what handleClaim reads: the phase, the volume and the selected node.
func slimClaim(pvc *corev1.PersistentVolumeClaim) {
	node, ok := pvc.Annotations[annSelectedNode]
	pvc.Annotations = nil
	if ok {
		pvc.Annotations = map[string]string{annSelectedNode: node}
	}
	pvc.Labels = nil
	pvc.Spec = corev1.PersistentVolumeClaimSpec{VolumeName: pvc.Spec.VolumeName, StorageClassName: pvc.Spec.StorageClassName}
	pvc.Status = corev1.PersistentVolumeClaimStatus{Phase: pvc.Status.Phase}
}

// claimKind is the registry entry of the claims a Pod's volumes name.
var claimKind = &kind{
	Kind: &watch.Kind{
		Resource: ResourceClaims, Stream: StreamClaims, Kind: "PersistentVolumeClaim",
		GVR:       corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"),
		NewObject: func() runtime.Object { return &corev1.PersistentVolumeClaim{} },
		NewList:   func() runtime.Object { return &corev1.PersistentVolumeClaimList{} },
		ListWatch: watch.Namespaced(func(c kubernetes.Interface, ns string) watch.Lister[*corev1.PersistentVolumeClaimList] {
			return c.CoreV1().PersistentVolumeClaims(ns)
		}),
		Transform:     func(o runtime.Object) { slimClaim(o.(*corev1.PersistentVolumeClaim)) },
		KeepsIdentity: true,
		Snapshot:      watch.SnapshotServices, Verbs: watch.ReadVerbs,
	},
	handle: func(c *Correlator, d watch.Delta) { c.handleClaim(&d, d.Object.(*corev1.PersistentVolumeClaim)) },
	// The PV controller's and the scheduler's events about a claim (WaitForFirstConsumer,
	// ProvisioningSucceeded…) state nothing the claim's own changes do not.
	events: func(*Correlator, *events.Event) bool { return true },
}
