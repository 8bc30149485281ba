package watch

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/readyspan/readyspan/phases"
)

// Webhooks are the admission webhooks the cluster declares: the names in its
// MutatingWebhookConfigurations and ValidatingWebhookConfigurations, listed and watched. The
// apiserver's spans name the webhook each call went to, but they arrive from whoever can reach
// the OTLP input; a name a configuration declares is one the cluster really calls, so what
// readyspan makes of webhook names (a metric's label values) is taken from here, never from the
// spans alone.
//
// They are not kinds of the registry (kinds.go): no trace is built from them, nothing records
// them, and readyspan is ready and traces without them. A refused list is logged once and
// leaves nothing declared until it is allowed.
type Webhooks struct {
	log  *slog.Logger
	errs Errors

	ctrls    []cache.Controller
	declared []atomic.Pointer[map[string]struct{}] // by index of webhookKinds; nil until listed

	mu      sync.Mutex
	refused map[Resource]bool // the kinds whose list or watch is forbidden now
}

// webhookKind is one kind of admission webhook configuration: everything the watch and the RBAC
// check need to know of it, as a Kind of a Registry says it (kinds.go).
type webhookKind struct {
	typ      string // the type the apiserver's span names: phases.WebhookMutating, phases.WebhookValidating
	resource Resource
	gvr      schema.GroupVersionResource
	kind     string

	newObject func() runtime.Object
	newList   func() runtime.Object
	listWatch func(c kubernetes.Interface) (ListFunc, WatchFunc)

	// names are the names of the webhooks a configuration declares.
	names func(obj runtime.Object) []string
	// slim keeps a configuration's identity and its webhooks' names: no CA bundle, rules or
	// selectors, and no annotations (kubectl's last-applied copy holds all of them again).
	slim func(obj runtime.Object)

	// verbs are what readyspan needs granted on the resource (deploy/kubernetes/base/
	// clusterrole.yaml): list and watch, nothing reads one by name.
	verbs []string
}

// WebhookReads are the resources the Webhooks read and the verbs each needs granted, for the
// check that holds the ClusterRole to what readyspan reads.
func WebhookReads() map[schema.GroupVersionResource][]string {
	out := map[schema.GroupVersionResource][]string{}
	for _, k := range webhookKinds {
		out[k.gvr] = k.verbs
	}
	return out
}

// webhookKinds are the configurations readyspan reads webhook names from.
var webhookKinds = []*webhookKind{
	{
		typ: phases.WebhookMutating, resource: "mutatingwebhookconfigurations", kind: "MutatingWebhookConfiguration",
		gvr:       admissionv1.SchemeGroupVersion.WithResource("mutatingwebhookconfigurations"),
		newObject: func() runtime.Object { return &admissionv1.MutatingWebhookConfiguration{} },
		newList:   func() runtime.Object { return &admissionv1.MutatingWebhookConfigurationList{} },
		listWatch: func(c kubernetes.Interface) (ListFunc, WatchFunc) {
			x := c.AdmissionregistrationV1().MutatingWebhookConfigurations()
			return ListOf(x.List), x.Watch
		},
		names: func(o runtime.Object) []string {
			var out []string
			for _, h := range o.(*admissionv1.MutatingWebhookConfiguration).Webhooks {
				out = append(out, h.Name)
			}
			return out
		},
		slim: func(o runtime.Object) {
			c := o.(*admissionv1.MutatingWebhookConfiguration)
			c.ObjectMeta = webhookConfigIdentity(c.ObjectMeta)
			for i, h := range c.Webhooks {
				c.Webhooks[i] = admissionv1.MutatingWebhook{Name: h.Name}
			}
		},
		verbs: []string{"list", "watch"},
	},
	{
		typ: phases.WebhookValidating, resource: "validatingwebhookconfigurations", kind: "ValidatingWebhookConfiguration",
		gvr:       admissionv1.SchemeGroupVersion.WithResource("validatingwebhookconfigurations"),
		newObject: func() runtime.Object { return &admissionv1.ValidatingWebhookConfiguration{} },
		newList:   func() runtime.Object { return &admissionv1.ValidatingWebhookConfigurationList{} },
		listWatch: func(c kubernetes.Interface) (ListFunc, WatchFunc) {
			x := c.AdmissionregistrationV1().ValidatingWebhookConfigurations()
			return ListOf(x.List), x.Watch
		},
		names: func(o runtime.Object) []string {
			var out []string
			for _, h := range o.(*admissionv1.ValidatingWebhookConfiguration).Webhooks {
				out = append(out, h.Name)
			}
			return out
		},
		slim: func(o runtime.Object) {
			c := o.(*admissionv1.ValidatingWebhookConfiguration)
			c.ObjectMeta = webhookConfigIdentity(c.ObjectMeta)
			for i, h := range c.Webhooks {
				c.Webhooks[i] = admissionv1.ValidatingWebhook{Name: h.Name}
			}
		},
		verbs: []string{"list", "watch"},
	},
}

// webhookConfigIdentity is what the store of configurations keys and compares them by.
func webhookConfigIdentity(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, UID: m.UID, ResourceVersion: m.ResourceVersion}
}

