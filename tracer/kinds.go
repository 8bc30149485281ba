package tracer

import (
	"context"
	"fmt"
	"reflect"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/readyspan/readyspan/phases"
)

// kind is one resource readyspan reads, through one API: everything the watch, the recordings,
// the correlator and the RBAC check need to know of it. The table below (kinds) is the only list
// of them; the Watcher's reflectors, the recording's streams and their order, the correlator's
// dispatch and the test that holds the ClusterRole to them are derived from it, so a new kind is
// one entry here and the code that reads its objects.
//
// There is one entry per group/version/resource, as there is one RBAC rule and one recording
// file per GVR: the Events of core/v1 and of events.k8s.io/v1 are two entries of one Resource.
type kind struct {
	resource Resource
	stream   Stream
	gvr      schema.GroupVersionResource
	kind     string // the objects' Kind, as a List names its items (<Kind>List)

	// newObject and newList are empty ones of the kind, to decode into and to watch with.
	newObject func() runtime.Object
	newList   func() runtime.Object

	// listWatch gives the calls that list and watch the kind in a namespace (all of them for
	// metav1.NamespaceAll); nil for a stream only recordings hold, not watched live.
	listWatch func(c kubernetes.Interface, ns string, cfg WatchConfig) (listFunc, watchFunc)

	// jsonOnly: the kind has no protobuf encoding (a custom resource: the apiserver serves
	// CRDs in JSON only, and client-go's dynamic and metadata clients read nothing else), so it
	// is listed and watched in JSON whatever --watch-encoding asks; every other kind is read in
	// protobuf unless JSON is asked for (encoding.go). Every kind watched today is built in:
	// TestKindsEncoding holds each entry without it to a type the protobuf serializer encodes.
	jsonOnly bool

	// transform drops what nothing reads of the kind's objects before anything keeps them,
	// after Transform has slimmed their managedFields; nil drops every annotation. Update it
	// before reading new fields.
	transform func(obj runtime.Object)

	// clusterScoped: the kind's objects belong to no namespace (Nodes). It is watched once, and
	// only when readyspan watches every namespace: a namespaced install's RoleBindings cannot
	// grant it, and the traces then go without what it tells.
	clusterScoped bool

	// keepsIdentity: the Watcher keeps each object's identity (lastSeen) so that a relist can
	// say which were deleted while the watch was down. Not for Events: processEvent says why.
	keepsIdentity bool
	// identity copies onto what lastSeen keeps (the object's metadata) whatever more a
	// deletion found by a relist needs of the kind; nil for the metadata alone.
	identity func(from, kept runtime.Object)

	// workload: the kind's objects are workloads of their own (their Pods' controllers, or
	// those of the ReplicaSets that make them). When replicas split the cluster, each goes to
	// the shard its key names (namespace/Kind/name), with its Pods and the Events about it.
	workload bool

	// shardAfterOthers: the shard filter sorts the kind's objects by objects of other kinds
	// (an Event by what it is about), so a shard starts its reflectors once the others'
	// initial lists are in.
	shardAfterOthers bool

	// audit are the client writes of the kind's objects that the audit log is read for (the
	// request that starts a Pod's chain); nil for none.
	audit *auditedWrites

	// handle is what the Pod correlator does with a change of one of the kind's objects, and
	// rollout what the rollout tracker does with it: two consumers of the same delta, the
	// tracker first (it must know a Pod before the correlator exports its trace). The delta is
	// passed by value: through a function value, a pointer to it would escape, one allocation
	// per delta.
	handle  func(c *Correlator, d Delta)
	rollout func(r *rollouts, d Delta)

	// events and rolloutEvents read an Event about one of the kind's objects (Events about
	// Pods are the correlator's own); each returns false for a message in a format it does not
	// know.
	events        func(c *Correlator, e *event) bool
	rolloutEvents func(r *rollouts, e *event) bool

	// root fills the start of the chain of a Pod the kind's object controls, when it knows
	// the request that started it (rootOf has set RootController, which it keeps otherwise).
	root func(c *Correlator, owner *metav1.OwnerReference, obs *phases.Pod, pod *corev1.Pod)

	// snapshot is the kind's place when a recording's List snapshots are fed in.
	snapshot snapshotRank

	// verbs are what readyspan needs granted on the resource (deploy/kubernetes/base/
	// clusterrole.yaml): list and watch for the watch, get for explain.
	verbs []string

	// explain are the names `readyspan explain NAME/OBJECT` accepts for the kind (kubectl's
	// name, plural and short names), the first the one usage shows; nil for a kind explain does
	// not take. get reads one object of it, for explain.
	explain []string
	get     func(ctx context.Context, c kubernetes.Interface, ns, name string) (metav1.Object, error)

	// rollouts: the rollout tracker traces the kind's rollouts.
	rollouts bool
}

