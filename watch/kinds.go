package watch

import (
	"context"
	"fmt"
	"reflect"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// Kind is one resource readyspan reads, through one API: everything the watch, the recordings,
// the snapshots, the audit log and the RBAC check need to know of it. The layer that reads the
// objects declares its kinds (a Registry) and hands them to this package: the Watcher's
// reflectors, the recording's streams and their order and the audit log's relevant writes are
// derived from them, never listed here.
//
// There is one Kind per group/version/resource, as there is one RBAC rule and one recording
// file per GVR: the Events of core/v1 and of events.k8s.io/v1 are two Kinds of one Resource.
type Kind struct {
	Resource Resource
	Stream   Stream
	GVR      schema.GroupVersionResource
	Kind     string // the objects' Kind, as a List names its items (<Kind>List)

	// NewObject and NewList are empty ones of the kind, to decode into and to watch with.
	NewObject func() runtime.Object
	NewList   func() runtime.Object

	// ListWatch gives the calls that list and watch the kind in a namespace (all of them for
	// metav1.NamespaceAll); nil for a stream only recordings hold, not watched live.
	ListWatch func(c kubernetes.Interface, ns string, cfg Config) (ListFunc, WatchFunc)

	// JSONOnly: the kind has no protobuf encoding (a custom resource: the apiserver serves
	// CRDs in JSON only, and client-go's dynamic and metadata clients read nothing else), so it
	// is listed and watched in JSON whatever --watch-encoding asks; every other kind is read in
	// protobuf unless JSON is asked for (encoding.go).
	JSONOnly bool

	// Optional: the kind is a custom resource that a cluster may not serve (its CRD not
	// installed). The Watcher watches it only when discovery lists it at start, and says in
	// its log when it does not; a CRD installed later is read after a restart.
	Optional bool

	// Transform drops what nothing reads of the kind's objects before anything keeps them,
	// after the Registry's Transform has slimmed their managedFields; nil drops every
	// annotation. Update it before reading new fields.
	Transform func(obj runtime.Object)

	// ClusterScoped: the kind's objects belong to no namespace (Nodes). It is watched once, and
	// only when readyspan watches every namespace: a namespaced install's RoleBindings cannot
	// grant it, and the traces then go without what it tells.
	ClusterScoped bool

	// KeepsIdentity: the Watcher keeps each object's identity (LastSeen) so that a relist can
	// say which were deleted while the watch was down. Not for Events: processEvent says why.
	KeepsIdentity bool
	// Identity copies onto what lastSeen keeps (the object's metadata) whatever more a
	// deletion found by a relist needs of the kind; nil for the metadata alone.
	Identity func(from, kept runtime.Object)

	// Workload: the kind's objects are workloads of their own (their Pods' controllers, or
	// those of the ReplicaSets that make them). When replicas split the cluster, each goes to
	// the shard its key names (namespace/Kind/name), with its Pods and the Events about it.
	Workload bool
	// TemplateHashLabel: the workload's controller makes a ReplicaSet per Pod template, named
	// after the workload with the template's hash, and puts the hash in this label of the
	// ReplicaSet and its Pods ("pod-template-hash" for a Deployment): a Pod's workload is
	// known from the Pod alone (sharding, the metrics' workload label).
	TemplateHashLabel string

	// ShardAfterOthers: the shard filter sorts the kind's objects by objects of other kinds
	// (an Event by what it is about), so a shard starts its reflectors once the others'
	// initial lists are in.
	ShardAfterOthers bool

	// Audit are the client writes of the kind's objects that the audit log is read for (the
	// request that starts a Pod's chain); nil for none.
	Audit *AuditedWrites

	// Snapshot is the kind's place when a recording's List snapshots are fed in.
	Snapshot SnapshotRank

	// Verbs are what readyspan needs granted on the resource (deploy/kubernetes/base/
	// clusterrole.yaml): list and watch for the watch, get for explain.
	Verbs []string

	// Explain are the names `readyspan explain NAME/OBJECT` accepts for the kind (kubectl's
	// name, plural and short names), the first the one usage shows; nil for a kind explain does
	// not take. Get reads one object of it, for explain.
	Explain []string
	Get     func(ctx context.Context, c kubernetes.Interface, ns, name string) (metav1.Object, error)

	// Rollouts: readyspan traces the kind's rollouts.
	Rollouts bool

	// index is the Kind's place in its Registry, for tables kept beside it (Index).
	index int
}

// Index is the Kind's place in the Registry it was registered in: what a reader of the kinds
// indexes its own table of them by, without a map lookup per delta.
func (k *Kind) Index() int { return k.index }

// AuditedWrites are the writes of a kind the audit log is read for: requests with one of the
// verbs, on the object itself or one of the subresources.
type AuditedWrites struct {
	Verbs        []string
	Subresources []string
}

// SnapshotRank orders a recording's List snapshots: owners before what they own and Services
// before Pods, so that a Pod is correlated with what made and selects it; Events before Pods,
// so that a Pod completed by its snapshot already has them. Kinds of one rank keep the order
// of the registry.
type SnapshotRank int

const (
	SnapshotWorkloads   SnapshotRank = iota // Deployments, StatefulSets, DaemonSets, Jobs
	SnapshotRevisions                       // a StatefulSet's or DaemonSet's revisions
	SnapshotReplicaSets                     // a Deployment's
	SnapshotServices
	SnapshotEvents
	SnapshotEndpointSlices
	SnapshotNodes // before the Pods bound to them
	SnapshotPods
)

// ReadVerbs is what every kind needs: readyspan only ever reads.
var ReadVerbs = []string{"get", "list", "watch"}

// Registry is the kinds readyspan reads, in the order the Watcher starts its reflectors, with
// the lookups built once from them.
type Registry struct {
	kinds    []*Kind
	byStream map[Stream]*Kind
	byType   map[reflect.Type]*Kind
	byRes    map[Resource]*Kind // the kind the watch reads of each Resource
	byGR     map[schema.GroupResource]*Kind
	byKind   map[string]*Kind // by the objects' Kind, as owner references and Events name them
	// snapshotOrder is the order a recording's streams are read in (SnapshotRank).
	snapshotOrder []Stream
}

// NewRegistry registers the kinds, in the order given; a Kind belongs to one Registry.
func NewRegistry(kinds ...*Kind) *Registry {
	r := &Registry{kinds: kinds, byStream: map[Stream]*Kind{}, byType: map[reflect.Type]*Kind{},
		byRes: map[Resource]*Kind{}, byGR: map[schema.GroupResource]*Kind{}, byKind: map[string]*Kind{}}
	for i, k := range kinds {
		k.index = i
		r.byStream[k.Stream] = k
		r.byType[reflect.TypeOf(k.NewObject())] = k
		r.byGR[k.GVR.GroupResource()] = k
		if _, ok := r.byKind[k.Kind]; !ok {
			r.byKind[k.Kind] = k
		}
		if _, ok := r.byRes[k.Resource]; !ok || k.ListWatch != nil {
			r.byRes[k.Resource] = k
		}
	}
	byRank := append([]*Kind(nil), kinds...)
	sort.SliceStable(byRank, func(i, j int) bool { return byRank[i].Snapshot < byRank[j].Snapshot })
	for _, k := range byRank {
		r.snapshotOrder = append(r.snapshotOrder, k.Stream)
	}
	return r
}

// Kinds lists the registered kinds in their order.
func (r *Registry) Kinds() []*Kind { return r.kinds }

// Of returns the Kind of a stream; a stream the registry does not know is an error, never
// taken for another.
func (r *Registry) Of(s Stream) (*Kind, error) {
	if k := r.byStream[s]; k != nil {
		return k, nil
	}
	return nil, fmt.Errorf("unknown stream %s (streams: %s)", quoteStart([]byte(s)), r.streamNames())
}

// OfObject returns the Kind of an object's type.
func (r *Registry) OfObject(obj runtime.Object) (*Kind, bool) {
	k := r.byType[reflect.TypeOf(obj)]
	return k, k != nil
}

// Named returns the Kind whose objects are of the given Kind, as owner references and Events
// name them; nil for one the registry does not read.
func (r *Registry) Named(kind string) *Kind { return r.byKind[kind] }

// OfResource returns the Kind the watch reads of a Resource; nil for none.
func (r *Registry) OfResource(res Resource) *Kind { return r.byRes[res] }

// OfGroupResource returns the Kind of a group and resource, as the audit log names them; nil
// for none.
func (r *Registry) OfGroupResource(gr schema.GroupResource) *Kind { return r.byGR[gr] }

// KeepsIdentity tells whether the Watcher keeps the identities of a resource's objects.
func (r *Registry) KeepsIdentity(res Resource) bool {
	k := r.byRes[res]
	return k != nil && k.KeepsIdentity
}

// SnapshotOrder is the order a recording's streams are read in.
func (r *Registry) SnapshotOrder() []Stream { return r.snapshotOrder }

// Explainable is a kind `readyspan explain` takes.
type Explainable struct {
	Kind  string   // the objects' Kind
	Names []string // what explain accepts for it, the first the one usage shows
	// Rollouts: readyspan traces the kind's rollouts (explain shows the latest).
	Rollouts bool
}

// ExplainKinds lists the kinds explain takes, in the registry's order.
func (r *Registry) ExplainKinds() []Explainable {
	var out []Explainable
	for _, k := range r.kinds {
		if len(k.Explain) > 0 {
			out = append(out, Explainable{Kind: k.Kind, Names: k.Explain, Rollouts: k.Rollouts})
		}
	}
	return out
}

// RolloutKinds lists the workload kinds readyspan traces rollouts of, in the registry's order.
func (r *Registry) RolloutKinds() []string {
	var out []string
	for _, k := range r.kinds {
		if k.Rollouts {
			out = append(out, k.Kind)
		}
	}
	return out
}

// GetObject reads one object of a kind explain takes; an error for a kind it does not.
func (r *Registry) GetObject(ctx context.Context, c kubernetes.Interface, kind, ns, name string) (metav1.Object, error) {
	k := r.byKind[kind]
	if k == nil || k.Get == nil {
		return nil, fmt.Errorf("explain takes no kind %s", kind)
	}
	return k.Get(ctx, c, ns, name)
}

// ListFunc and WatchFunc are a kind's calls to list and watch it.
type (
	ListFunc  = func(context.Context, metav1.ListOptions) (runtime.Object, error)
	WatchFunc = func(context.Context, metav1.ListOptions) (apiwatch.Interface, error)
)

// Lister is what a typed client of one kind in one namespace offers to list and watch it.
type Lister[L runtime.Object] interface {
	List(context.Context, metav1.ListOptions) (L, error)
	Watch(context.Context, metav1.ListOptions) (apiwatch.Interface, error)
}

// Namespaced makes a kind's ListWatch from its typed client: the whole kind, every label.
func Namespaced[L runtime.Object](client func(kubernetes.Interface, string) Lister[L]) func(kubernetes.Interface, string, Config) (ListFunc, WatchFunc) {
	return func(c kubernetes.Interface, ns string, _ Config) (ListFunc, WatchFunc) {
		x := client(c, ns)
		return ListOf(x.List), x.Watch
	}
}

// ListOf adapts a typed client's List to a ListerWatcher's.
func ListOf[L runtime.Object](list func(context.Context, metav1.ListOptions) (L, error)) ListFunc {
	return func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return list(ctx, o)
	}
}
