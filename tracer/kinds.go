package tracer

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/readyspan/readyspan/events"
	"github.com/readyspan/readyspan/objects"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/rollout/tracker"
	"github.com/readyspan/readyspan/watch"
)

// kind is one resource readyspan reads (its watch.Kind: how it is listed, watched, recorded and
// slimmed) and what the correlator and the rollout tracker do with its changes and Events. Each
// kind's entry lives in its own file (deployments.go, jobs.go…) with its view of the objects and
// its handlers; the table kinds lists them in order and is the only list: Kinds, the Watcher's
// reflectors, the recordings' streams, the correlator's dispatch and the test that holds the
// ClusterRole to them are derived from it. A new kind is its file, its line in kinds, its RBAC
// rule and its tests.
type kind struct {
	*watch.Kind

	// handle is what the Pod correlator does with a change of one of the kind's objects, and
	// rollout what the rollout tracker does with it: two consumers of the same delta, the
	// tracker first (it must know a Pod before the correlator exports its trace). The delta is
	// passed by value: through a function value, a pointer to it would escape, one allocation
	// per delta.
	handle  func(c *Correlator, d watch.Delta)
	rollout func(r *tracker.Tracker, d watch.Delta)

	// events and rolloutEvents read an Event about one of the kind's objects (Events about
	// Pods are the correlator's own); each returns false for a message in a format it does not
	// know.
	events        func(c *Correlator, e *events.Event) bool
	rolloutEvents func(r *tracker.Tracker, e *events.Event) bool

	// root fills the start of the chain of a Pod the kind's object controls, when it knows
	// the request that started it (rootOf has set RootController, which it keeps otherwise).
	root func(c *Correlator, owner *metav1.OwnerReference, obs *phases.Pod, pod *corev1.Pod)

	// scalesReplicaSets: the kind's controller makes a ReplicaSet per template and scales it
	// for each change (a Deployment; Argo Rollouts' Rollout), so the Pods of a ReplicaSet it
	// owns are rooted at its change (rootOf). Its changes are kept as an owner's
	// (handleWorkloadChange).
	scalesReplicaSets bool

	// step reads the kind's controller's Event of reason about one of its objects as a
	// scaling action (stepOf), in the message format of that controller: ok is false for an
	// Event that is not one, known false for a message in a format readyspan does not know.
	step func(st *rollout.Step, reason, msg string) (ok, known bool)

	// manager is the field manager of the kind's controller when it is not
	// kube-controller-manager ("rollouts-controller"): its writes to the workload (the Argo
	// Rollouts controller's own spec updates) are not a client's change.
	manager string
}

// workloadWrites are a workload's changes: of the object, or of its scale (kubectl scale).
var workloadWrites = &watch.AuditedWrites{Verbs: []string{"create", "update", "patch"}, Subresources: []string{"scale"}}

// kinds is the registry, in the order the Watcher starts its reflectors.
var kinds = []*kind{
	podKind,
	replicaSetKind,
	deploymentKind,
	coreEventKind,
	eventsV1EventKind,
	endpointSliceKind,
	serviceKind,
	claimKind,
	statefulSetKind,
	daemonSetKind,
	revisionKind,
	jobKind,
	cronJobKind,
	nodeKind,
	nodeClaimKind,
	argoRolloutKind,
}

// Kinds is what readyspan reads, for the watch side: the Watcher, recordings, snapshots and the
// audit log. Its Kinds are those of kinds, in the same order (Index is a kind's place in both).
// It is built by init: the handlers of kinds reach kindNamed, which reads it.
var Kinds *watch.Registry

// byIndex is kinds, by Index, for the lookups the handlers make (set by init, as Kinds).
var byIndex []*kind

func init() {
	ws := make([]*watch.Kind, len(kinds))
	for i, k := range kinds {
		ws[i] = k.Kind
	}
	Kinds, byIndex = watch.NewRegistry(ws...), kinds
	for _, k := range kinds {
		if k.manager != "" {
			objects.RegisterManager(k.manager)
		}
	}
	of := func(obj runtime.Object) *kind {
		w, _ := Kinds.OfObject(obj)
		return byIndex[w.Index()]
	}
	fast.pod, fast.coreEvent, fast.eventsV1Event = of(&corev1.Pod{}), of(&corev1.Event{}), of(&eventsv1.Event{})
	fast.replicaSet, fast.endpointSlice = of(&appsv1.ReplicaSet{}), of(&discoveryv1.EndpointSlice{})
}

// kindOfObject returns the entry of an object's type.
//
// It runs for every delta: the kinds the watch delivers most are found by a type switch, which
// costs a few instructions; the registry answers for the rest. TestKindOfObject holds the two to
// the same answer for every entry.
func kindOfObject(obj runtime.Object) (*kind, bool) {
	var k *kind
	switch obj.(type) {
	case *corev1.Pod:
		k = fast.pod
	case *corev1.Event:
		k = fast.coreEvent
	case *eventsv1.Event:
		k = fast.eventsV1Event
	case *appsv1.ReplicaSet:
		k = fast.replicaSet
	case *discoveryv1.EndpointSlice:
		k = fast.endpointSlice
	default:
		if w, ok := Kinds.OfObject(obj); ok {
			k = byIndex[w.Index()]
		}
	}
	return k, k != nil
}

// fast holds the entries of the kinds that make most deltas (set by init).
var fast struct {
	pod, coreEvent, eventsV1Event, replicaSet, endpointSlice *kind
}

// kindNamed returns the entry of the objects of an apiVersion and Kind, as owner references
// and Events name them; nil for a kind readyspan does not read, or a Kind of that name in
// another API group (a custom resource's). An empty apiVersion matches by the Kind alone.
func kindNamed(apiVersion, name string) *kind {
	w := Kinds.Named(name)
	if w == nil {
		return nil
	}
	if apiVersion != "" {
		group, _, ok := strings.Cut(apiVersion, "/")
		if !ok {
			group = "" // the core group's "v1"
		}
		if group != w.GVR.Group {
			return nil
		}
	}
	return byIndex[w.Index()]
}

// stateOf returns what a kind's view keeps in a correlator, made with fresh on first use: a
// kind's state lives with its view, not in the Correlator's own fields.
func stateOf[T any](c *Correlator, r watch.Resource, fresh func() T) T {
	if st, ok := c.kindState[r].(T); ok {
		return st
	}
	if c.kindState == nil {
		c.kindState = map[watch.Resource]any{}
	}
	st := fresh()
	c.kindState[r] = st
	return st
}
