package watch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/readyspan/readyspan/shard"
)

// Config selects what the Watcher watches.
type Config struct {
	// Namespaces to watch; empty means all.
	Namespaces []string
	// Selector is a label selector for Pods (other kinds are needed whole, to correlate).
	Selector string
	// QueueSize is the buffer between informer handlers and the correlator loop.
	QueueSize int
	// Shard is this replica's part of the cluster when several split it; zero for all of it.
	Shard shard.Shard
	// Encoding is what the Watcher's client asks for ("" is DefaultEncoding; the client is made
	// for it, by NewClients). Kinds that have no protobuf encoding (kind.jsonOnly) are read
	// through JSONClient instead; nil reads them through the Watcher's client, which accepts
	// JSON too.
	Encoding   Encoding
	JSONClient kubernetes.Interface
}

// Errors receives list/watch failures and restarts (for self metrics).
type Errors interface {
	// WatchError counts a failed list or watch: reason forbidden, expired or other.
	WatchError(resource, reason string)
	// WatchRestart counts a list or watch started again after the first: reason watch_closed
	// when a new watch resumes where a closed one stopped, relist when everything is listed
	// again (the resourceVersion expired, 410 Gone, or listing and watching failed).
	WatchRestart(resource, reason string)
}

// Watcher runs one reflector per resource and turns what it lists and watches into Deltas
// stamped with their receive time. It caches no object: the correlator keeps what it reads of
// each, and the Watcher only each object's identity (LastSeen), which a relist needs to say
// what was deleted while the watch was down. Handlers only stamp and enqueue; the correlator
// loop does the work.
type Watcher struct {
	kinds *Registry
	// transform is what the informers' queues apply: the registry's Transform, swapped only by
	// tests that count how often each object goes through it.
	transform cache.TransformFunc
	watched   []reflected // one per resource and namespace
	out       chan Delta
	errs      Errors
	log       *slog.Logger
	shard     *shard.Filter // nil: everything is this replica's

	mu          sync.Mutex
	forbidden   map[string]string   // resource → message, while a list/watch is forbidden
	failing     map[Resource]outage // lists and watches failing otherwise, until one works
	unreachable outage              // the apiserver not answering FollowReachability
	isSynced    bool
}

