package prometheus

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/tracer"
)

// joined is trace() with the apiserver's create request of the bare Pod joined into it: a
// mutating webhook call of 52 ms, a validating one of 3 ms and the etcd create of 4 ms, and the
// kubelet's status write with its etcd update of 6 ms.
func joined(t *testing.T, hooks ...string) *phases.Trace {
	t.Helper()
	tr := trace()
	t0 := tr.Root().Start
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	n := byte(0)
	span := func(trace byte, parent byte, name string, start, end int, kv ...string) phases.ComponentSpan {
		n++
		c := phases.ComponentSpan{Service: phases.ServiceAPIServer, Name: name, Start: at(start), End: at(end)}
		c.TraceID[0], c.SpanID[0], c.Parent[0] = trace, n, parent
		for i := 0; i+1 < len(kv); i += 2 {
			c.Attrs = append(c.Attrs, phases.Attr{Key: kv[i], Value: kv[i+1]})
		}
		return c
	}
	create := phases.ComponentTrace{
		span(1, 0, "POST /api/v1/namespaces/{:namespace}/pods", 0, 100),
		span(1, 1, "Create", 1, 99, "resource", "pods", "verb", "POST", "subresource", ""),
	}
	for _, h := range hooks {
		create = append(create, span(1, 2, "Call mutating webhook", 10, 62, "webhook", h))
	}
	create = append(create,
		span(1, 2, "Call validating webhook", 70, 73, "webhook", "policy.example.com"),
		span(1, 2, "Create etcd3", 80, 84, "key", "/pods/default/web-1"))
	status := phases.ComponentTrace{
		span(2, 0, "PATCH /api/v1/namespaces/{:namespace}/pods/{:name}/status", 6100, 6110),
		span(2, byte(len(create)+1), "Patch", 6101, 6109, "resource", "pods", "verb", "PATCH", "subresource", "status"),
		span(2, byte(len(create)+2), "GuaranteedUpdate etcd3", 6102, 6108, "key", "/pods/default/web-1"),
	}
	if got := tr.Join([]phases.ComponentTrace{create, status}); got == 0 {
		t.Fatalf("nothing joined into %s", tr.Pod.Name)
	}
	return tr
}

// declared are webhooks the cluster declares, by type: a stand-in for watch.Webhooks where
// what the cluster holds is not the point.
type declared map[string][]string

func (d declared) Declared(typ, name string) bool { return slices.Contains(d[typ], name) }

