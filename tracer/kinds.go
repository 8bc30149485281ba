package tracer

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/watch"
)

// The resources and streams of the kinds readyspan reads (one stream per group/version/resource
// read: the Events of core/v1 and events.k8s.io/v1 are two streams of one resource).
const (
	ResourcePods                watch.Resource = "pods"
	ResourceReplicaSets         watch.Resource = "replicasets"
	ResourceDeployments         watch.Resource = "deployments"
	ResourceEvents              watch.Resource = "events"
	ResourceEndpointSlices      watch.Resource = "endpointslices"
	ResourceServices            watch.Resource = "services"
	ResourceStatefulSets        watch.Resource = "statefulsets"
	ResourceDaemonSets          watch.Resource = "daemonsets"
	ResourceControllerRevisions watch.Resource = "controllerrevisions"

	StreamPods           watch.Stream = "pods"
	StreamReplicaSets    watch.Stream = "replicasets"
	StreamDeployments    watch.Stream = "deployments"
	StreamStatefulSets   watch.Stream = "statefulsets"
	StreamDaemonSets     watch.Stream = "daemonsets"
	StreamRevisions      watch.Stream = "controllerrevisions"
	StreamServices       watch.Stream = "services"
	StreamEndpointSlices watch.Stream = "endpointslices"
	StreamEventsCore     watch.Stream = "events.core.v1"
	StreamEventsV1       watch.Stream = "events.events.k8s.io.v1"
)

// kind is one resource readyspan reads (its watch.Kind: how it is listed, watched, recorded and
// slimmed) and what the correlator and the rollout tracker do with its changes and Events. The
// table below (kinds) is the only list of them; Kinds, the Watcher's reflectors, the
// recordings' streams, the correlator's dispatch and the test that holds the ClusterRole to
// them are derived from it, so a new kind is one entry here and the code that reads its objects.
type kind struct {
	*watch.Kind

	// handle is what the Pod correlator does with a change of one of the kind's objects, and
	// rollout what the rollout tracker does with it: two consumers of the same delta, the
	// tracker first (it must know a Pod before the correlator exports its trace). The delta is
	// passed by value: through a function value, a pointer to it would escape, one allocation
	// per delta.
	handle  func(c *Correlator, d watch.Delta)
	rollout func(r *rollouts, d watch.Delta)

	// events and rolloutEvents read an Event about one of the kind's objects (Events about
	// Pods are the correlator's own); each returns false for a message in a format it does not
	// know.
	events        func(c *Correlator, e *event) bool
	rolloutEvents func(r *rollouts, e *event) bool

	// root fills the start of the chain of a Pod the kind's object controls, when it knows
	// the request that started it (rootOf has set RootController, which it keeps otherwise).
	root func(c *Correlator, owner *metav1.OwnerReference, obs *phases.Pod, pod *corev1.Pod)
}

// workloadWrites are a workload's changes: of the object, or of its scale (kubectl scale).
var workloadWrites = &watch.AuditedWrites{Verbs: []string{"create", "update", "patch"}, Subresources: []string{"scale"}}