// NewWebhooks sets up the watch of the webhook configurations through client (both are
// cluster-scoped: one reflector each, whatever namespaces the Watcher watches); nothing talks to
// the cluster until Start. errs counts their list and watch failures and restarts as the
// Watcher's; nil for none.
func NewWebhooks(client kubernetes.Interface, errs Errors, log *slog.Logger) *Webhooks {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &Webhooks{log: log, errs: errs, declared: make([]atomic.Pointer[map[string]struct{}], len(webhookKinds)),
		refused: map[Resource]bool{}}
	for i, k := range webhookKinds {
		w.ctrls = append(w.ctrls, w.controller(client, i, k))
	}
	return w
}

// controller is one kind's reflector, as the Watcher makes them (Watcher.add), keeping the
// slimmed configurations in a store and publishing the names they declare after each change.
func (w *Webhooks) controller(client kubernetes.Interface, i int, k *webhookKind) cache.Controller {
	r := k.resource
	list, watchFn := k.listWatch(client)
	lw := (&restarts{resource: r, errs: w.errs, works: func() { w.works(r) }}).listWatch(list, watchFn)
	store := cache.NewStore(cache.DeletionHandlingMetaNamespaceKeyFunc)
	fifo := cache.NewRealFIFOWithOptions(cache.RealFIFOOptions{
		Name:         "readyspan " + string(r),
		KeyFunction:  cache.MetaNamespaceKeyFunc,
		KnownObjects: store,
		Transformer: func(o any) (any, error) {
			if obj, ok := o.(runtime.Object); ok {
				k.slim(obj)
			}
			return o, nil
		},
	})
	return cache.New(&cache.Config{
		Queue:             fifo,
		ListerWatcher:     cache.ToListWatcherWithWatchListSemantics(lw, client),
		ObjectType:        k.newObject(),
		ObjectDescription: string(r),
		Process: func(popped any, _ bool) error {
			deltas, ok := popped.(cache.Deltas)
			if !ok {
				return fmt.Errorf("%s: the queue gave %T, not Deltas", r, popped)
			}
			for _, d := range deltas {
				var err error
				if d.Type == cache.Deleted {
					err = store.Delete(d.Object)
				} else {
					err = store.Update(d.Object) // Update adds what is not there
				}
				if err != nil {
					return err
				}
			}
			w.publish(i, k, store)
			return nil
		},
		WatchErrorHandlerWithContext: func(_ context.Context, _ *cache.Reflector, err error) {
			w.watchError(r, err)
		},
	})
}

// publish replaces the names one kind declares with those of the configurations in store.
func (w *Webhooks) publish(i int, k *webhookKind, store cache.Store) {
	names := map[string]struct{}{}
	for _, o := range store.List() {
		if obj, ok := o.(runtime.Object); ok {
			for _, n := range k.names(obj) {
				names[n] = struct{}{}
			}
		}
	}
	w.declared[i].Store(&names)
}

// Start starts the reflectors; it returns at once. They stop with ctx.
func (w *Webhooks) Start(ctx context.Context) {
	for _, c := range w.ctrls {
		go c.RunWithContext(ctx)
	}
}

// HasSynced tells whether every kind has been listed once.
func (w *Webhooks) HasSynced() bool {
	for _, c := range w.ctrls {
		if !c.HasSynced() {
			return false
		}
	}
	return true
}

// Declared reports whether a configuration of the type (phases.WebhookMutating,
// phases.WebhookValidating) declares a webhook of that name now. Nothing is declared before a
// kind is listed, while its list is refused since readyspan started, or on a nil Webhooks.
func (w *Webhooks) Declared(typ, name string) bool {
	if w == nil {
		return false
	}
	for i, k := range webhookKinds {
		if k.typ != typ {
			continue
		}
		if names := w.declared[i].Load(); names != nil {
			if _, ok := (*names)[name]; ok {
				return true
			}
		}
	}
	return false
}

// watchError counts a failed list or watch and says what it means: a refusal once, in one line
// naming what to grant and what readyspan does meanwhile, since it repeats at every retry.
func (w *Webhooks) watchError(r Resource, err error) {
	reason := watchErrorReason(err)
	if reason == "" {
		return
	}
	if w.errs != nil {
		w.errs.WatchError(string(r), reason)
	}
	switch reason {
	case "forbidden":
		w.mu.Lock()
		first := len(w.refused) == 0
		w.refused[r] = true
		w.mu.Unlock()
		if first {
			w.log.Error("Not allowed to read admission webhook configurations: the calls of their webhooks read webhook=\"other\" in readyspan_admission_webhook_duration_seconds, tracing goes on; grant list and watch on mutatingwebhookconfigurations and validatingwebhookconfigurations (admissionregistration.k8s.io, see deploy/kubernetes/base/clusterrole.yaml)",
				"resource", r, "err", err.Error())
		}
	case "expired":
		w.log.Info("Watch expired, relisting", "resource", r)
	default:
		w.log.Warn("Watch failed, retrying", "resource", r, "err", err)
	}
}

// works forgets a refusal once a list completes or a watch opens, so that a later one is told
// again, and says when the last one is over.
func (w *Webhooks) works(r Resource) {
	w.mu.Lock()
	was := w.refused[r]
	delete(w.refused, r)
	over := was && len(w.refused) == 0
	w.mu.Unlock()
	if over {
		w.log.Info("Reading admission webhook configurations now: their webhooks get their own label values")
	}
}
