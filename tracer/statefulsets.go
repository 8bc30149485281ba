package tracer

import (
	"context"
	"strconv"
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

// StatefulSets (apps/v1): a workload of its own, whose Pods are rooted at the change that
// made them and whose revisions are ControllerRevisions (revisions.go).
const (
	ResourceStatefulSets watch.Resource = "statefulsets"
	StreamStatefulSets   watch.Stream   = "statefulsets"
)

// statefulSetKind is the registry entry of StatefulSets.
var statefulSetKind = &kind{
	Kind: &watch.Kind{
		Resource: ResourceStatefulSets, Stream: StreamStatefulSets, Kind: "StatefulSet",
		GVR:       appsv1.SchemeGroupVersion.WithResource("statefulsets"),
		NewObject: func() runtime.Object { return &appsv1.StatefulSet{} },
		NewList:   func() runtime.Object { return &appsv1.StatefulSetList{} },
		ListWatch: watch.Namespaced(func(c kubernetes.Interface, ns string) watch.Lister[*appsv1.StatefulSetList] {
			return c.AppsV1().StatefulSets(ns)
		}),
		Transform: func(o runtime.Object) {
			st := o.(*appsv1.StatefulSet)
			tracker.SlimWorkload(st, &st.Spec.Template, &st.ObjectMeta)
			st.Spec.VolumeClaimTemplates = nil
		},
		KeepsIdentity: true, Workload: true, Audit: workloadWrites,
		Snapshot: watch.SnapshotWorkloads, Verbs: watch.ReadVerbs,
		Explain: []string{"statefulset", "statefulsets", "sts"},
		Get: func(ctx context.Context, c kubernetes.Interface, ns, name string) (metav1.Object, error) {
			return c.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
		},
		Rollouts: true,
	},
	handle: func(c *Correlator, d watch.Delta) { c.handleStatefulSet(&d, d.Object.(*appsv1.StatefulSet)) },
	rollout: func(r *tracker.Tracker, d watch.Delta) {
		r.HandleStatefulSet(&d, d.Object.(*appsv1.StatefulSet))
	},
	// "Create Pod web-0 in StatefulSet web successful" stamps the Pod's creation.
	events:        func(c *Correlator, e *events.Event) bool { return c.handleCreatedEvent(e) },
	rolloutEvents: func(r *tracker.Tracker, e *events.Event) bool { return r.HandleEvent(e) },
	step:          statefulSetStep,
	root: func(c *Correlator, owner *metav1.OwnerReference, obs *phases.Pod, pod *corev1.Pod) {
		c.statefulSetRoot(owner, obs, pod)
	},
}

// statefulSetStep reads the statefulset controller's "create Pod web-0 in StatefulSet web
// successful" (v1.37: "Create Pod …") and "delete Pod web-2 in StatefulSet web successful".
func statefulSetStep(st *rollout.Step, reason, msg string) (ok, known bool) {
	if reason != "SuccessfulCreate" && reason != "SuccessfulDelete" {
		return false, true
	}
	f := strings.Fields(msg)
	if len(f) != 7 || f[1] != "Pod" || f[3] != "in" || f[4] != "StatefulSet" || f[6] != "successful" {
		return true, false
	}
	verb := strings.ToLower(f[0])
	st.Up, st.Target = verb == "create", f[2]
	return true, verb == "create" || verb == "delete"
}

func (c *Correlator) handleStatefulSet(d *watch.Delta, s *appsv1.StatefulSet) {
	if o := c.handleWorkloadChange(d, &s.ObjectMeta); o != nil {
		o.ordered = s.Spec.PodManagementPolicy != appsv1.ParallelPodManagement
	}
}

// statefulSetRoot roots a StatefulSet's Pod: a replacement of the Pod of its name that went, or
// the StatefulSet's change, after which an ordered StatefulSet waits for the Pod before it to
// turn Ready.
func (c *Correlator) statefulSetRoot(ref *metav1.OwnerReference, obs *phases.Pod, pod *corev1.Pod) {
	rootedAt(obs, ref)
	o := c.owners[ref.UID]
	if o == nil {
		return
	}
	revision := pod.Labels[appsv1.ControllerRevisionHashLabelKey]
	// The StatefulSet recreates a Pod under its name once the old one is gone from the API; one
	// of another revision went for an update (the change below), not to be replaced.
	if e := o.followed(obs, func(e *endedPod) bool {
		return e.name == obs.Name && !e.succeeded && (e.revision == "" || e.revision == revision)
	}); e != nil {
		trigger := e.gone
		if len(trigger) == 0 {
			trigger = e.at
		}
		replaces(obs, e, trigger)
		return
	}
	ch := o.latestChange(obs)
	if ch == nil {
		return
	}
	obs.RootPersisted, obs.Client, obs.Cause, obs.Trigger = ch.persisted, ch.client, phases.CauseChange, ch.persisted
	applyAudit(obs, c.auditFor(string(ResourceStatefulSets), o.namespace, o.name, phases.FirstOf(ch.persisted)))
	if !o.ordered {
		return
	}
	base, ordinal, ok := statefulOrdinal(obs.Name)
	if !ok || ordinal == 0 {
		return
	}
	prev := base + "-" + strconv.Itoa(ordinal-1)
	r, ok := o.ready[prev]
	if !ok || !phases.AtOrBefore(r.at, obs.Created) {
		return
	}
	// The controller had to wait for the Pod before to be Ready, unless it was Ready before
	// the change.
	if rs, _ := r.at.Resolve(); rs.At > phases.FirstInstant(ch.persisted) {
		obs.Cause, obs.CauseObject, obs.Trigger = phases.CausePredecessorReady, prev, r.at
	}
}