// NewWatcher sets up a reflector for every kind of the registry that is watched live.
func NewWatcher(client kubernetes.Interface, kinds *Registry, cfg Config, errs Errors, log *slog.Logger) *Watcher {
	if kinds == nil {
		panic("watch: NewWatcher needs the Registry of the kinds to read")
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = 16384
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var workloads []shard.Workload
	for _, k := range kinds.kinds {
		if k.Workload {
			workloads = append(workloads, shard.Workload{Kind: k.Kind, TemplateHashLabel: k.TemplateHashLabel})
		}
	}
	w := &Watcher{kinds: kinds, transform: kinds.Transform, out: make(chan Delta, cfg.QueueSize), errs: errs, log: log, shard: shard.NewFilter(cfg.Shard, workloads...),
		forbidden: map[string]string{}, failing: map[Resource]outage{}}
	namespaces := cfg.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	unserved := w.unserved(client, kinds.kinds)
	for i, ns := range namespaces {
		for _, k := range kinds.kinds {
			if k.ListWatch == nil {
				continue // read from recordings only
			}
			if k.ClusterScoped && (i > 0 || ns != metav1.NamespaceAll) {
				continue // once, and only cluster-wide (kind.clusterScoped)
			}
			if unserved[k] {
				continue
			}
			c := cfg.clientFor(k, client)
			list, watchFn := k.ListWatch(c, ns, cfg)
			w.add(c, k, list, watchFn)
		}
	}
	return w
}

// unserved are the registry's Optional kinds the apiserver does not serve, asked of discovery
// once (not once per namespace), each answer logged.
func (w *Watcher) unserved(client kubernetes.Interface, kinds []*Kind) map[*Kind]bool {
	out := map[*Kind]bool{}
	for _, k := range kinds {
		if !k.Optional || k.ListWatch == nil {
			continue
		}
		ok, err := served(client, k.GVR)
		res := k.GVR.GroupResource().String()
		switch {
		case err != nil:
			w.log.Warn("not watching an optional resource: discovery failed", "resource", res, "err", err)
		case !ok:
			w.log.Info("not watching an optional resource: the API does not serve it (its CRD is not installed)", "resource", res)
		default:
			w.log.Info("watching an optional resource", "resource", res)
		}
		out[k] = !ok
	}
	return out
}

func (w *Watcher) add(client kubernetes.Interface, k *Kind, list ListFunc, watchFn WatchFunc) {
	r, obj := k.Resource, k.NewObject()
	lw := (&restarts{resource: r, errs: w.errs, works: func() { w.watchWorks(r) }}).listWatch(list, watchFn)
	known := cache.NewStore(cache.DeletionHandlingMetaNamespaceKeyFunc)
	fifo := cache.NewRealFIFOWithOptions(cache.RealFIFOOptions{
		Name:         "readyspan " + string(r),
		KeyFunction:  cache.MetaNamespaceKeyFunc,
		KnownObjects: known,
		Transformer:  func(o any) (any, error) { return w.transform(o) },
	})
	ctrl := cache.New(&cache.Config{
		Queue:             fifo,
		ListerWatcher:     cache.ToListWatcherWithWatchListSemantics(lw, client), // the client says whether it can stream the initial list
		ObjectType:        obj,
		ObjectDescription: string(r),
		Process: func(popped any, initial bool) error {
			deltas, ok := popped.(cache.Deltas)
			if !ok {
				return fmt.Errorf("%s: the queue gave %T, not Deltas", r, popped)
			}
			return w.process(k, known, deltas, initial)
		},
		WatchErrorHandlerWithContext: func(ctx context.Context, _ *cache.Reflector, err error) {
			w.watchError(r, err)
		},
	})
	w.watched = append(w.watched, reflected{resource: r, kind: k, example: obj, ctrl: ctrl, known: known})
}

// reflected is one resource's reflector in one namespace.
type reflected struct {
	resource Resource
	kind     *Kind
	example  runtime.Object // an object of the kind it lists and watches
	ctrl     cache.Controller
	known    cache.Store // the identities kept (LastSeen), by key
}

// process does what an informer does with what its queue pops (client-go's processDeltas),
// keeping only each object's identity: a change to an object known by key is Modified (a
// relist's unchanged resourceVersion is no change), an unknown one Added, a deletion Deleted.
func (w *Watcher) process(k *Kind, known cache.Store, deltas cache.Deltas, initial bool) error {
	r := k.Resource
	for _, d := range deltas {
		switch d.Type {
		case cache.Sync, cache.Replaced, cache.Added, cache.Updated:
			obj, ok := d.Object.(runtime.Object)
			if !ok {
				return fmt.Errorf("%s: not an API object: %T", r, d.Object)
			}
			if !k.KeepsIdentity {
				w.processEvent(k, obj, d.Type, initial)
				continue
			}
			old, exists, err := known.Get(obj)
			if err != nil {
				return err
			}
			obj, ok = w.admit(k, obj, exists)
			if !ok {
				continue // another shard's
			}
			if !exists {
				if err := known.Add(w.kinds.LastSeen(obj)); err != nil {
					return err
				}
				w.emit(Delta{Resource: r, Type: Added, Object: obj, Initial: initial})
				continue
			}
			o, n := old.(metav1.Object), obj.(metav1.Object)
			unchanged := n.GetResourceVersion() != "" && n.GetResourceVersion() == o.GetResourceVersion()
			prev, _ := old.(runtime.Object)
			if kept := w.kinds.lastSeen(obj, prev); kept != prev { // else written over in place
				if err := known.Update(kept); err != nil {
					return err
				}
			}
			if unchanged {
				continue // a relist's unchanged object, not a change
			}
			w.emit(Delta{Resource: r, Type: Modified, Object: obj})
		case cache.Deleted:
			_, exists, err := known.Get(d.Object)
			if err != nil {
				return err
			}
			if err := known.Delete(d.Object); err != nil {
				return err
			}
			obj, unknown := d.Object, false
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj, unknown = t.Obj, true
			}
			ro, ok := obj.(runtime.Object)
			if !ok {
				return fmt.Errorf("%s: deleted object is not an API object: %T", r, obj)
			}
			if !w.shard.Deleted(ro, exists) {
				continue // another shard's
			}
			w.emit(Delta{Resource: r, Type: Deleted, Object: ro, FinalStateUnknown: unknown})
		}
	}
	return nil
}

// admit asks the shard filter whether an object added or changed is this replica's: a
// workload by its own key, any other kind as the filter knows it.
func (w *Watcher) admit(k *Kind, obj runtime.Object, known bool) (runtime.Object, bool) {
	if m, ok := obj.(metav1.Object); ok && k.Workload {
		return obj, w.shard.AdmitWorkload(m, k.Kind, known)
	}
	return w.shard.Admit(obj, known)
}

// processEvent hands on an Event without keeping anything of it. An Event is read once, when
// it arrives; its deletion (the apiserver expires Events after an hour) changes no trace, so a
// relist need not find which ones went. Keeping their identities cost an hour of Events'
// worth of memory: at 25 startups/s, about 540,000 of them. The queue's own delta type says
// Added or Modified; a relist hands on every Event again, as Added, and the correlator drops
// the versions it has read (by UID and resourceVersion).
func (w *Watcher) processEvent(k *Kind, obj runtime.Object, typ cache.DeltaType, initial bool) {
	obj, ok := w.shard.Admit(obj, false)
	if !ok {
		return // another shard's
	}
	if typ == cache.Updated {
		w.emit(Delta{Resource: k.Resource, Type: Modified, Object: obj})
		return
	}
	w.emit(Delta{Resource: k.Resource, Type: Added, Object: obj, Initial: initial})
}

