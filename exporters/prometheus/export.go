package prometheus

import "github.com/prometheus/client_golang/prometheus"

// ExportBacklog is what the OTLP exporter reports of its queue at a scrape.
type ExportBacklog struct {
	Traces  int
	Bytes   int64
	Failing bool
}

// RegisterExportBacklog registers the gauges that show an OTLP backend in trouble while it
// lasts: what waits in the exporter's bounded queue, and whether exports are failing. They are
// read from status at each scrape.
func RegisterExportBacklog(reg prometheus.Registerer, status func() ExportBacklog) {
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "readyspan_export_backlog_traces",
			Help: "Traces waiting in the OTLP exporter's queue (bounded by --otlp-queue-traces; past it the oldest are dropped and counted)."},
			func() float64 { return float64(status().Traces) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "readyspan_export_backlog_bytes",
			Help: "Estimated OTLP size of the traces waiting in the exporter's queue (bounded by --otlp-queue-bytes)."},
			func() float64 { return float64(status().Bytes) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "readyspan_export_failing",
			Help: "1 while the OTLP backend refuses or fails exports (traces are kept in the queue and retried with backoff), else 0."},
			func() float64 {
				if status().Failing {
					return 1
				}
				return 0
			}),
	)
}
