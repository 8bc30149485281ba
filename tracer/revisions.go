package tracer

import (
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/readyspan/readyspan/rollout/tracker"
	"github.com/readyspan/readyspan/watch"
)

// ControllerRevisions (apps/v1): a StatefulSet's or DaemonSet's revisions, which the rollout
// tracker reads to tell one rollout from the next.
const (
	ResourceControllerRevisions watch.Resource = "controllerrevisions"
	StreamRevisions             watch.Stream   = "controllerrevisions"
)

// revisionKind is the registry entry of ControllerRevisions.
var revisionKind = &kind{
	Kind: &watch.Kind{
		Resource: ResourceControllerRevisions, Stream: StreamRevisions, Kind: "ControllerRevision",
		GVR:       appsv1.SchemeGroupVersion.WithResource("controllerrevisions"),
		NewObject: func() runtime.Object { return &appsv1.ControllerRevision{} },
		NewList:   func() runtime.Object { return &appsv1.ControllerRevisionList{} },
		ListWatch: watch.Namespaced(func(c kubernetes.Interface, ns string) watch.Lister[*appsv1.ControllerRevisionList] {
			return c.AppsV1().ControllerRevisions(ns)
		}),
		// The whole template again: rollouts need only the revision.
		Transform: func(o runtime.Object) {
			cr := o.(*appsv1.ControllerRevision)
			cr.Annotations = nil
			cr.Data = runtime.RawExtension{}
		},
		KeepsIdentity: true,
		Snapshot:      watch.SnapshotRevisions, Verbs: watch.ReadVerbs,
	},
	rollout: func(r *tracker.Tracker, d watch.Delta) { r.HandleRevision(&d, d.Object.(*appsv1.ControllerRevision)) },
}