// LastSeen is what the Watcher keeps of an object once it is handed on: its identity, owners,
// node and deletion marks, so that a deletion a relist finds (client-go's "final state
// unknown") still names the Pod, its owner and its node. The correlator keeps the last state
// of every Pod it traces itself; a whole copy here would be a second cache (about 5 KB per Pod).
func (r *Registry) LastSeen(obj runtime.Object) runtime.Object { return r.lastSeen(obj, nil) }

// lastSeen is LastSeen written over prev, the identity kept of the same object before, when
// there is one of the kind's type: every change of every Pod would otherwise allocate a whole
// new Pod to hold a few fields. prev holds nothing but what lastSeen wrote (the metadata and
// the kind's Identity), so writing them again leaves no stale field. Only the Watcher's
// process, one goroutine per reflector, writes its identities; the relist that hands one out
// in a deletion it found queues that deletion before any later change of the key, and the
// deletion takes it out of the store, so no identity handed on is written again.
func (r *Registry) lastSeen(obj, prev runtime.Object) runtime.Object {
	m, err := meta.Accessor(obj)
	if err != nil {
		return obj
	}
	id := metav1.ObjectMeta{
		Name: m.GetName(), Namespace: m.GetNamespace(), UID: m.GetUID(), ResourceVersion: m.GetResourceVersion(),
		Generation: m.GetGeneration(), CreationTimestamp: m.GetCreationTimestamp(), DeletionTimestamp: m.GetDeletionTimestamp(),
		DeletionGracePeriodSeconds: m.GetDeletionGracePeriodSeconds(), OwnerReferences: m.GetOwnerReferences(),
	}
	k, ok := r.OfObject(obj)
	if !ok {
		return obj
	}
	kept := prev
	if kept == nil || kept == obj || reflect.TypeOf(kept) != reflect.TypeOf(obj) {
		kept = k.NewObject()
	}
	*kept.(metav1.ObjectMetaAccessor).GetObjectMeta().(*metav1.ObjectMeta) = id
	if k.Identity != nil {
		k.Identity(obj, kept)
	}
	return kept
}

// restarts tells, from the list and watch requests one informer's reflector makes, when its
// watch started again: a list after one that completed is a relist (the reflector lists again
// after a 410 Gone, or after listing and watching failed); a watch after one that was open, with
// no list in between, resumes where a closed watch stopped. The next page of a list is not a new
// list, a streaming list (a watch sending the initial objects) counts as complete once it opens
// and goes on as the watch, and retries of a failed request are not counted again.
type restarts struct {
	resource Resource
	errs     Errors
	works    func() // a list completed or a watch opened

	mu        sync.Mutex
	hasListed bool // a list completed since the last one began
	watchOpen bool // a watch opened since the last list or watch began
}

// listWatch wraps a resource's list and watch calls, following them.
func (rs *restarts) listWatch(list ListFunc, watchFn WatchFunc) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			rs.listing() // the next page of a list finds it not complete yet
			out, err := list(ctx, o)
			if err == nil {
				if l, lerr := meta.ListAccessor(out); lerr == nil && l.GetContinue() == "" { // the last page
					rs.listed(false)
				}
			}
			return out, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (apiwatch.Interface, error) {
			// A watch that sends the initial objects first is client-go's streaming list.
			if o.SendInitialEvents != nil && *o.SendInitialEvents {
				rs.listing()
				out, err := watchFn(ctx, o)
				if err == nil {
					rs.listed(true)
				}
				return out, err
			}
			rs.watching()
			out, err := watchFn(ctx, o)
			if err == nil {
				rs.watched()
			}
			return out, err
		},
	}
}

func (rs *restarts) listing() {
	rs.mu.Lock()
	relist := rs.hasListed
	rs.hasListed, rs.watchOpen = false, false
	rs.mu.Unlock()
	if relist && rs.errs != nil {
		rs.errs.WatchRestart(string(rs.resource), "relist")
	}
}

// listed records a complete list; a streaming list goes on as the watch.
func (rs *restarts) listed(streaming bool) {
	rs.mu.Lock()
	rs.hasListed, rs.watchOpen = true, streaming
	rs.mu.Unlock()
	if rs.works != nil {
		rs.works()
	}
}

func (rs *restarts) watching() {
	rs.mu.Lock()
	again := rs.watchOpen
	rs.watchOpen = false
	rs.mu.Unlock()
	if again && rs.errs != nil {
		rs.errs.WatchRestart(string(rs.resource), "watch_closed")
	}
}

