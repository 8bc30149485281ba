package tracer

import (
	"context"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/readyspan/readyspan/tracer/pod"
	"github.com/readyspan/readyspan/watch"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/readyspan/readyspan/objects"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout/tracker"
	"github.com/readyspan/readyspan/tracecontext"
)

// Pods (core/v1): the object whose startup every trace follows. Each in-flight Pod's state is
// package pod's machine; the correlator routes its versions and Events to it and adds what
// other objects say (observe). Its view is slimPod.
const (
	ResourcePods watch.Resource = "pods"
	StreamPods   watch.Stream   = "pods"
)

// tracked is an in-flight Pod as the correlator holds it: the Pod's own state machine, and the
// correlator's bookkeeping of it (its due time, its phase gauge, its Services' answer).
type tracked struct {
	pod.State
	service serviceAnswer // whether a Service selects it, as last asked
	// gone: the watch said the Pod is gone (its last delta), so nothing will take it out of the
	// correlator's done set once its trace is exported.
	gone       bool
	completeAt time.Time // when the trace was found complete, for Config.Settle
	// due is when the clock alone could finish the trace; dueIndex is the Pod's place in the
	// Correlator's heap of due times, -1 when it is not in it.
	due      time.Time
	dueIndex int
	// phase is the phase the Pod is counted in for the in-flight gauges, "" when not counted.
	phase string
	// exported is set when its trace is exported, and it is no longer in flight.
	exported bool
	// traceContext is the first valid tracing.k8s.io/traceparent the Pod carried, nil for none
	// (tracecontext.go).
	traceContext *phases.TraceContext
}

// observe assembles what was observed of the Pod for phases.Build: what the Pod and its Events
// show (pod.State.Observe), and what its controllers, its node, its claims and its Services'
// endpoints say of it.
func (c *Correlator) observe(ps *tracked) *phases.Pod {
	p := ps.Pod()
	obs := ps.Observe(c.unparsed)
	c.rootOf(ps, obs)
	if obs.Root == phases.RootBarePod {
		obs.RootPersisted = obs.Created
	}
	obs.Workload = workloadOf(&p.ObjectMeta, obs.Controllers)
	if obs.Replaces != nil {
		c.disrupted(obs.Replaces)
	}
	obs.NewNode = c.newNode(ps)
	obs.Scheduler, obs.NodeInfo = p.Spec.SchedulerName, c.nodeInfoOf(p.Spec.NodeName)
	if obs.PreemptedBy != nil {
		c.preemptorOf(obs.PreemptedBy)
	}
	c.claimsOf(p, obs)
	obs.HasService = c.hasService(ps)
	if ps.traceContext != nil {
		obs.TraceContext = *ps.traceContext
	}
	if t, ok := c.endpointReady[p.UID]; ok {
		obs.EndpointsReady = t
	}
	return obs
}

// workloadOf names the workload a Pod belongs to (phases.Pod.Workload): the outermost of the
// chain the correlator found (a ReplicaSet's Deployment, a Job's CronJob, whose names last
// across rollouts and runs), else, for a ReplicaSet's Pod, the ReplicaSet's name without the
// pod-template-hash the deployment controller appends (its Deployment's name, known from the Pod
// alone, before or without the ReplicaSet), else its controller's name; "" for a bare Pod.
func workloadOf(m *metav1.ObjectMeta, chain []phases.Controller) string {
	if len(chain) > 1 {
		return chain[0].Name
	}
	owner := objects.ControllerOf(m)
	if owner == nil {
		return ""
	}
	if owner.Kind != "ReplicaSet" {
		return owner.Name
	}
	for _, k := range byIndex { // the registry, as init made it (kinds would be a cycle)
		if hash := m.Labels[k.TemplateHashLabel]; k.TemplateHashLabel != "" && hash != "" {
			if name, ok := strings.CutSuffix(owner.Name, "-"+hash); ok && name != "" {
				return name
			}
		}
	}
	return owner.Name
}

// eventsInOrder puts the Pod's events in the order they happened, by when they first happened
// (resolved once, when each was added) and then by resourceVersion, and returns them. They are
// sorted where they are kept: they mostly arrive in that order, and nothing else reads it.

// podKind is the registry entry of Pods (kinds.go).
var podKind = &kind{
	Kind: &watch.Kind{
		Resource: ResourcePods, Stream: StreamPods, Kind: "Pod",
		GVR:       corev1.SchemeGroupVersion.WithResource("pods"),
		NewObject: func() runtime.Object { return &corev1.Pod{} },
		NewList:   func() runtime.Object { return &corev1.PodList{} },
		ListWatch: func(c kubernetes.Interface, ns string, cfg watch.Config) (watch.ListFunc, watch.WatchFunc) {
			pods := c.CoreV1().Pods(ns)
			return func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
					o.LabelSelector = cfg.Selector // Pods only: owners, events and endpoints are needed whole
					return pods.List(ctx, o)
				}, func(ctx context.Context, o metav1.ListOptions) (apiwatch.Interface, error) {
					o.LabelSelector = cfg.Selector
					return pods.Watch(ctx, o)
				}
		},
		Transform:     func(o runtime.Object) { slimPod(o.(*corev1.Pod)) },
		KeepsIdentity: true,
		// A bare Pod's creation is the root request of its chain.
		Audit: &watch.AuditedWrites{Verbs: []string{"create"}},
		// A Pod deleted while the watch was down still names its node.
		Identity: func(from, kept runtime.Object) {
			kept.(*corev1.Pod).Spec.NodeName = from.(*corev1.Pod).Spec.NodeName
		},
		Snapshot: watch.SnapshotPods, Verbs: watch.ReadVerbs,
		Explain: []string{"pod", "pods", "po"},
		Get: func(ctx context.Context, c kubernetes.Interface, ns, name string) (metav1.Object, error) {
			return c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		},
	},
	handle:  func(c *Correlator, d watch.Delta) { c.handlePod(&d, d.Object.(*corev1.Pod)) },
	rollout: func(r *tracker.Tracker, d watch.Delta) { r.HandlePod(&d, d.Object.(*corev1.Pod)) },
}