// kinds is the registry, in the order the Watcher starts its reflectors.
var kinds = []*kind{
	{
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
		rollout: func(r *rollouts, d watch.Delta) { r.handlePod(&d, d.Object.(*corev1.Pod)) },
	},
	{
		Kind: &watch.Kind{
			Resource: ResourceReplicaSets, Stream: StreamReplicaSets, Kind: "ReplicaSet",
			GVR:       appsv1.SchemeGroupVersion.WithResource("replicasets"),
			NewObject: func() runtime.Object { return &appsv1.ReplicaSet{} },
			NewList:   func() runtime.Object { return &appsv1.ReplicaSetList{} },
			ListWatch: watch.Namespaced(func(c kubernetes.Interface, ns string) watch.Lister[*appsv1.ReplicaSetList] {
				return c.AppsV1().ReplicaSets(ns)
			}),
			// Rollouts read the revision; nothing reads the template.
			Transform: func(o runtime.Object) {
				rs := o.(*appsv1.ReplicaSet)
				rev, ok := rs.Annotations[annDeploymentRevision]
				rs.Annotations = nil
				if ok {
					rs.Annotations = map[string]string{annDeploymentRevision: rev}
				}
				rs.Spec.Template = corev1.PodTemplateSpec{}
			},
			KeepsIdentity: true,
			Snapshot:      watch.SnapshotReplicaSets, Verbs: watch.ReadVerbs,
		},
		handle: func(c *Correlator, d watch.Delta) {
			o := d.Object.(*appsv1.ReplicaSet)
			c.handleReplicaSet(&d, o)
			c.retryPendingScale()
		},
		// The replicaset controller's SuccessfulCreate stamps the Pod's creation.
		rollout:       func(r *rollouts, d watch.Delta) { r.handleReplicaSet(&d, d.Object.(*appsv1.ReplicaSet)) },
		events:        func(c *Correlator, e *event) bool { return c.handleCreatedEvent(e) },
		rolloutEvents: func(r *rollouts, e *event) bool { return r.handleRejection(e) }, // FailedCreate
	},
	{
		Kind: &watch.Kind{
			Resource: ResourceDeployments, Stream: StreamDeployments, Kind: "Deployment",
			GVR:       appsv1.SchemeGroupVersion.WithResource("deployments"),
			NewObject: func() runtime.Object { return &appsv1.Deployment{} },
			NewList:   func() runtime.Object { return &appsv1.DeploymentList{} },
			ListWatch: watch.Namespaced(func(c kubernetes.Interface, ns string) watch.Lister[*appsv1.DeploymentList] {
				return c.AppsV1().Deployments(ns)
			}),
			Transform: func(o runtime.Object) {
				d := o.(*appsv1.Deployment)
				slimWorkload(d, &d.Spec.Template, &d.ObjectMeta)
			},
			KeepsIdentity: true, Workload: true, Audit: workloadWrites,
			Snapshot: watch.SnapshotWorkloads, Verbs: watch.ReadVerbs,
			Explain: []string{"deployment", "deployments", "deploy"},
			Get: func(ctx context.Context, c kubernetes.Interface, ns, name string) (metav1.Object, error) {
				return c.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			},
			Rollouts: true,
		},
		handle: func(c *Correlator, d watch.Delta) {
			o := d.Object.(*appsv1.Deployment)
			c.handleDeployment(&d, o)
		},
		rollout:       func(r *rollouts, d watch.Delta) { r.handleWorkload(&d, deploymentView(d.Object.(*appsv1.Deployment))) },
		events:        func(c *Correlator, e *event) bool { return c.handleDeploymentEvent(e) },
		rolloutEvents: func(r *rollouts, e *event) bool { return r.handleEvent(e) },
	},
	{
		Kind: &watch.Kind{
			// The Events the watch reads: every recorder's, through the core API.
			Resource: ResourceEvents, Stream: StreamEventsCore, Kind: "Event",
			GVR:       corev1.SchemeGroupVersion.WithResource("events"),
			NewObject: func() runtime.Object { return &corev1.Event{} },
			NewList:   func() runtime.Object { return &corev1.EventList{} },
			ListWatch: watch.Namespaced(func(c kubernetes.Interface, ns string) watch.Lister[*corev1.EventList] {
				return c.CoreV1().Events(ns)
			}),
			ShardAfterOthers: true,
			Snapshot:         watch.SnapshotEvents, Verbs: watch.ReadVerbs,
		},
		handle: func(c *Correlator, d watch.Delta) {
			// Each Event arrives through both Events APIs: the second view is dropped before
			// it is converted.
			o := d.Object.(*corev1.Event)
			if seen, fresh := c.eventVersion(&d, o.UID, o.ResourceVersion); fresh {
				c.handleEvent(&d, fromCoreEvent(o, d.WatchTime()), seen)
			}
		},
	},
	{
		Kind: &watch.Kind{
			// The same Events through events.k8s.io/v1, as recordings may hold them. Not watched:
			// one view is enough.
			Resource: ResourceEvents, Stream: StreamEventsV1, Kind: "Event",
			GVR:              eventsv1.SchemeGroupVersion.WithResource("events"),
			NewObject:        func() runtime.Object { return &eventsv1.Event{} },
			NewList:          func() runtime.Object { return &eventsv1.EventList{} },
			ShardAfterOthers: true,
			Snapshot:         watch.SnapshotEvents, Verbs: watch.ReadVerbs,
		},
		handle: func(c *Correlator, d watch.Delta) {
			o := d.Object.(*eventsv1.Event)
			if seen, fresh := c.eventVersion(&d, o.UID, o.ResourceVersion); fresh {
				c.handleEvent(&d, fromEventsV1(o, d.WatchTime()), seen)
			}
		},
	},
	{
		Kind: &watch.Kind{
			Resource: ResourceEndpointSlices, Stream: StreamEndpointSlices, Kind: "EndpointSlice",
			GVR:       discoveryv1.SchemeGroupVersion.WithResource("endpointslices"),
			NewObject: func() runtime.Object { return &discoveryv1.EndpointSlice{} },
			NewList:   func() runtime.Object { return &discoveryv1.EndpointSliceList{} },
			ListWatch: watch.Namespaced(func(c kubernetes.Interface, ns string) watch.Lister[*discoveryv1.EndpointSliceList] {
				return c.DiscoveryV1().EndpointSlices(ns)
			}),
			Transform: func(o runtime.Object) {
				es := o.(*discoveryv1.EndpointSlice)
				es.Annotations = nil
				for i := range es.Endpoints {
					es.Endpoints[i].Hints, es.Endpoints[i].DeprecatedTopology = nil, nil
				}
			},
			KeepsIdentity: true,
			Snapshot:      watch.SnapshotEndpointSlices, Verbs: watch.ReadVerbs,
		},
		handle: func(c *Correlator, d watch.Delta) { c.handleSlice(&d, d.Object.(*discoveryv1.EndpointSlice)) },
	},
	{
		Kind: &watch.Kind{
			Resource: ResourceServices, Stream: StreamServices, Kind: "Service",
			GVR:       corev1.SchemeGroupVersion.WithResource("services"),
			NewObject: func() runtime.Object { return &corev1.Service{} },
			NewList:   func() runtime.Object { return &corev1.ServiceList{} },
			ListWatch: watch.Namespaced(func(c kubernetes.Interface, ns string) watch.Lister[*corev1.ServiceList] {
				return c.CoreV1().Services(ns)
			}),
			KeepsIdentity: true,
			Snapshot:      watch.SnapshotServices, Verbs: watch.ReadVerbs,
		},
		handle: func(c *Correlator, d watch.Delta) { c.handleService(&d, d.Object.(*corev1.Service)) },
	},
	{
		Kind: &watch.Kind{
			// The claims a Pod's volumes name: when each was bound (claims.go).
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
		events: func(*Correlator, *event) bool { return true },
	},
	{
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
				slimWorkload(st, &st.Spec.Template, &st.ObjectMeta)
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
		rollout: func(r *rollouts, d watch.Delta) {
			r.handleWorkload(&d, statefulSetView(d.Object.(*appsv1.StatefulSet)))
		},
		// "Create Pod web-0 in StatefulSet web successful" stamps the Pod's creation.
		events:        func(c *Correlator, e *event) bool { return c.handleCreatedEvent(e) },
		rolloutEvents: func(r *rollouts, e *event) bool { return r.handleEvent(e) },
		root: func(c *Correlator, owner *metav1.OwnerReference, obs *phases.Pod, pod *corev1.Pod) {
			c.statefulSetRoot(owner, obs, pod)
		},
	},
	{
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
				slimWorkload(ds, &ds.Spec.Template, &ds.ObjectMeta)
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
		rollout: func(r *rollouts, d watch.Delta) { r.handleWorkload(&d, daemonSetView(d.Object.(*appsv1.DaemonSet))) },
		// "Created pod: agent-x7k2p" stamps the Pod's creation.
		events:        func(c *Correlator, e *event) bool { return c.handleCreatedEvent(e) },
		rolloutEvents: func(r *rollouts, e *event) bool { return r.handleEvent(e) },
		root: func(c *Correlator, owner *metav1.OwnerReference, obs *phases.Pod, pod *corev1.Pod) {
			c.daemonSetRoot(owner, obs, pod)
		},
	},
	{
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
		rollout: func(r *rollouts, d watch.Delta) { r.handleRevision(&d, d.Object.(*appsv1.ControllerRevision)) },
	},
	{
		Kind: &watch.Kind{
			// Jobs: a Job's Pods are rooted at its creation (jobs.go).
			Resource: ResourceJobs, Stream: StreamJobs, Kind: "Job",
			GVR:       batchv1.SchemeGroupVersion.WithResource("jobs"),
			NewObject: func() runtime.Object { return &batchv1.Job{} },
			NewList:   func() runtime.Object { return &batchv1.JobList{} },
			ListWatch: watch.Namespaced(func(c kubernetes.Interface, ns string) watch.Lister[*batchv1.JobList] {
				return c.BatchV1().Jobs(ns)
			}),
			// The view reads the Job's counts, status and schedule time, never its template.
			Transform:     func(o runtime.Object) { slimJob(o.(*batchv1.Job)) },
			KeepsIdentity: true, Workload: true,
			Audit:    &watch.AuditedWrites{Verbs: []string{"create"}},
			Snapshot: watch.SnapshotWorkloads, Verbs: watch.ReadVerbs,
			Explain: []string{"job", "jobs"},
			Get: func(ctx context.Context, c kubernetes.Interface, ns, name string) (metav1.Object, error) {
				return c.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
			},
		},
		handle: func(c *Correlator, d watch.Delta) { c.handleJob(&d, d.Object.(*batchv1.Job)) },
		// The job controller's SuccessfulCreate is the replicaset controller's: "Created pod: NAME".
		events:        func(c *Correlator, e *event) bool { return c.handleCreatedEvent(e) },
		rolloutEvents: func(r *rollouts, e *event) bool { return r.handleRejection(e) }, // FailedCreate: counted
		root: func(c *Correlator, owner *metav1.OwnerReference, obs *phases.Pod, _ *corev1.Pod) {
			c.jobRoot(owner, obs)
		},
	},
	{
		Kind: &watch.Kind{
			// CronJobs: a CronJob's Pods are rooted at its schedule (cronjobs.go, jobs.go).
			Resource: ResourceCronJobs, Stream: StreamCronJobs, Kind: "CronJob",
			GVR:       batchv1.SchemeGroupVersion.WithResource("cronjobs"),
			NewObject: func() runtime.Object { return &batchv1.CronJob{} },
			NewList:   func() runtime.Object { return &batchv1.CronJobList{} },
			ListWatch: watch.Namespaced(func(c kubernetes.Interface, ns string) watch.Lister[*batchv1.CronJobList] {
				return c.BatchV1().CronJobs(ns)
			}),
			// Nothing reads the Job template.
			Transform: func(o runtime.Object) {
				cj := o.(*batchv1.CronJob)
				cj.Annotations = nil
				cj.Spec.JobTemplate = batchv1.JobTemplateSpec{}
			},
			KeepsIdentity: true, Workload: true,
			Snapshot: watch.SnapshotWorkloads, Verbs: watch.ReadVerbs,
			Explain: []string{"cronjob", "cronjobs", "cj"},
			Get: func(ctx context.Context, c kubernetes.Interface, ns, name string) (metav1.Object, error) {
				return c.BatchV1().CronJobs(ns).Get(ctx, name, metav1.GetOptions{})
			},
		},
		handle: func(c *Correlator, d watch.Delta) { c.handleCronJob(&d, d.Object.(*batchv1.CronJob)) },
		events: func(c *Correlator, e *event) bool { return c.handleCronJobEvent(e) },
	},
	{
		Kind: &watch.Kind{
			// Nodes: a Pod that waited for a node to be added waited for its creation and Ready
			// (nodes.go).
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
	},
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

// kindNamed returns the entry of the objects of a Kind, as owner references and Events name
// it; nil for a kind readyspan does not read.
func kindNamed(name string) *kind {
	if w := Kinds.Named(name); w != nil {
		return byIndex[w.Index()]
	}
	return nil
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

// slimPod keeps of a Pod what the correlator reads: no annotations, no env, args or commands
// (never copied into spans), no volume contents.
func slimPod(o *corev1.Pod) {
	o.Annotations = nil
	slimContainers(o.Spec.InitContainers)
	slimContainers(o.Spec.Containers)
	o.Spec.EphemeralContainers = nil
	for i := range o.Spec.Volumes {
		o.Spec.Volumes[i].VolumeSource = slimVolume(o.Spec.Volumes[i].VolumeSource)
	}
	o.Spec.Affinity, o.Spec.Tolerations, o.Spec.ImagePullSecrets = nil, nil, nil
	for _, list := range [][]corev1.ContainerStatus{o.Status.InitContainerStatuses, o.Status.ContainerStatuses} {
		for i := range list {
			list[i].VolumeMounts, list[i].Resources, list[i].AllocatedResources, list[i].User = nil, nil, nil, nil
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
				keep.Lifecycle.PreStop = &corev1.LifecycleHandler{} // rollouts say whether a preStop hook ran
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
