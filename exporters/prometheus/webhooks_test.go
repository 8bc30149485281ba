package prometheus

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/watch"
)

// The configurations below are as the apiserver returns them after kubectl apply: defaults
// filled in, the CA bundle, kubectl's last-applied copy and managedFields.
var (
	created   = metav1.NewTime(time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC))
	caBundle  = []byte("-----BEGIN CERTIFICATE-----\nMIIBdzCCAR2gAwIBAgIBADAKBggqhkjOPQQDAjAjMSEwHwYDVQQDDBhrM3Mtc2Vy\n-----END CERTIFICATE-----\n")
	podCreate = []admissionv1.RuleWithOperations{{
		Operations: []admissionv1.OperationType{admissionv1.Create},
		Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}, Scope: new(admissionv1.AllScopes)},
	}}
)

func configMeta(name string) metav1.ObjectMeta {
	h := fnv.New64a()
	h.Write([]byte(name))
	uid := types.UID(fmt.Sprintf("1b0c5e4e-6a63-4d5c-9d1f-%012x", h.Sum64()&(1<<48-1)))
	return metav1.ObjectMeta{Name: name, UID: uid, ResourceVersion: "1042", Generation: 1, CreationTimestamp: created,
		Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"...","metadata":{"annotations":{},"name":"` + name + `"},"webhooks":[]}` + "\n"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl-client-side-apply", Operation: metav1.ManagedFieldsOperationUpdate,
			APIVersion: "admissionregistration.k8s.io/v1", Time: &created, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:webhooks":{}}`)}},
	}
}

func clientConfig(path string) admissionv1.WebhookClientConfig {
	return admissionv1.WebhookClientConfig{CABundle: caBundle,
		Service: &admissionv1.ServiceReference{Namespace: "webhooks", Name: "webhooks", Path: new(path), Port: new(int32(443))}}
}

func mutatingConfig(name string, hooks ...string) *admissionv1.MutatingWebhookConfiguration {
	c := &admissionv1.MutatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{Kind: "MutatingWebhookConfiguration", APIVersion: "admissionregistration.k8s.io/v1"},
		ObjectMeta: configMeta(name),
	}
	for _, h := range hooks {
		c.Webhooks = append(c.Webhooks, admissionv1.MutatingWebhook{
			Name: h, ClientConfig: clientConfig("/mutate"), Rules: podCreate,
			FailurePolicy: new(admissionv1.Fail), MatchPolicy: new(admissionv1.Equivalent),
			NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{},
			SideEffects: new(admissionv1.SideEffectClassNone), TimeoutSeconds: new(int32(10)),
			AdmissionReviewVersions: []string{"v1"}, ReinvocationPolicy: new(admissionv1.NeverReinvocationPolicy),
		})
	}
	return c
}

func validatingConfig(name string, hooks ...string) *admissionv1.ValidatingWebhookConfiguration {
	c := &admissionv1.ValidatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{Kind: "ValidatingWebhookConfiguration", APIVersion: "admissionregistration.k8s.io/v1"},
		ObjectMeta: configMeta(name),
	}
	for _, h := range hooks {
		c.Webhooks = append(c.Webhooks, admissionv1.ValidatingWebhook{
			Name: h, ClientConfig: clientConfig("/validate"), Rules: podCreate,
			FailurePolicy: new(admissionv1.Fail), MatchPolicy: new(admissionv1.Equivalent),
			NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{},
			SideEffects: new(admissionv1.SideEffectClassNone), TimeoutSeconds: new(int32(10)),
			AdmissionReviewVersions: []string{"v1"},
		})
	}
	return c
}

// clusterWebhooks watches the webhook configurations client serves, and waits for them to be
// listed.
func clusterWebhooks(t *testing.T, client *fake.Clientset, log *slog.Logger) *watch.Webhooks {
	t.Helper()
	w := watch.NewWebhooks(client, nil, log)
	w.Start(t.Context())
	waitFor(t, "the webhook configurations listed", w.HasSynced)
	return w
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !eventually(cond) {
		t.Fatalf("no %s in 20s", what)
	}
}

