package tracer

import (
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/readyspan/readyspan/events"
	"github.com/readyspan/readyspan/objects"
	"github.com/readyspan/readyspan/rollout/tracker"
	"github.com/readyspan/readyspan/watch"
)

// ReplicaSets (apps/v1): a Deployment's revisions, the owners of its Pods. The replicaset controller's
// SuccessfulCreate stamps each Pod's creation; its FailedCreate is a rejection of the rollout.
const (
	ResourceReplicaSets watch.Resource = "replicasets"
	StreamReplicaSets   watch.Stream   = "replicasets"
)

// replicaSetKind is the registry entry of ReplicaSets.
var replicaSetKind = &kind{
	Kind: &watch.Kind{
		Resource: ResourceReplicaSets, Stream: StreamReplicaSets, Kind: "ReplicaSet",
		GVR:       appsv1.SchemeGroupVersion.WithResource("replicasets"),
		NewObject: func() runtime.Object { return &appsv1.ReplicaSet{} },
		NewList:   func() runtime.Object { return &appsv1.ReplicaSetList{} },
		ListWatch: watch.Namespaced(func(c kubernetes.Interface, ns string) watch.Lister[*appsv1.ReplicaSetList] {
			return c.AppsV1().ReplicaSets(ns)
		}),
		Transform:     func(o runtime.Object) { tracker.SlimReplicaSet(o.(*appsv1.ReplicaSet)) },
		KeepsIdentity: true,
		Snapshot:      watch.SnapshotReplicaSets, Verbs: watch.ReadVerbs,
	},
	handle: func(c *Correlator, d watch.Delta) {
		o := d.Object.(*appsv1.ReplicaSet)
		c.handleReplicaSet(&d, o)
		c.retryPendingScale()
	},
	// The replicaset controller's SuccessfulCreate stamps the Pod's creation.
	rollout:       func(r *tracker.Tracker, d watch.Delta) { r.HandleReplicaSet(&d, d.Object.(*appsv1.ReplicaSet)) },
	events:        func(c *Correlator, e *events.Event) bool { return c.handleCreatedEvent(e) },
	rolloutEvents: func(r *tracker.Tracker, e *events.Event) bool { return r.HandleRejection(e) }, // FailedCreate
}

func (c *Correlator) handleReplicaSet(d *watch.Delta, rs *appsv1.ReplicaSet) {
	if d.Type == watch.Deleted {
		delete(c.replicaSets, rs.UID)
		delete(c.owners, rs.UID)
		return
	}
	cur := c.replicaSets[rs.UID]
	replicas := int32(1)
	if rs.Spec.Replicas != nil {
		replicas = *rs.Spec.Replicas
	}
	if cur == nil {
		cur = &replicaSet{name: rs.Name, namespace: rs.Namespace}
		if owner := objects.ControllerOf(&rs.ObjectMeta); owner != nil {
			if k := kindNamed(owner.APIVersion, owner.Kind); k != nil && k.scalesReplicaSets {
				cur.scaler = &scalerRef{kind: k, uid: owner.UID, name: owner.Name}
			}
		}
		c.replicaSets[rs.UID] = cur
		if replicas > 0 {
			su := scaleUp{from: 0, to: -1, created: rs.CreationTimestamp.Time}
			if w := d.WatchTime(); d.Type == watch.Added && !w.IsZero() {
				// Seen created: its count now is the one it was created with.
				su.to, su.watched = replicas, events.WallOf(w)
			}
			cur.watched(su)
		}
	} else if replicas > cur.replicas {
		cur.watched(scaleUp{from: cur.replicas, to: replicas, watched: events.WallOf(d.WatchTime())})
	}
	cur.replicas = replicas
}