func TestComponentHistograms(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, "dev", tracer.Kinds.RolloutKinds(), Options{})
	m.SetWebhooks(declared{phases.WebhookMutating: {"inject.example.com"}, phases.WebhookValidating: {"policy.example.com"}})
	m.Export(trace()) // no joined spans: nothing observed
	m.Export(joined(t, "inject.example.com"))
	want := `
# HELP readyspan_etcd_write_duration_seconds The apiserver's writes to etcd for traced Pods' requests, from its own spans (readyspan run --otlp-receive), by operation: create (the Pod's creation), update (GuaranteedUpdate: the Binding, status writes).
# TYPE readyspan_etcd_write_duration_seconds histogram
readyspan_etcd_write_duration_seconds_bucket{operation="create",le="0.001"} 0
readyspan_etcd_write_duration_seconds_bucket{operation="create",le="0.0025"} 0
readyspan_etcd_write_duration_seconds_bucket{operation="create",le="0.005"} 1
readyspan_etcd_write_duration_seconds_bucket{operation="create",le="0.01"} 1
readyspan_etcd_write_duration_seconds_bucket{operation="create",le="0.025"} 1
readyspan_etcd_write_duration_seconds_bucket{operation="create",le="0.05"} 1
readyspan_etcd_write_duration_seconds_bucket{operation="create",le="0.1"} 1
readyspan_etcd_write_duration_seconds_bucket{operation="create",le="0.25"} 1
readyspan_etcd_write_duration_seconds_bucket{operation="create",le="0.5"} 1
readyspan_etcd_write_duration_seconds_bucket{operation="create",le="1"} 1
readyspan_etcd_write_duration_seconds_bucket{operation="create",le="2.5"} 1
readyspan_etcd_write_duration_seconds_bucket{operation="create",le="5"} 1
readyspan_etcd_write_duration_seconds_bucket{operation="create",le="10"} 1
readyspan_etcd_write_duration_seconds_bucket{operation="create",le="15"} 1
readyspan_etcd_write_duration_seconds_bucket{operation="create",le="30"} 1
readyspan_etcd_write_duration_seconds_bucket{operation="create",le="+Inf"} 1
readyspan_etcd_write_duration_seconds_sum{operation="create"} 0.004
readyspan_etcd_write_duration_seconds_count{operation="create"} 1
readyspan_etcd_write_duration_seconds_bucket{operation="update",le="0.001"} 0
readyspan_etcd_write_duration_seconds_bucket{operation="update",le="0.0025"} 0
readyspan_etcd_write_duration_seconds_bucket{operation="update",le="0.005"} 0
readyspan_etcd_write_duration_seconds_bucket{operation="update",le="0.01"} 1
readyspan_etcd_write_duration_seconds_bucket{operation="update",le="0.025"} 1
readyspan_etcd_write_duration_seconds_bucket{operation="update",le="0.05"} 1
readyspan_etcd_write_duration_seconds_bucket{operation="update",le="0.1"} 1
readyspan_etcd_write_duration_seconds_bucket{operation="update",le="0.25"} 1
readyspan_etcd_write_duration_seconds_bucket{operation="update",le="0.5"} 1
readyspan_etcd_write_duration_seconds_bucket{operation="update",le="1"} 1
readyspan_etcd_write_duration_seconds_bucket{operation="update",le="2.5"} 1
readyspan_etcd_write_duration_seconds_bucket{operation="update",le="5"} 1
readyspan_etcd_write_duration_seconds_bucket{operation="update",le="10"} 1
readyspan_etcd_write_duration_seconds_bucket{operation="update",le="15"} 1
readyspan_etcd_write_duration_seconds_bucket{operation="update",le="30"} 1
readyspan_etcd_write_duration_seconds_bucket{operation="update",le="+Inf"} 1
readyspan_etcd_write_duration_seconds_sum{operation="update"} 0.006
readyspan_etcd_write_duration_seconds_count{operation="update"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "readyspan_etcd_write_duration_seconds"); err != nil {
		t.Error(err)
	}
	count := func(webhook, typ string) float64 {
		return histCount(t, reg, "readyspan_admission_webhook_duration_seconds", map[string]string{"webhook": webhook, "type": typ})
	}
	if got := count("inject.example.com", "mutating"); got != 1 {
		t.Errorf("inject.example.com mutating: %v calls, want 1", got)
	}
	if got := count("policy.example.com", "validating"); got != 1 {
		t.Errorf("policy.example.com validating: %v calls, want 1", got)
	}
	if n := testutil.CollectAndCount(m.components.webhook); n != 2 {
		t.Errorf("%d webhook series, want 2", n)
	}
}

// The webhook label keeps its first WebhookLabelLimit declared names; later ones read "other"
// and are counted. A name that is not valid UTF-8 or too long is made a valid, bounded label
// value; a nameless call reads "unknown".
func TestWebhookLabelBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, "dev", tracer.Kinds.RolloutKinds(), Options{})
	hooks := declared{phases.WebhookValidating: {"policy.example.com"}}
	for i := range WebhookLabelLimit + 4 {
		hooks[phases.WebhookMutating] = append(hooks[phases.WebhookMutating], fmt.Sprintf("hook-%02d.example.com", i))
	}
	m.SetWebhooks(hooks)
	// policy.example.com (validating) takes one place.
	for i := range WebhookLabelLimit + 4 {
		m.Export(joined(t, fmt.Sprintf("hook-%02d.example.com", i)))
	}
	m.Export(joined(t, "hook-00.example.com")) // kept names stay kept
	if got := histCount(t, reg, "readyspan_admission_webhook_duration_seconds", map[string]string{"webhook": "hook-00.example.com", "type": "mutating"}); got != 2 {
		t.Errorf("hook-00: %v calls, want 2", got)
	}
	if got := histCount(t, reg, "readyspan_admission_webhook_duration_seconds", map[string]string{"webhook": OtherValue, "type": "mutating"}); got != 5 {
		t.Errorf("other: %v calls, want 5 (hooks 19 to 23)", got)
	}
	if got := testutil.ToFloat64(m.labelOverflow.WithLabelValues(LabelWebhook)); got != 5 {
		t.Errorf("overflow{label=webhook} = %v, want 5", got)
	}
	if n := testutil.CollectAndCount(m.components.webhook); n != WebhookLabelLimit+1 {
		t.Errorf("%d webhook series, want %d (the cap and other)", n, WebhookLabelLimit+1)
	}

	// Names the apiserver would refuse, declared all the same: the label stays valid.
	m2 := New(prometheus.NewRegistry(), "dev", tracer.Kinds.RolloutKinds(), Options{})
	m2.SetWebhooks(declared{phases.WebhookMutating: {"bad\xff.example.com", strings.Repeat("a", 300), strings.Repeat("é", 200)}})
	for _, c := range []struct{ in, want string }{
		{"bad\xff.example.com", "bad\uFFFD.example.com"},
		{strings.Repeat("a", 300), strings.Repeat("a", maxWebhookName)},
		{strings.Repeat("é", 200), strings.Repeat("é", maxWebhookName/2)}, // cut on a rune
		{"", UnknownWebhook},
	} {
		if got := m2.components.webhookLabel(c.in, phases.WebhookMutating); got != c.want {
			t.Errorf("webhookLabel(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	// Observing with such a value must not panic (client_golang refuses invalid UTF-8).
	m2.Export(joined(t, "bad\xff.example.com"))
}
