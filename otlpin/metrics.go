package otlpin

import "github.com/prometheus/client_golang/prometheus"

// metrics are the input's counters: every span received is, in the end, joined or dropped (or
// still held), per component (the three joined and other: a bounded label).
type metrics struct {
	recv, join *prometheus.CounterVec
	drop       *prometheus.CounterVec
	refuse     *prometheus.CounterVec
}

// Reasons a request is refused, as the readyspan_otlp_refused_requests_total reason label.
const (
	refusedBusy        = "busy"        // the in-flight bound: retryable
	refusedTooLarge    = "too_large"   // past 16 MiB decompressed
	refusedMalformed   = "malformed"   // not gzip, not an ExportTraceServiceRequest
	refusedUnsupported = "unsupported" // another method, content type or encoding
	refusedUnreadable  = "unreadable"  // the body could not be read: the sender went away or stalled
)

func newMetrics(reg prometheus.Registerer, s *Store) *metrics {
	m := &metrics{
		recv: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "readyspan_otlp_received_spans_total",
			Help: "Spans the OTLP input (--otlp-receive) received, by component (kube-apiserver, kubelet, containerd, other)."}, []string{"component"}),
		join: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "readyspan_otlp_joined_spans_total",
			Help: "Received spans a Pod's trace took: joined to the Pod by the keys the component states."}, []string{"component"}),
		drop: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "readyspan_otlp_dropped_spans_total",
			Help: "Received spans dropped, by component and reason: unrelated, component, read, malformed, forbidden and ambiguous at once; unresolved, expired, bytes or crowded after being held; forbidden too when a node-bound sender's spans name a Pod on another node."}, []string{"component", "reason"}),
		refuse: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "readyspan_otlp_refused_requests_total",
			Help: "OTLP requests refused before their spans were read, by reason: busy (the in-flight bound; the sender retries), too_large, malformed, unsupported, unreadable. Requests refused for their token are counted by the access rules."}, []string{"reason"}),
	}
	for _, r := range []string{refusedBusy, refusedTooLarge, refusedMalformed, refusedUnsupported, refusedUnreadable} {
		m.refuse.WithLabelValues(r)
	}
	for _, c := range componentLabels {
		m.recv.WithLabelValues(c)
		m.join.WithLabelValues(c)
	}
	if reg != nil {
		reg.MustRegister(m.recv, m.join, m.drop, m.refuse,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "readyspan_otlp_held_spans",
				Help: "Received spans held until a Pod's trace takes them or they expire."},
				func() float64 { n, _ := s.Held(); return float64(n) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "readyspan_otlp_held_bytes",
				Help: "Estimated bytes of the live heap the OTLP input holds: the received spans held, the strings they share, the indexes, the unrelated traces remembered (bounded by --otlp-receive-max-mib)."},
				func() float64 { _, b := s.Held(); return float64(b) }),
		)
	}
	return m
}

func (m *metrics) received(service string) { m.recv.WithLabelValues(component(service)).Inc() }
func (m *metrics) joined(service string)   { m.join.WithLabelValues(component(service)).Inc() }
func (m *metrics) dropped(service, reason string, n int) {
	m.drop.WithLabelValues(component(service), reason).Add(float64(n))
}

func (m *metrics) refused(reason string) { m.refuse.WithLabelValues(reason).Inc() }