func (rs *restarts) watched() {
	rs.mu.Lock()
	rs.watchOpen = true
	rs.mu.Unlock()
	if rs.works != nil {
		rs.works()
	}
}

// emit stamps a delta with its receive time and queues it for the correlator.
func (w *Watcher) emit(d Delta) {
	d.Recv = time.Now()
	w.out <- d
}

// watchErrorReason is a failed list's or watch's reason label: forbidden, expired or other; ""
// for none, when the watch was stopped.
func watchErrorReason(err error) string {
	switch {
	case apierrors.IsForbidden(err):
		return "forbidden"
	case apierrors.IsResourceExpired(err) || apierrors.IsGone(err):
		return "expired"
	case errors.Is(err, context.Canceled):
		return ""
	}
	return "other"
}

func (w *Watcher) watchError(r Resource, err error) {
	reason := watchErrorReason(err)
	if reason == "" {
		return
	}
	if w.errs != nil {
		w.errs.WatchError(string(r), reason)
	}
	if reason == "forbidden" {
		w.mu.Lock()
		_, already := w.forbidden[string(r)]
		w.forbidden[string(r)] = err.Error()
		w.mu.Unlock()
		if !already {
			// One clear line naming what is missing; the API's message says which verb on
			// which resource, in which group and scope.
			w.log.Error("Not allowed to watch "+string(r)+": grant list and watch on it (see deploy/kubernetes/base/clusterrole.yaml)", "err", err.Error())
		}
		return
	}
	if reason == "expired" {
		w.log.Info("Watch expired, relisting", "resource", r)
		return
	}
	w.watchFailed(r, err)
	w.log.Warn("Watch failed, retrying", "resource", r, "err", err)
}

// Sink is where other sources (the audit log) add their deltas to the same stream.
func (w *Watcher) Sink() chan<- Delta { return w.out }

// Deltas is the stream of observed changes.
func (w *Watcher) Deltas() <-chan Delta { return w.out }

// Start starts the reflectors; it returns at once.
//
// A shard starts the reflectors of kinds its filter sorts by others (Events, by the Pod or
// ReplicaSet they are about: shardAfterOthers) once the others have listed: it must have seen
// them first, or the initial list's Events about other shards' objects would pass.
func (w *Watcher) Start(ctx context.Context) {
	var events []cache.Controller
	var others []cache.InformerSynced
	for _, rf := range w.watched {
		if w.shard != nil && rf.kind.ShardAfterOthers {
			events = append(events, rf.ctrl)
			continue
		}
		others = append(others, rf.ctrl.HasSynced)
		go rf.ctrl.RunWithContext(ctx)
	}
	if len(events) == 0 {
		return
	}
	go func() {
		if !cache.WaitForCacheSync(ctx.Done(), others...) {
			return
		}
		for _, c := range events {
			go c.RunWithContext(ctx)
		}
	}()
}

// WaitForSync blocks until every cache has synced or ctx ends.
func (w *Watcher) WaitForSync(ctx context.Context) error {
	synced := make([]cache.InformerSynced, len(w.watched))
	for i, rf := range w.watched {
		synced[i] = rf.ctrl.HasSynced
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		if msg := w.Problem(); msg != "" {
			return errors.New(msg)
		}
		return fmt.Errorf("caches did not sync: %w", ctx.Err())
	}
	w.mu.Lock()
	w.isSynced = true
	w.mu.Unlock()
	return nil
}

// Problem returns why readyspan is not ready, or "": a forbidden resource, caches not synced
// yet, the apiserver not answering, or a resource's list and watch failing past the grace.
func (w *Watcher) Problem() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	for r, msg := range w.forbidden {
		return fmt.Sprintf("watching %s is forbidden: %s", r, msg)
	}
	if !w.isSynced {
		return "caches not synced yet"
	}
	return w.outageProblem(time.Now())
}

// Transform keeps only what the reader of the kinds reads, before objects enter the caches: no
// managedFields contents, and what each kind's Transform drops (no annotations where it has
// none). Update a kind's Transform before reading new fields.
func (r *Registry) Transform(obj any) (any, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return obj, nil
	}
	// In place: the object is the decoder's own, and a copy per change is garbage at once.
	mf := m.GetManagedFields()
	for i, f := range mf {
		mf[i] = metav1.ManagedFieldsEntry{Manager: f.Manager, Operation: f.Operation, Time: f.Time, Subresource: f.Subresource}
	}
	// Each kind drops what its registry entry says; what has no say keeps no annotation.
	if ro, _ := obj.(runtime.Object); ro != nil {
		if k, ok := r.OfObject(ro); ok && k.Transform != nil {
			k.Transform(ro)
			return obj, nil
		}
	}
	m.SetAnnotations(nil)
	return obj, nil
}