// slimPod keeps of a Pod what the correlator reads: no annotations, no env, args or commands
// (never copied into spans), no volume contents.
func slimPod(o *corev1.Pod) {
	// Of the annotations, only the trace context is read (bounded: a hostile value is counted,
	// not held); watch/strip.go keeps the same.
	tp, ok := o.Annotations[tracecontext.Annotation]
	o.Annotations = nil
	if ok {
		o.Annotations = map[string]string{tracecontext.Annotation: tracecontext.Bound(tp)}
	}
	slimContainers(o.Spec.InitContainers)
	slimContainers(o.Spec.Containers)
	for i := range o.Spec.Volumes {
		o.Spec.Volumes[i].VolumeSource = slimVolume(o.Spec.Volumes[i].VolumeSource)
	}
	// Of the spec, what is read: the node, the scheduler, the scheduling gates, the containers and
	// volumes. The watch drops the rest from protobuf frames before decoding (watch/strip.go's
	// podSpec, held to this by TestStripRandomPods).
	o.Spec = corev1.PodSpec{NodeName: o.Spec.NodeName, SchedulerName: cut(o.Spec.SchedulerName, maxNodeName), SchedulingGates: o.Spec.SchedulingGates,
		Volumes: o.Spec.Volumes, InitContainers: o.Spec.InitContainers, Containers: o.Spec.Containers}
	// Of the status, what is read: its addresses (kube-proxy's rules name them), not its QoS
	// class or message; of a container's status, not its image, IDs or last state.
	st := &o.Status
	*st = corev1.PodStatus{Phase: st.Phase, Conditions: st.Conditions, Reason: st.Reason, StartTime: st.StartTime,
		NominatedNodeName: st.NominatedNodeName, PodIP: st.PodIP, PodIPs: st.PodIPs,
		InitContainerStatuses: st.InitContainerStatuses, ContainerStatuses: st.ContainerStatuses}
	for _, list := range [][]corev1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses} {
		for i := range list {
			cs := &list[i]
			*cs = corev1.ContainerStatus{Name: cs.Name, State: cs.State, Ready: cs.Ready, RestartCount: cs.RestartCount, Started: cs.Started}
		}
	}
}

func slimContainers(cs []corev1.Container) {
	for i := range cs {
		c := &cs[i]
		keep := corev1.Container{Name: c.Name, Image: c.Image, RestartPolicy: c.RestartPolicy}
		if c.ReadinessProbe != nil {
			keep.ReadinessProbe = &corev1.Probe{}
		}
		if c.StartupProbe != nil {
			keep.StartupProbe = &corev1.Probe{}
		}
		if c.LivenessProbe != nil {
			keep.LivenessProbe = &corev1.Probe{}
		}
		if c.Lifecycle != nil && (c.Lifecycle.PostStart != nil || c.Lifecycle.PreStop != nil) {
			keep.Lifecycle = &corev1.Lifecycle{}
			if c.Lifecycle.PostStart != nil {
				keep.Lifecycle.PostStart = &corev1.LifecycleHandler{}
			}
			if c.Lifecycle.PreStop != nil {
				keep.Lifecycle.PreStop = slimHandler(c.Lifecycle.PreStop) // rollouts measure the stop from it
			}
		}
		*c = keep
	}
}

// slimVolume keeps only the kind of a volume (the SLI excludes "stateful" kinds) and a claim's name.
func slimVolume(v corev1.VolumeSource) corev1.VolumeSource {
	var out corev1.VolumeSource
	switch {
	case v.Secret != nil:
		out.Secret = &corev1.SecretVolumeSource{}
	case v.ConfigMap != nil:
		out.ConfigMap = &corev1.ConfigMapVolumeSource{}
	case v.DownwardAPI != nil:
		out.DownwardAPI = &corev1.DownwardAPIVolumeSource{}
	case v.EmptyDir != nil:
		out.EmptyDir = &corev1.EmptyDirVolumeSource{}
	case v.Projected != nil:
		out.Projected = &corev1.ProjectedVolumeSource{}
	case v.PersistentVolumeClaim != nil:
		// Its claim, whose binding the Pod may wait for (claims.go).
		out.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: v.PersistentVolumeClaim.ClaimName}
	case v.Ephemeral != nil:
		out.Ephemeral = &corev1.EphemeralVolumeSource{} // its claim is named after the Pod and the volume
	default:
		out.HostPath = &corev1.HostPathVolumeSource{} // any other kind: stateful
	}
	return out
}

// slimHandler keeps of a preStop hook its sleep and which other kind it is: a rollout's old
// Pod is told to stop after the sleep, and after an exec or httpGet hook whose end it cannot see.
func slimHandler(h *corev1.LifecycleHandler) *corev1.LifecycleHandler {
	out := &corev1.LifecycleHandler{Sleep: h.Sleep}
	if h.Exec != nil {
		out.Exec = &corev1.ExecAction{}
	}
	if h.HTTPGet != nil {
		out.HTTPGet = &corev1.HTTPGetAction{}
	}
	if h.TCPSocket != nil {
		out.TCPSocket = &corev1.TCPSocketAction{}
	}
	return out
}