// auditedWrites are the writes of a kind the audit log is read for: requests with one of the
// verbs, on the object itself or one of the subresources.
type auditedWrites struct {
	verbs        []string
	subresources []string
}

// workloadWrites are a workload's changes: of the object, or of its scale (kubectl scale).
var workloadWrites = &auditedWrites{verbs: []string{"create", "update", "patch"}, subresources: []string{"scale"}}

// snapshotRank orders a recording's List snapshots: owners before what they own and Services
// before Pods, so that a Pod is correlated with what made and selects it; Events before Pods,
// so that a Pod completed by its snapshot already has them. Kinds of one rank keep the order
// of the table.
type snapshotRank int

const (
	snapshotWorkloads   snapshotRank = iota // Deployments, StatefulSets, DaemonSets, Jobs
	snapshotRevisions                       // a StatefulSet's or DaemonSet's revisions
	snapshotReplicaSets                     // a Deployment's
	snapshotServices
	snapshotEvents
	snapshotEndpointSlices
	snapshotNodes // before the Pods bound to them
	snapshotPods
)

// readVerbs is what every kind needs: readyspan only ever reads.
var readVerbs = []string{"get", "list", "watch"}

// kinds is the registry, in the order the Watcher starts its reflectors.
var kinds = []*kind{
	{
		resource: ResourcePods, stream: StreamPods, kind: "Pod",
		gvr:       corev1.SchemeGroupVersion.WithResource("pods"),
		newObject: func() runtime.Object { return &corev1.Pod{} },
		newList:   func() runtime.Object { return &corev1.PodList{} },
		listWatch: func(c kubernetes.Interface, ns string, cfg WatchConfig) (listFunc, watchFunc) {
			pods := c.CoreV1().Pods(ns)
			return func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
					o.LabelSelector = cfg.Selector // Pods only: owners, events and endpoints are needed whole
					return pods.List(ctx, o)
				}, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
					o.LabelSelector = cfg.Selector
					return pods.Watch(ctx, o)
				}
		},
		transform:     func(o runtime.Object) { slimPod(o.(*corev1.Pod)) },
		keepsIdentity: true,
		// A bare Pod's creation is the root request of its chain.
		audit: &auditedWrites{verbs: []string{"create"}},
		// A Pod deleted while the watch was down still names its node.
		identity: func(from, kept runtime.Object) {
			kept.(*corev1.Pod).Spec.NodeName = from.(*corev1.Pod).Spec.NodeName
		},
		handle:   func(c *Correlator, d Delta) { c.handlePod(&d, d.Object.(*corev1.Pod)) },
		rollout:  func(r *rollouts, d Delta) { r.handlePod(&d, d.Object.(*corev1.Pod)) },
		snapshot: snapshotPods, verbs: readVerbs,
		explain: []string{"pod", "pods", "po"},
		get: func(ctx context.Context, c kubernetes.Interface, ns, name string) (metav1.Object, error) {
			return c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		},
	},
	{
		resource: ResourceReplicaSets, stream: StreamReplicaSets, kind: "ReplicaSet",
		gvr:       appsv1.SchemeGroupVersion.WithResource("replicasets"),
		newObject: func() runtime.Object { return &appsv1.ReplicaSet{} },
		newList:   func() runtime.Object { return &appsv1.ReplicaSetList{} },
		listWatch: namespaced(func(c kubernetes.Interface, ns string) lister[*appsv1.ReplicaSetList] {
			return c.AppsV1().ReplicaSets(ns)
		}),
		// Rollouts read the revision; nothing reads the template.
		transform: func(o runtime.Object) {
			rs := o.(*appsv1.ReplicaSet)
			rev, ok := rs.Annotations[annDeploymentRevision]
			rs.Annotations = nil
			if ok {
				rs.Annotations = map[string]string{annDeploymentRevision: rev}
			}
			rs.Spec.Template = corev1.PodTemplateSpec{}
		},
		keepsIdentity: true,
		handle: func(c *Correlator, d Delta) {
			o := d.Object.(*appsv1.ReplicaSet)
			c.handleReplicaSet(&d, o)
			c.retryPendingScale()
		},
		// The replicaset controller's SuccessfulCreate stamps the Pod's creation.
		rollout:       func(r *rollouts, d Delta) { r.handleReplicaSet(&d, d.Object.(*appsv1.ReplicaSet)) },
		events:        func(c *Correlator, e *event) bool { return c.handleCreatedEvent(e) },
		rolloutEvents: func(r *rollouts, e *event) bool { return r.handleRejection(e) }, // FailedCreate
		snapshot:      snapshotReplicaSets, verbs: readVerbs,
	},
	{
		resource: ResourceDeployments, stream: StreamDeployments, kind: "Deployment",
		gvr:       appsv1.SchemeGroupVersion.WithResource("deployments"),
		newObject: func() runtime.Object { return &appsv1.Deployment{} },
		newList:   func() runtime.Object { return &appsv1.DeploymentList{} },
		listWatch: namespaced(func(c kubernetes.Interface, ns string) lister[*appsv1.DeploymentList] {
			return c.AppsV1().Deployments(ns)
		}),
		transform: func(o runtime.Object) {
			d := o.(*appsv1.Deployment)
			slimWorkload(d, &d.Spec.Template, &d.ObjectMeta)
		},
		keepsIdentity: true, workload: true, audit: workloadWrites,
		handle: func(c *Correlator, d Delta) {
			o := d.Object.(*appsv1.Deployment)
			c.handleDeployment(&d, o)
		},
		rollout:       func(r *rollouts, d Delta) { r.handleWorkload(&d, deploymentView(d.Object.(*appsv1.Deployment))) },
		events:        func(c *Correlator, e *event) bool { return c.handleDeploymentEvent(e) },
		rolloutEvents: func(r *rollouts, e *event) bool { return r.handleEvent(e) },
		snapshot:      snapshotWorkloads, verbs: readVerbs,
		explain: []string{"deployment", "deployments", "deploy"},
		get: func(ctx context.Context, c kubernetes.Interface, ns, name string) (metav1.Object, error) {
			return c.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		},
		rollouts: true,
	},
	{
		// The Events the watch reads: every recorder's, through the core API.
		resource: ResourceEvents, stream: StreamEventsCore, kind: "Event",
		gvr:       corev1.SchemeGroupVersion.WithResource("events"),
		newObject: func() runtime.Object { return &corev1.Event{} },
		newList:   func() runtime.Object { return &corev1.EventList{} },
		listWatch: namespaced(func(c kubernetes.Interface, ns string) lister[*corev1.EventList] {
			return c.CoreV1().Events(ns)
		}),
		shardAfterOthers: true,
		handle: func(c *Correlator, d Delta) {
			// Each Event arrives through both Events APIs: the second view is dropped before
			// it is converted.
			o := d.Object.(*corev1.Event)
			if seen, fresh := c.eventVersion(&d, o.UID, o.ResourceVersion); fresh {
				c.handleEvent(&d, fromCoreEvent(o, d.watchTime()), seen)
			}
		},
		snapshot: snapshotEvents, verbs: readVerbs,
	},
	{
		// The same Events through events.k8s.io/v1, as recordings may hold them. Not watched:
		// one view is enough.
		resource: ResourceEvents, stream: StreamEventsV1, kind: "Event",
		gvr:              eventsv1.SchemeGroupVersion.WithResource("events"),
		newObject:        func() runtime.Object { return &eventsv1.Event{} },
		newList:          func() runtime.Object { return &eventsv1.EventList{} },
		shardAfterOthers: true,
		handle: func(c *Correlator, d Delta) {
			o := d.Object.(*eventsv1.Event)
			if seen, fresh := c.eventVersion(&d, o.UID, o.ResourceVersion); fresh {
				c.handleEvent(&d, fromEventsV1(o, d.watchTime()), seen)
			}
		},
		snapshot: snapshotEvents, verbs: readVerbs,
	},
	{
		resource: ResourceEndpointSlices, stream: StreamEndpointSlices, kind: "EndpointSlice",
		gvr:       discoveryv1.SchemeGroupVersion.WithResource("endpointslices"),
		newObject: func() runtime.Object { return &discoveryv1.EndpointSlice{} },
		newList:   func() runtime.Object { return &discoveryv1.EndpointSliceList{} },
		listWatch: namespaced(func(c kubernetes.Interface, ns string) lister[*discoveryv1.EndpointSliceList] {
			return c.DiscoveryV1().EndpointSlices(ns)
		}),
		transform: func(o runtime.Object) {
			es := o.(*discoveryv1.EndpointSlice)
			es.Annotations = nil
			for i := range es.Endpoints {
				es.Endpoints[i].Hints, es.Endpoints[i].DeprecatedTopology = nil, nil
			}
		},
		keepsIdentity: true,
		handle:        func(c *Correlator, d Delta) { c.handleSlice(&d, d.Object.(*discoveryv1.EndpointSlice)) },
		snapshot:      snapshotEndpointSlices, verbs: readVerbs,
	},
	{
		resource: ResourceServices, stream: StreamServices, kind: "Service",
		gvr:       corev1.SchemeGroupVersion.WithResource("services"),
		newObject: func() runtime.Object { return &corev1.Service{} },
		newList:   func() runtime.Object { return &corev1.ServiceList{} },
		listWatch: namespaced(func(c kubernetes.Interface, ns string) lister[*corev1.ServiceList] {
			return c.CoreV1().Services(ns)
		}),
		keepsIdentity: true,
		handle:        func(c *Correlator, d Delta) { c.handleService(&d, d.Object.(*corev1.Service)) },
		snapshot:      snapshotServices, verbs: readVerbs,
	},
	{
		// The claims a Pod's volumes name: when each was bound (claims.go).
		resource: ResourceClaims, stream: StreamClaims, kind: "PersistentVolumeClaim",
		gvr:       corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"),
		newObject: func() runtime.Object { return &corev1.PersistentVolumeClaim{} },
		newList:   func() runtime.Object { return &corev1.PersistentVolumeClaimList{} },
		listWatch: namespaced(func(c kubernetes.Interface, ns string) lister[*corev1.PersistentVolumeClaimList] {
			return c.CoreV1().PersistentVolumeClaims(ns)
		}),
		transform:     func(o runtime.Object) { slimClaim(o.(*corev1.PersistentVolumeClaim)) },
		keepsIdentity: true,
		handle:        func(c *Correlator, d Delta) { c.handleClaim(&d, d.Object.(*corev1.PersistentVolumeClaim)) },
		// The PV controller's and the scheduler's events about a claim (WaitForFirstConsumer,
		// ProvisioningSucceeded…) state nothing the claim's own changes do not.
		events:   func(*Correlator, *event) bool { return true },
		snapshot: snapshotServices, verbs: readVerbs,
	},
	{
		resource: ResourceStatefulSets, stream: StreamStatefulSets, kind: "StatefulSet",
		gvr:       appsv1.SchemeGroupVersion.WithResource("statefulsets"),
		newObject: func() runtime.Object { return &appsv1.StatefulSet{} },
		newList:   func() runtime.Object { return &appsv1.StatefulSetList{} },
		listWatch: namespaced(func(c kubernetes.Interface, ns string) lister[*appsv1.StatefulSetList] {
			return c.AppsV1().StatefulSets(ns)
		}),
		transform: func(o runtime.Object) {
			st := o.(*appsv1.StatefulSet)
			slimWorkload(st, &st.Spec.Template, &st.ObjectMeta)
			st.Spec.VolumeClaimTemplates = nil
		},
		keepsIdentity: true, workload: true, audit: workloadWrites,
		handle:  func(c *Correlator, d Delta) { c.handleStatefulSet(&d, d.Object.(*appsv1.StatefulSet)) },
		rollout: func(r *rollouts, d Delta) { r.handleWorkload(&d, statefulSetView(d.Object.(*appsv1.StatefulSet))) },
		// "Create Pod web-0 in StatefulSet web successful" stamps the Pod's creation.
		events:        func(c *Correlator, e *event) bool { return c.handleCreatedEvent(e) },
		rolloutEvents: func(r *rollouts, e *event) bool { return r.handleEvent(e) },
		root: func(c *Correlator, owner *metav1.OwnerReference, obs *phases.Pod, pod *corev1.Pod) {
			c.statefulSetRoot(owner, obs, pod)
		},
		snapshot: snapshotWorkloads, verbs: readVerbs,
		explain: []string{"statefulset", "statefulsets", "sts"},
		get: func(ctx context.Context, c kubernetes.Interface, ns, name string) (metav1.Object, error) {
			return c.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
		},
		rollouts: true,
	},
	{
		resource: ResourceDaemonSets, stream: StreamDaemonSets, kind: "DaemonSet",
		gvr:       appsv1.SchemeGroupVersion.WithResource("daemonsets"),
		newObject: func() runtime.Object { return &appsv1.DaemonSet{} },
		newList:   func() runtime.Object { return &appsv1.DaemonSetList{} },
		listWatch: namespaced(func(c kubernetes.Interface, ns string) lister[*appsv1.DaemonSetList] {
			return c.AppsV1().DaemonSets(ns)
		}),
		transform: func(o runtime.Object) {
			ds := o.(*appsv1.DaemonSet)
			slimWorkload(ds, &ds.Spec.Template, &ds.ObjectMeta)
		},
		keepsIdentity: true, workload: true, audit: workloadWrites,
		handle: func(c *Correlator, d Delta) {
			o := d.Object.(*appsv1.DaemonSet)
			c.handleWorkloadChange(&d, &o.ObjectMeta)
		},
		rollout: func(r *rollouts, d Delta) { r.handleWorkload(&d, daemonSetView(d.Object.(*appsv1.DaemonSet))) },
		// "Created pod: agent-x7k2p" stamps the Pod's creation.
		events:        func(c *Correlator, e *event) bool { return c.handleCreatedEvent(e) },
		rolloutEvents: func(r *rollouts, e *event) bool { return r.handleEvent(e) },
		root: func(c *Correlator, owner *metav1.OwnerReference, obs *phases.Pod, pod *corev1.Pod) {
			c.daemonSetRoot(owner, obs, pod)
		},
		snapshot: snapshotWorkloads, verbs: readVerbs,
		explain: []string{"daemonset", "daemonsets", "ds"},
		get: func(ctx context.Context, c kubernetes.Interface, ns, name string) (metav1.Object, error) {
			return c.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		},
		rollouts: true,
	},
	{
		resource: ResourceControllerRevisions, stream: StreamRevisions, kind: "ControllerRevision",
		gvr:       appsv1.SchemeGroupVersion.WithResource("controllerrevisions"),
		newObject: func() runtime.Object { return &appsv1.ControllerRevision{} },
		newList:   func() runtime.Object { return &appsv1.ControllerRevisionList{} },
		listWatch: namespaced(func(c kubernetes.Interface, ns string) lister[*appsv1.ControllerRevisionList] {
			return c.AppsV1().ControllerRevisions(ns)
		}),
		// The whole template again: rollouts need only the revision.
		transform: func(o runtime.Object) {
			cr := o.(*appsv1.ControllerRevision)
			cr.Annotations = nil
			cr.Data = runtime.RawExtension{}
		},
		keepsIdentity: true,
		rollout:       func(r *rollouts, d Delta) { r.handleRevision(&d, d.Object.(*appsv1.ControllerRevision)) },
		snapshot:      snapshotRevisions, verbs: readVerbs,
	},
	{
		// Jobs: a Job's Pods are rooted at its creation (jobs.go).
		resource: ResourceJobs, stream: StreamJobs, kind: "Job",
		gvr:       batchv1.SchemeGroupVersion.WithResource("jobs"),
		newObject: func() runtime.Object { return &batchv1.Job{} },
		newList:   func() runtime.Object { return &batchv1.JobList{} },
		listWatch: namespaced(func(c kubernetes.Interface, ns string) lister[*batchv1.JobList] {
			return c.BatchV1().Jobs(ns)
		}),
		// The view reads the Job's counts, status and schedule time, never its template.
		transform:     func(o runtime.Object) { slimJob(o.(*batchv1.Job)) },
		keepsIdentity: true, workload: true,
		audit:  &auditedWrites{verbs: []string{"create"}},
		handle: func(c *Correlator, d Delta) { c.handleJob(&d, d.Object.(*batchv1.Job)) },
		// The job controller's SuccessfulCreate is the replicaset controller's: "Created pod: NAME".
		events:        func(c *Correlator, e *event) bool { return c.handleCreatedEvent(e) },
		rolloutEvents: func(r *rollouts, e *event) bool { return r.handleRejection(e) }, // FailedCreate: counted
		root: func(c *Correlator, owner *metav1.OwnerReference, obs *phases.Pod, _ *corev1.Pod) {
			c.jobRoot(owner, obs)
		},
		snapshot: snapshotWorkloads, verbs: readVerbs,
		explain: []string{"job", "jobs"},
		get: func(ctx context.Context, c kubernetes.Interface, ns, name string) (metav1.Object, error) {
			return c.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		},
	},
	{
		// CronJobs: a CronJob's Pods are rooted at its schedule (cronjobs.go, jobs.go).
		resource: ResourceCronJobs, stream: StreamCronJobs, kind: "CronJob",
		gvr:       batchv1.SchemeGroupVersion.WithResource("cronjobs"),
		newObject: func() runtime.Object { return &batchv1.CronJob{} },
		newList:   func() runtime.Object { return &batchv1.CronJobList{} },
		listWatch: namespaced(func(c kubernetes.Interface, ns string) lister[*batchv1.CronJobList] {
			return c.BatchV1().CronJobs(ns)
		}),
		// Nothing reads the Job template.
		transform: func(o runtime.Object) {
			cj := o.(*batchv1.CronJob)
			cj.Annotations = nil
			cj.Spec.JobTemplate = batchv1.JobTemplateSpec{}
		},
		keepsIdentity: true, workload: true,
		handle:   func(c *Correlator, d Delta) { c.handleCronJob(&d, d.Object.(*batchv1.CronJob)) },
		events:   func(c *Correlator, e *event) bool { return c.handleCronJobEvent(e) },
		snapshot: snapshotWorkloads, verbs: readVerbs,
		explain: []string{"cronjob", "cronjobs", "cj"},
		get: func(ctx context.Context, c kubernetes.Interface, ns, name string) (metav1.Object, error) {
			return c.BatchV1().CronJobs(ns).Get(ctx, name, metav1.GetOptions{})
		},
	},
	{
		// Nodes: a Pod that waited for a node to be added waited for its creation and Ready
		// (nodes.go).
		resource: ResourceNodes, stream: StreamNodes, kind: "Node",
		gvr:       corev1.SchemeGroupVersion.WithResource("nodes"),
		newObject: func() runtime.Object { return &corev1.Node{} },
		newList:   func() runtime.Object { return &corev1.NodeList{} },
		listWatch: func(c kubernetes.Interface, _ string, _ WatchConfig) (listFunc, watchFunc) {
			x := c.CoreV1().Nodes()
			return listOf(x.List), x.Watch
		},
		transform:     func(o runtime.Object) { slimNode(o.(*corev1.Node)) },
		clusterScoped: true, keepsIdentity: true,
		handle:   func(c *Correlator, d Delta) { c.handleNode(&d, d.Object.(*corev1.Node)) },
		snapshot: snapshotNodes, verbs: readVerbs,
	},
}

