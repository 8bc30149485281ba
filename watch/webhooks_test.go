package watch

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	k8stesting "k8s.io/client-go/testing"

	"github.com/readyspan/readyspan/phases"
)

// webhookConfigurations reads testdata/objects/webhookconfigurations.yaml: the configurations
// as kubectl get -o yaml prints them.
func webhookConfigurations(t *testing.T) []runtime.Object {
	t.Helper()
	b, err := os.ReadFile("testdata/objects/webhookconfigurations.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dec := scheme.Codecs.UniversalDeserializer()
	var list metav1.List
	if _, _, err := dec.Decode(b, nil, &list); err != nil {
		t.Fatal(err)
	}
	var out []runtime.Object
	for _, item := range list.Items {
		o, _, err := dec.Decode(item.Raw, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, o)
	}
	return out
}

// TestWebhookKindsAgreeWithTheScheme holds each entry of webhookKinds to client-go's scheme, as
// TestKindsAgreeWithTheScheme the registry's, and to what TestKindsEncoding asks of a kind read
// in protobuf: its objects and lists encode so.
func TestWebhookKindsAgreeWithTheScheme(t *testing.T) {
	pb := ProtobufInfo(t)
	types := map[string]bool{}
	for _, k := range webhookKinds {
		t.Run(string(k.resource), func(t *testing.T) {
			if types[k.typ] {
				t.Errorf("type %s named twice", k.typ)
			}
			types[k.typ] = true
			gvks, _, err := scheme.Scheme.ObjectKinds(k.newObject())
			if err != nil || len(gvks) != 1 {
				t.Fatalf("%T: kinds %v, %v", k.newObject(), gvks, err)
			}
			if got := gvks[0]; got.GroupVersion() != k.gvr.GroupVersion() || got.Kind != k.kind || string(k.resource) != k.gvr.Resource {
				t.Errorf("the object is a %v, the entry says %v %s (%s)", got, k.gvr.GroupVersion(), k.kind, k.resource)
			}
			lists, _, err := scheme.Scheme.ObjectKinds(k.newList())
			if err != nil || len(lists) != 1 || lists[0] != gvks[0].GroupVersion().WithKind(k.kind+"List") {
				t.Errorf("the list is a %v (%v), want a %sList", lists, err, k.kind)
			}
			enc := scheme.Codecs.EncoderForVersion(pb.Serializer, k.gvr.GroupVersion())
			for _, o := range []runtime.Object{k.newObject(), k.newList()} {
				if _, err := runtime.Encode(enc, o); err != nil {
					t.Errorf("%T has no protobuf encoding: %v", o, err)
				}
			}
		})
	}
	for _, typ := range []string{phases.WebhookMutating, phases.WebhookValidating} {
		if !types[typ] {
			t.Errorf("no configuration declares %s webhooks", typ)
		}
	}
}

// TestWebhooksSlim: what is kept of a configuration is its identity and its webhooks' names: no
// CA bundle, no kubectl copy of the whole object, no managedFields.
func TestWebhooksSlim(t *testing.T) {
	for _, o := range webhookConfigurations(t) {
		var k *webhookKind
		for _, wk := range webhookKinds {
			if reflect.TypeOf(wk.newObject()) == reflect.TypeOf(o) {
				k = wk
			}
		}
		if k == nil {
			t.Fatalf("no webhook kind for %T", o)
		}
		names := k.names(o)
		m := o.(metav1.Object)
		name, uid, rv := m.GetName(), m.GetUID(), m.GetResourceVersion()
		k.slim(o)
		if got := k.names(o); strings.Join(got, ",") != strings.Join(names, ",") || len(got) == 0 {
			t.Errorf("%s: names %v, want %v", name, got, names)
		}
		if m.GetName() != name || m.GetUID() != uid || m.GetResourceVersion() != rv {
			t.Errorf("%s: identity lost: %s %s %s", name, m.GetName(), m.GetUID(), m.GetResourceVersion())
		}
		if len(m.GetAnnotations()) > 0 || len(m.GetManagedFields()) > 0 || len(m.GetLabels()) > 0 {
			t.Errorf("%s kept metadata: %v %v %v", name, m.GetAnnotations(), m.GetLabels(), m.GetManagedFields())
		}
		switch c := o.(type) {
		case *admissionv1.MutatingWebhookConfiguration:
			for _, h := range c.Webhooks {
				if !reflect.DeepEqual(h, admissionv1.MutatingWebhook{Name: h.Name}) {
					t.Errorf("%s: kept %+v", name, h)
				}
			}
		case *admissionv1.ValidatingWebhookConfiguration:
			for _, h := range c.Webhooks {
				if !reflect.DeepEqual(h, admissionv1.ValidatingWebhook{Name: h.Name}) {
					t.Errorf("%s: kept %+v", name, h)
				}
			}
		}
	}
}

// TestWebhooksDeclared: a webhook is declared under its configuration's type, from the initial
// list on, and follows the configurations as they are changed, added and deleted.
func TestWebhooksDeclared(t *testing.T) {
	client := fake.NewClientset(webhookConfigurations(t)...)
	w := NewWebhooks(client, nil, nil)
	if w.Declared(phases.WebhookMutating, "inject.readyspan.dev") {
		t.Fatal("declared before anything was listed")
	}
	ctx := t.Context()
	w.Start(ctx)
	WaitUntil(t, "listed", w.HasSynced)
	for _, c := range []struct {
		typ, name string
		want      bool
	}{
		{phases.WebhookMutating, "inject.readyspan.dev", true},
		{phases.WebhookValidating, "deny.readyspan.dev", true},
		{phases.WebhookValidating, "validate.policy.example.com", true},
		{phases.WebhookValidating, "audit.policy.example.com", true},
		{phases.WebhookValidating, "inject.readyspan.dev", false}, // another type's
		{phases.WebhookMutating, "deny.readyspan.dev", false},
		{phases.WebhookMutating, "readyspan-local-inject", false}, // a configuration's name, not a webhook's
		{phases.WebhookMutating, "", false},
		{"", "inject.readyspan.dev", false},
	} {
		if got := w.Declared(c.typ, c.name); got != c.want {
			t.Errorf("Declared(%q, %q) = %v, want %v", c.typ, c.name, got, c.want)
		}
	}

	mutating := client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	inject, err := mutating.Get(ctx, "readyspan-local-inject", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	inject.Webhooks = append(inject.Webhooks, admissionv1.MutatingWebhook{Name: "inject2.readyspan.dev"})
	if _, err := mutating.Update(ctx, inject, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	WaitUntil(t, "a webhook added", func() bool { return w.Declared(phases.WebhookMutating, "inject2.readyspan.dev") })
	if err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, "policy-engine", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	WaitUntil(t, "a configuration deleted", func() bool { return !w.Declared(phases.WebhookValidating, "audit.policy.example.com") })
	if !w.Declared(phases.WebhookValidating, "deny.readyspan.dev") || !w.Declared(phases.WebhookMutating, "inject.readyspan.dev") {
		t.Error("a deletion took other configurations' webhooks with it")
	}

	var none *Webhooks
	if none.Declared(phases.WebhookMutating, "inject.readyspan.dev") {
		t.Error("a nil Webhooks declares something")
	}
}

// TestWebhooksForbiddenThenAllowed: a refused list is counted as the Watcher's are and told
// once, however often it is retried, and nothing is declared; once RBAC allows it, the
// configurations are read and the log says so.
func TestWebhooksForbiddenThenAllowed(t *testing.T) {
	client := fake.NewClientset(webhookConfigurations(t)...)
	var mu sync.Mutex
	refusals := map[string]int{}
	allowed := false
	for _, k := range webhookKinds {
		res := k.gvr.Resource
		client.PrependReactor("list", res, func(k8stesting.Action) (bool, runtime.Object, error) {
			mu.Lock()
			defer mu.Unlock()
			if allowed {
				return false, nil, nil
			}
			refusals[res]++
			return true, nil, apierrors.NewForbidden(k.gvr.GroupResource(), "", ForbiddenError("User \"system:serviceaccount:readyspan:readyspan\" cannot list resource \""+res+"\" in API group \"admissionregistration.k8s.io\" at the cluster scope"))
		})
	}
	var logs syncBuffer
	errs := &CountErrors{}
	w := NewWebhooks(client, errs, slog.New(slog.NewTextHandler(&logs, nil)))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	w.Start(ctx)
	// A refusal is counted after the reactor returns it: wait for the counts, not the refusals.
	WaitUntil(t, "each list refused and counted twice", func() bool {
		got := errs.Snapshot()
		return got["mutatingwebhookconfigurations/forbidden"] >= 2 && got["validatingwebhookconfigurations/forbidden"] >= 2
	})
	if w.Declared(phases.WebhookMutating, "inject.readyspan.dev") || w.Declared(phases.WebhookValidating, "deny.readyspan.dev") {
		t.Error("declared while refused")
	}
	if n := strings.Count(logs.String(), "Not allowed to read admission webhook configurations"); n != 1 {
		t.Errorf("told %d times, want once:\n%s", n, logs.String())
	}
	mu.Lock()
	if refusals["mutatingwebhookconfigurations"] < 2 || refusals["validatingwebhookconfigurations"] < 2 {
		t.Errorf("counted more refusals than were made: %v", refusals)
	}
	mu.Unlock()

	mu.Lock()
	allowed = true
	mu.Unlock()
	WaitUntil(t, "read once allowed", func() bool {
		return w.Declared(phases.WebhookMutating, "inject.readyspan.dev") && w.Declared(phases.WebhookValidating, "deny.readyspan.dev")
	})
	WaitUntil(t, "told it is over", func() bool { return strings.Contains(logs.String(), "Reading admission webhook configurations now") })
	if n := strings.Count(logs.String(), "Not allowed to read admission webhook configurations"); n != 1 {
		t.Errorf("told %d times, want once:\n%s", n, logs.String())
	}
}

// TestSourceWatchesWebhooksWhenAsked: only a Source asked to (the daemon with --otlp-receive)
// watches the webhook configurations.
func TestSourceWatchesWebhooksWhenAsked(t *testing.T) {
	for _, asked := range []bool{false, true} {
		s := NewSource(SourceConfig{Kinds: NewRegistry(), Client: fake.NewClientset(), Host: "fake", Webhooks: asked})
		if got := s.Webhooks() != nil; got != asked {
			t.Errorf("asked %v: watching the webhook configurations %v", asked, got)
		}
	}
}

// syncBuffer is a log's destination written by the reflectors' goroutines and read by the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
