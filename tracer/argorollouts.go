package tracer

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/readyspan/readyspan/events"
	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/watch"
)

// Argo Rollouts' Rollout (argoproj.io/v1alpha1): a workload that, like a Deployment, makes a
// ReplicaSet per Pod template and scales it for each change (its canary and blue-green steps
// scale in stages). Its Pods are traced as a Deployment's are: rooted at the Rollout's change,
// through controllers.rollout (the change → its ReplicaSet scaled up) and
// controllers.replicaset. It is a custom resource: watched only where its CRD is installed.
const (
	ResourceArgoRollouts watch.Resource = "rollouts.argoproj.io"
	StreamArgoRollouts   watch.Stream   = "rollouts.argoproj.io"
)

var argoRolloutsGVR = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "rollouts"}

// argoRollout is what readyspan reads of a Rollout: its metadata (the generation its spec
// changes raise, and the field managers that made them). Decoding skips the rest.
type argoRollout struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
}

func (r *argoRollout) DeepCopyObject() runtime.Object {
	out := &argoRollout{TypeMeta: r.TypeMeta}
	r.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return out
}

// argoRolloutKind is the registry entry of Argo Rollouts' Rollouts.
var argoRolloutKind = &kind{
	Kind: &watch.Kind{
		Resource: ResourceArgoRollouts, Stream: StreamArgoRollouts, Kind: "Rollout",
		GVR:       argoRolloutsGVR,
		NewObject: func() runtime.Object { return &argoRollout{} },
		NewList:   func() runtime.Object { return &watch.CustomList[argoRollout, *argoRollout]{} },
		ListWatch: watch.CustomResource(argoRolloutsGVR,
			func() runtime.Object { return &argoRollout{} }, func() runtime.Object { return &watch.CustomList[argoRollout, *argoRollout]{} }),
		JSONOnly: true, Optional: true,
		KeepsIdentity: true, Workload: true, Audit: workloadWrites,
		TemplateHashLabel: "rollouts-pod-template-hash",
		Snapshot:          watch.SnapshotWorkloads, Verbs: watch.ReadVerbs,
		Explain: []string{"rollout", "rollouts", "ro"},
		Get: func(ctx context.Context, c kubernetes.Interface, ns, name string) (metav1.Object, error) {
			r := &argoRollout{}
			return r, watch.GetCustomResource(ctx, c, argoRolloutsGVR, ns, name, r)
		},
	},
	scalesReplicaSets: true,
	// Its controller writes the Rollout's spec itself (each container's resources, once, raising
	// its generation to 2 before any client's change; the revision annotation).
	manager: "rollouts-controller",
	// The rollouts-controller: "Scaled up ReplicaSet web-7b9c9b7bb6 (revision 1) from 0 to 3".
	step: func(st *rollout.Step, reason, msg string) (bool, bool) {
		return scalingReplicaSet(st, reason, msg, "Scaled up ReplicaSet ", "Scaled down ReplicaSet ")
	},
	events: func(c *Correlator, e *events.Event) bool { return c.handleDeploymentEvent(e) },
	handle: func(c *Correlator, d watch.Delta) {
		c.handleWorkloadChange(&d, &d.Object.(*argoRollout).ObjectMeta)
	},
}