// lister is what a typed client of one kind in one namespace offers to list and watch it.
type lister[L runtime.Object] interface {
	List(context.Context, metav1.ListOptions) (L, error)
	Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
}

// namespaced makes a kind's listWatch from its typed client: the whole kind, every label.
func namespaced[L runtime.Object](client func(kubernetes.Interface, string) lister[L]) func(kubernetes.Interface, string, WatchConfig) (listFunc, watchFunc) {
	return func(c kubernetes.Interface, ns string, _ WatchConfig) (listFunc, watchFunc) {
		x := client(c, ns)
		return listOf(x.List), x.Watch
	}
}

// The lookups the registry answers, built once from it.
var (
	kindByStream = map[Stream]*kind{}
	kindByType   = map[reflect.Type]*kind{}
	kindByRes    = map[Resource]*kind{} // the kind the watch reads of each Resource
	kindByGR     = map[schema.GroupResource]*kind{}
	kindByKind   = map[string]*kind{} // by the objects' Kind, as owner references and Events name them
	// snapshotOrder is the order a recording's streams are read in (snapshotRank).
	snapshotOrder []Stream
)

func init() {
	for _, k := range kinds {
		kindByStream[k.stream] = k
		kindByType[reflect.TypeOf(k.newObject())] = k
		kindByGR[k.gvr.GroupResource()] = k
		if _, ok := kindByKind[k.kind]; !ok {
			kindByKind[k.kind] = k
		}
		if _, ok := kindByRes[k.resource]; !ok || k.listWatch != nil {
			kindByRes[k.resource] = k
		}
	}
	fast.pod = kindByType[reflect.TypeOf(&corev1.Pod{})]
	fast.coreEvent = kindByType[reflect.TypeOf(&corev1.Event{})]
	fast.eventsV1Event = kindByType[reflect.TypeOf(&eventsv1.Event{})]
	fast.replicaSet = kindByType[reflect.TypeOf(&appsv1.ReplicaSet{})]
	fast.endpointSlice = kindByType[reflect.TypeOf(&discoveryv1.EndpointSlice{})]
	byRank := append([]*kind(nil), kinds...)
	sort.SliceStable(byRank, func(i, j int) bool { return byRank[i].snapshot < byRank[j].snapshot })
	for _, k := range byRank {
		snapshotOrder = append(snapshotOrder, k.stream)
	}
}