// eventually reports whether cond held within 20 s.
func eventually(cond func() bool) bool {
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

func webhookCalls(t *testing.T, reg *prometheus.Registry, webhook, typ string) float64 {
	t.Helper()
	return histCount(t, reg, "readyspan_admission_webhook_duration_seconds", map[string]string{"webhook": webhook, "type": typ})
}

// Spans naming 25 made-up webhooks, sent before any real one is called, take no label value:
// the cluster's own webhooks, declared in its configurations, keep theirs, and the made-up ones
// read "other", without counting as past the cap.
func TestWebhookLabelFromTheCluster(t *testing.T) {
	client := fake.NewClientset(
		mutatingConfig("sidecar-injector", "inject.example.com"),
		validatingConfig("policy", "policy.example.com"),
	)
	reg := prometheus.NewRegistry()
	m := New(reg, "dev", tracer.Kinds.RolloutKinds(), Options{})
	m.SetWebhooks(clusterWebhooks(t, client, nil))

	const junk = 25
	for i := range junk {
		m.Export(joined(t, fmt.Sprintf("junk-%02d.attacker.example", i)))
	}
	m.Export(joined(t, "inject.example.com"))

	if got := webhookCalls(t, reg, "inject.example.com", phases.WebhookMutating); got != 1 {
		t.Errorf("inject.example.com mutating: %v calls, want 1", got)
	}
	if got := webhookCalls(t, reg, "policy.example.com", phases.WebhookValidating); got != junk+1 {
		t.Errorf("policy.example.com validating: %v calls, want %d", got, junk+1)
	}
	if got := webhookCalls(t, reg, OtherValue, phases.WebhookMutating); got != junk {
		t.Errorf("other mutating: %v calls, want %d (every made-up name)", got, junk)
	}
	if n := testutil.CollectAndCount(m.components.webhook); n != 3 {
		t.Errorf("%d webhook series, want 3 (the two webhooks and other)", n)
	}
	if got := testutil.ToFloat64(m.labelOverflow.WithLabelValues(LabelWebhook)); got != 0 {
		t.Errorf("overflow{label=webhook} = %v, want 0: no declared name was past the cap", got)
	}
}

// A name declared by a validating configuration is not a mutating webhook's: a mutating call
// that names it reads "other".
func TestWebhookLabelByType(t *testing.T) {
	client := fake.NewClientset(validatingConfig("policy", "policy.example.com"))
	reg := prometheus.NewRegistry()
	m := New(reg, "dev", tracer.Kinds.RolloutKinds(), Options{})
	m.SetWebhooks(clusterWebhooks(t, client, nil))

	m.Export(joined(t, "policy.example.com")) // a mutating call, and the validating one
	if got := webhookCalls(t, reg, OtherValue, phases.WebhookMutating); got != 1 {
		t.Errorf("other mutating: %v calls, want 1", got)
	}
	if got := webhookCalls(t, reg, "policy.example.com", phases.WebhookMutating); got != 0 {
		t.Errorf("policy.example.com mutating: %v calls, want none (it is declared validating)", got)
	}
	if got := webhookCalls(t, reg, "policy.example.com", phases.WebhookValidating); got != 1 {
		t.Errorf("policy.example.com validating: %v calls, want 1", got)
	}
}

// A configuration deleted: its webhooks' series stay (with the calls they counted) and keep
// their place under the cap, but their later calls read "other", as any name not declared; a
// configuration added later gives its webhooks their own values from then on.
func TestWebhookLabelFollowsTheCluster(t *testing.T) {
	client := fake.NewClientset(mutatingConfig("sidecar-injector", "inject.example.com"))
	reg := prometheus.NewRegistry()
	m := New(reg, "dev", tracer.Kinds.RolloutKinds(), Options{})
	hooks := clusterWebhooks(t, client, nil)
	m.SetWebhooks(hooks)

	m.Export(joined(t, "inject.example.com"))
	ctx := t.Context()
	if err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, "sidecar-injector", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "deletion seen", func() bool { return !hooks.Declared(phases.WebhookMutating, "inject.example.com") })
	m.Export(joined(t, "inject.example.com"))
	if got := webhookCalls(t, reg, "inject.example.com", phases.WebhookMutating); got != 1 {
		t.Errorf("inject.example.com mutating: %v calls, want the 1 before the deletion", got)
	}
	if got := webhookCalls(t, reg, OtherValue, phases.WebhookMutating); got != 1 {
		t.Errorf("other mutating: %v calls, want the 1 after the deletion", got)
	}

	if _, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, validatingConfig("policy", "policy.example.com"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "creation seen", func() bool { return hooks.Declared(phases.WebhookValidating, "policy.example.com") })
	m.Export(joined(t, "inject.example.com"))
	if got := webhookCalls(t, reg, "policy.example.com", phases.WebhookValidating); got != 1 {
		t.Errorf("policy.example.com validating: %v calls, want the 1 after its configuration was created", got)
	}
	if got := webhookCalls(t, reg, OtherValue, phases.WebhookValidating); got != 2 {
		t.Errorf("other validating: %v calls, want the 2 before its configuration was created", got)
	}
}

