package tracer

import (
	"context"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/readyspan/readyspan/events"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/rollout/tracker"
	"github.com/readyspan/readyspan/watch"
)

// DaemonSets (apps/v1): a workload of its own, one Pod per node, rooted at the change that
// made it; its revisions are ControllerRevisions (revisions.go).
const (
	ResourceDaemonSets watch.Resource = "daemonsets"
	StreamDaemonSets   watch.Stream   = "daemonsets"
)

// daemonSetKind is the registry entry of DaemonSets.
var daemonSetKind = &kind{
	Kind: &watch.Kind{
		Resource: ResourceDaemonSets, Stream: StreamDaemonSets, Kind: "DaemonSet",
		GVR:       appsv1.SchemeGroupVersion.WithResource("daemonsets"),
		NewObject: func() runtime.Object { return &appsv1.DaemonSet{} },
		NewList:   func() runtime.Object { return &appsv1.DaemonSetList{} },
		ListWatch: watch.Namespaced(func(c kubernetes.Interface, ns string) watch.Lister[*appsv1.DaemonSetList] {
			return c.AppsV1().DaemonSets(ns)
		}),
		Transform: func(o runtime.Object) {
			ds := o.(*appsv1.DaemonSet)
			tracker.SlimWorkload(ds, &ds.Spec.Template, &ds.ObjectMeta)
		},
		KeepsIdentity: true, Workload: true, Audit: workloadWrites,
		Snapshot: watch.SnapshotWorkloads, Verbs: watch.ReadVerbs,
		Explain: []string{"daemonset", "daemonsets", "ds"},
		Get: func(ctx context.Context, c kubernetes.Interface, ns, name string) (metav1.Object, error) {
			return c.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		},
		Rollouts: true,
	},
	handle: func(c *Correlator, d watch.Delta) {
		o := d.Object.(*appsv1.DaemonSet)
		c.handleWorkloadChange(&d, &o.ObjectMeta)
	},
	rollout: func(r *tracker.Tracker, d watch.Delta) { r.HandleDaemonSet(&d, d.Object.(*appsv1.DaemonSet)) },
	// "Created pod: agent-x7k2p" stamps the Pod's creation.
	events:        func(c *Correlator, e *events.Event) bool { return c.handleCreatedEvent(e) },
	rolloutEvents: func(r *tracker.Tracker, e *events.Event) bool { return r.HandleEvent(e) },
	step:          daemonSetStep,
	root: func(c *Correlator, owner *metav1.OwnerReference, obs *phases.Pod, pod *corev1.Pod) {
		c.daemonSetRoot(owner, obs, pod)
	},
}

// daemonSetStep reads the daemon set controller's "Created pod: agent-x7k2p" and "Deleted pod:
// agent-x7k2p".
func daemonSetStep(st *rollout.Step, reason, msg string) (ok, known bool) {
	var name string
	var found bool
	switch reason {
	case "SuccessfulCreate":
		name, found = strings.CutPrefix(msg, "Created pod: ")
		st.Up = true
	case "SuccessfulDelete":
		name, found = strings.CutPrefix(msg, "Deleted pod: ")
	default:
		return false, true
	}
	st.Target = name
	return true, found && name != ""
}

// daemonSetRoot roots a DaemonSet's Pod: a replacement of its Pod on the same node that went,
// or the DaemonSet's change.
func (c *Correlator) daemonSetRoot(ref *metav1.OwnerReference, obs *phases.Pod, pod *corev1.Pod) {
	rootedAt(obs, ref)
	o := c.owners[ref.UID]
	if o == nil {
		return
	}
	revision := pod.Labels[appsv1.ControllerRevisionHashLabelKey]
	if e := o.followed(obs, func(e *endedPod) bool {
		return obs.Node != "" && e.node == obs.Node && !e.succeeded && (e.revision == "" || e.revision == revision)
	}); e != nil {
		trigger := e.over
		if len(trigger) == 0 {
			trigger = e.at
		}
		replaces(obs, e, trigger)
		return
	}
	if ch := o.latestChange(obs); ch != nil {
		obs.RootPersisted, obs.Client, obs.Cause, obs.Trigger = ch.persisted, ch.client, phases.CauseChange, ch.persisted
		applyAudit(obs, c.auditFor(string(ResourceDaemonSets), o.namespace, o.name, phases.FirstOf(ch.persisted)))
	}
}
