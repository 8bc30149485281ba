package prometheus

import (
	"fmt"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/readyspan/readyspan/phases"
)

// LabelWebhook is the label of readyspan_admission_webhook_duration_seconds naming the webhook,
// and its value in readyspan_metrics_label_overflow_total's label.
const LabelWebhook = "webhook"

// WebhookLabelLimit bounds the webhook label: the first WebhookLabelLimit declared webhook names
// observed keep their own value, later ones read OtherValue and are counted in
// readyspan_metrics_label_overflow_total{label="webhook"}. A cluster's Pod-admitting webhooks
// (a sidecar injector, a policy engine, a few operators') are far fewer.
const WebhookLabelLimit = 20

// Webhooks tells which admission webhooks the cluster declares (tracer.Webhooks: the names in
// its MutatingWebhookConfigurations and ValidatingWebhookConfigurations).
type Webhooks interface {
	// Declared reports whether a configuration of the type (phases.WebhookMutating,
	// phases.WebhookValidating) declares a webhook of that name now.
	Declared(typ, name string) bool
}

// UnknownWebhook is the webhook label of a call whose span does not name its webhook. The
// apiserver requires a webhook's name to be a qualified DNS name (at least three labels), so
// neither it nor OtherValue is a declared webhook's name.
const UnknownWebhook = "unknown"

// maxWebhookName bounds a webhook label's length: the apiserver's own bound on the name (a DNS
// subdomain). The spans come over the network; a longer one is cut.
const maxWebhookName = 253

// CallBuckets are for calls inside the apiserver, milliseconds to a webhook's longest timeout
// (30 s).
var CallBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30}

// componentMetrics are the histograms of the components' spans joined into Pod traces
// (readyspan run --otlp-receive): each admission webhook call and each etcd write of a traced
// Pod's requests.
type componentMetrics struct {
	webhook  *prometheus.HistogramVec
	etcd     *prometheus.HistogramVec
	overflow *prometheus.CounterVec

	mu       sync.Mutex
	declared Webhooks            // nil: nothing is declared
	webhooks map[string]struct{} // the label values taken, at most WebhookLabelLimit
}

func newComponentMetrics(overflow *prometheus.CounterVec) *componentMetrics {
	m := &componentMetrics{
		webhook: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "readyspan_admission_webhook_duration_seconds",
			Help:    fmt.Sprintf("Admission webhook calls made by the apiserver for traced Pods' requests (the Pod's create, its Binding and status writes), from the apiserver's own spans (readyspan run --otlp-receive), by webhook (its name if a webhook configuration of the type declares it, up to %d names; else \"other\") and type (mutating, validating).", WebhookLabelLimit),
			Buckets: CallBuckets}, []string{LabelWebhook, "type"}),
		etcd: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "readyspan_etcd_write_duration_seconds",
			Help:    "The apiserver's writes to etcd for traced Pods' requests, from its own spans (readyspan run --otlp-receive), by operation: create (the Pod's creation), update (GuaranteedUpdate: the Binding, status writes).",
			Buckets: CallBuckets}, []string{"operation"}),
		overflow: overflow,
		webhooks: map[string]struct{}{},
	}
	// The overflow series appears with the first name past the cap: without --otlp-receive,
	// or with few webhooks, it would only be noise.
	for _, op := range []string{phases.StorageCreate, phases.StorageUpdate} {
		m.etcd.WithLabelValues(op)
	}
	return m
}

func (m *componentMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.webhook, m.etcd}
}

// export records the trace's joined webhook calls and etcd writes.
func (m *componentMetrics) export(t *phases.Trace, traceID string) {
	hooks, writes := t.ComponentCalls()
	for _, h := range hooks {
		observe(m.webhook.WithLabelValues(m.webhookLabel(h.Webhook, h.Type), h.Type), h.Duration, traceID)
	}
	for _, w := range writes {
		observe(m.etcd.WithLabelValues(w.Operation), w.Duration, traceID)
	}
}

// webhookLabel is the webhook label's value for the name a span gives the webhook of a call of
// the type: the name itself, made valid UTF-8 and bounded, if a configuration of the type
// declares it and the cap allows (else OtherValue, counted); OtherValue for a name none
// declares.
//
// Only declared names take places: the spans come over the network, and names made up and sent
// first would otherwise take them all. A name whose configuration is deleted keeps its series
// and its place (a series that vanished would break the rates taken over it), but its later
// calls read OtherValue, as any name not declared.
func (m *componentMetrics) webhookLabel(name, typ string) string {
	if name == "" {
		return UnknownWebhook
	}
	m.mu.Lock()
	declared := m.declared
	m.mu.Unlock()
	if declared == nil || !declared.Declared(typ, name) {
		return OtherValue
	}
	name = strings.ToValidUTF8(name, "\uFFFD")
	if len(name) > maxWebhookName {
		name = strings.ToValidUTF8(name[:maxWebhookName], "")
	}
	m.mu.Lock()
	kept := admit(m.webhooks, name, WebhookLabelLimit)
	m.mu.Unlock()
	if !kept {
		m.overflow.WithLabelValues(LabelWebhook).Inc()
		return OtherValue
	}
	return name
}

// SetWebhooks gives the webhook label of readyspan_admission_webhook_duration_seconds the
// webhooks the cluster declares, before the first trace is exported. Until it is called, every
// call's webhook label reads OtherValue (UnknownWebhook for a span that names none).
func (m *Metrics) SetWebhooks(w Webhooks) {
	m.components.mu.Lock()
	m.components.declared = w
	m.components.mu.Unlock()
}