// kindOf returns the entry of a stream; a stream the registry does not know is an error,
// never taken for another.
func kindOf(s Stream) (*kind, error) {
	if k := kindByStream[s]; k != nil {
		return k, nil
	}
	return nil, fmt.Errorf("unknown stream %s (streams: %s)", quoteStart([]byte(s)), streamNames())
}

// kindOfObject returns the entry of an object's type.
//
// It runs for every delta: the kinds the watch delivers are found by a type switch, which costs
// a few instructions, where the map of reflect.Type (an interface key, hashed and compared as
// one) cost about 5,000 per Pod in BenchmarkCorrelatorManyPods; the map answers for the rest.
// TestKindOfObject holds the two to the same answer for every entry.
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
		k = kindByType[reflect.TypeOf(obj)]
	}
	return k, k != nil
}

// fast holds the entries of the kinds that make most deltas (filled by init from kindByType).
var fast struct {
	pod, coreEvent, eventsV1Event, replicaSet, endpointSlice *kind
}

// stateOf returns what a kind's view keeps in a correlator, made with fresh on first use: a
// kind's state lives with its view, not in the Correlator's own fields.
func stateOf[T any](c *Correlator, r Resource, fresh func() T) T {
	if st, ok := c.kindState[r].(T); ok {
		return st
	}
	if c.kindState == nil {
		c.kindState = map[Resource]any{}
	}
	st := fresh()
	c.kindState[r] = st
	return st
}

