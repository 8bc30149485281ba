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

// WebhookLabelLimit bounds the webhook label: the first WebhookLabelLimit webhook names seen
// keep their own value, later ones read OtherValue and are counted in
// readyspan_metrics_label_overflow_total{label="webhook"}. A cluster's Pod-admitting webhooks
// (a sidecar injector, a policy engine, a few operators') are far fewer.
const WebhookLabelLimit = 20

// UnknownWebhook is the webhook label of a call whose span does not name its webhook. The
// apiserver requires a webhook's name to be a qualified DNS name (at least three labels), so
// neither it nor OtherValue is a webhook's name.
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
	webhooks map[string]struct{}
}

func newComponentMetrics(overflow *prometheus.CounterVec) *componentMetrics {
	m := &componentMetrics{
		webhook: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "readyspan_admission_webhook_duration_seconds",
			Help:    fmt.Sprintf("Admission webhook calls made by the apiserver for traced Pods' requests (the Pod's create, its Binding and status writes), from the apiserver's own spans (readyspan run --otlp-receive), by webhook (its name; the first %d seen, later ones \"other\") and type (mutating, validating).", WebhookLabelLimit),
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
		observe(m.webhook.WithLabelValues(m.webhookLabel(h.Webhook), h.Type), h.Duration, traceID)
	}
	for _, w := range writes {
		observe(m.etcd.WithLabelValues(w.Operation), w.Duration, traceID)
	}
}

// webhookLabel is the webhook label's value for a webhook's name: the name itself, made valid
// UTF-8 and bounded, while the cap allows, else OtherValue (counted).
func (m *componentMetrics) webhookLabel(name string) string {
	if name == "" {
		return UnknownWebhook
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
