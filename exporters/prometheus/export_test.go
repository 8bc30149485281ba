package prometheus

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestExportBacklog(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status ExportBacklog
		want   string
	}{
		{"healthy", ExportBacklog{}, "0 0 0"},
		{"failing", ExportBacklog{Traces: 153, Bytes: 457000, Failing: true}, "153 457000 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewPedanticRegistry()
			RegisterExportBacklog(reg, func() ExportBacklog { return tc.status })
			f := strings.Fields(tc.want)
			want := `
# HELP readyspan_export_backlog_bytes Estimated OTLP size of the traces waiting in the exporter's queue (bounded by --otlp-queue-bytes).
# TYPE readyspan_export_backlog_bytes gauge
readyspan_export_backlog_bytes ` + f[1] + `
# HELP readyspan_export_backlog_traces Traces waiting in the OTLP exporter's queue (bounded by --otlp-queue-traces; past it the oldest are dropped and counted).
# TYPE readyspan_export_backlog_traces gauge
readyspan_export_backlog_traces ` + f[0] + `
# HELP readyspan_export_failing 1 while the OTLP backend refuses or fails exports (traces are kept in the queue and retried with backoff), else 0.
# TYPE readyspan_export_failing gauge
readyspan_export_failing ` + f[2] + `
`
			if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
				t.Fatal(err)
			}
		})
	}
}