// keepsIdentity tells whether the Watcher keeps the identities of a resource's objects.
func keepsIdentity(r Resource) bool {
	k := kindByRes[r]
	return k != nil && k.keepsIdentity
}

// Explainable is a kind `readyspan explain` takes.
type Explainable struct {
	Kind  string   // the objects' Kind
	Names []string // what explain accepts for it, the first the one usage shows
	// Rollouts: readyspan traces the kind's rollouts (explain shows the latest).
	Rollouts bool
}

// ExplainKinds lists the kinds explain takes, in the registry's order.
func ExplainKinds() []Explainable {
	var out []Explainable
	for _, k := range kinds {
		if len(k.explain) > 0 {
			out = append(out, Explainable{Kind: k.kind, Names: k.explain, Rollouts: k.rollouts})
		}
	}
	return out
}

// RolloutKinds lists the workload kinds readyspan traces rollouts of, in the registry's order.
func RolloutKinds() []string {
	var out []string
	for _, k := range kinds {
		if k.rollouts {
			out = append(out, k.kind)
		}
	}
	return out
}

// GetObject reads one object of a kind explain takes; an error for a kind it does not.
func GetObject(ctx context.Context, c kubernetes.Interface, kind, ns, name string) (metav1.Object, error) {
	k := kindByKind[kind]
	if k == nil || k.get == nil {
		return nil, fmt.Errorf("explain takes no kind %s", kind)
	}
	return k.get(ctx, c, ns, name)
}