// Without the RBAC to read the configurations, readyspan says so once, however often the lists
// are retried, and labels every webhook "other": it never falls back to the spans' names.
func TestWebhookLabelWithoutRBAC(t *testing.T) {
	client := fake.NewClientset(
		mutatingConfig("sidecar-injector", "inject.example.com"),
		validatingConfig("policy", "policy.example.com"),
	)
	var mu sync.Mutex
	lists := map[string]int{}
	for _, res := range []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"} {
		client.PrependReactor("list", res, func(k8stesting.Action) (bool, runtime.Object, error) {
			mu.Lock()
			lists[res]++
			mu.Unlock()
			return true, nil, apierrors.NewForbidden(admissionv1.Resource(res), "",
				fmt.Errorf("User \"system:serviceaccount:readyspan:readyspan\" cannot list resource %q in API group \"admissionregistration.k8s.io\" at the cluster scope", res))
		})
	}
	var logs syncBuffer
	reg := prometheus.NewRegistry()
	m := New(reg, "dev", tracer.Kinds.RolloutKinds(), Options{})
	hooks := watch.NewWebhooks(client, nil, slog.New(slog.NewTextHandler(&logs, nil)))
	hooks.Start(t.Context())
	m.SetWebhooks(hooks)
	// Each list refused twice: the second refusal must not be told again.
	if !eventually(func() bool {
		mu.Lock()
		defer mu.Unlock()
		return lists["mutatingwebhookconfigurations"] >= 2 && lists["validatingwebhookconfigurations"] >= 2
	}) {
		t.Error("the lists were not retried in 20s")
	}

	m.Export(joined(t, "inject.example.com"))
	if got := webhookCalls(t, reg, OtherValue, phases.WebhookMutating); got != 1 {
		t.Errorf("other mutating: %v calls, want 1", got)
	}
	if got := webhookCalls(t, reg, OtherValue, phases.WebhookValidating); got != 1 {
		t.Errorf("other validating: %v calls, want 1", got)
	}
	if n := testutil.CollectAndCount(m.components.webhook); n != 2 {
		t.Errorf("%d webhook series, want 2 (other, of each type)", n)
	}

	var told []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "admission webhook configurations") {
			told = append(told, l)
		}
	}
	if len(told) != 1 {
		t.Fatalf("%d lines about the configurations, want 1:\n%s", len(told), logs.String())
	}
	for _, want := range []string{"level=ERROR", "Not allowed to read admission webhook configurations",
		"list and watch on mutatingwebhookconfigurations and validatingwebhookconfigurations", `webhook=\"other\"`, "clusterrole.yaml", "cannot list resource"} {
		if !strings.Contains(told[0], want) {
			t.Errorf("the line does not say %q:\n%s", want, told[0])
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
