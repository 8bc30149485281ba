package otlp

import (
	"context"
	"path/filepath"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/tracer"
)

// marshalOnly is an OTLP client that marshals each request as the gRPC and HTTP clients do
// before writing it, and sends nothing.
type marshalOnly struct{ requests, bytes int }

func (*marshalOnly) Start(context.Context) error { return nil }
func (*marshalOnly) Stop(context.Context) error  { return nil }

func (m *marshalOnly) UploadTraces(_ context.Context, rs []*tracepb.ResourceSpans) error {
	b, err := proto.Marshal(&coltracepb.ExportTraceServiceRequest{ResourceSpans: rs})
	m.requests++
	m.bytes += len(b)
	return err
}

// BenchmarkExportTrace is what a Pod's trace costs on its way out over OTLP, the network apart:
// the request built from readyspan's spans (resourceSpans, in the blocks of the request before,
// as the exporter builds it) and marshalled, as the gRPC and HTTP clients do before writing it,
// in batches of DefaultBatchSize as the exporter sends them. The
// traces are the real captured startups the tracer rebuilds (run8). The correlator's benchmarks
// stop where a trace is handed to the sinks; this is the OTLP sink's part. BenchmarkExportTraceSDK
// is the same through the OpenTelemetry SDK's conversion, the way readyspan went before.
func BenchmarkExportTrace(b *testing.B) {
	var bl requestBlocks
	res := newResources(map[string]string{"readyspan.shard": "0"})
	benchmarkExport(b, func(batch []traceSpans, client *marshalOnly) error {
		err := client.UploadTraces(context.Background(), bl.request(batch, res))
		bl.release()
		return err
	})
}

func BenchmarkExportTraceSDK(b *testing.B) {
	res := &sdkResources{byService: map[string]*resource.Resource{}, process: []attribute.KeyValue{attribute.String("readyspan.shard", "0")}}
	benchmarkExport(b, func(batch []traceSpans, client *marshalOnly) error {
		var ro []sdktrace.ReadOnlySpan
		for _, tr := range batch {
			ro = append(ro, sdkReadOnly(tr, res)...)
		}
		return otlptrace.NewUnstarted(client).ExportSpans(context.Background(), ro)
	})
}

func benchmarkExport(b *testing.B, export func([]traceSpans, *marshalOnly) error) {
	deltas, err := tracer.Kinds.LoadRecording(filepath.Join("..", "..", "tracer", "testdata", "real-node", "run8-slow-pull-watch"))
	if err != nil {
		b.Fatal(err)
	}
	var traces []*phases.Trace
	c := tracer.New(tracer.Config{Backfill: true}, tracer.SinkFunc(func(t *phases.Trace) { traces = append(traces, t) }), nil, nil)
	tracer.Replay(c, deltas)
	if len(traces) == 0 {
		b.Fatal("the capture rebuilt no trace")
	}
	client := &marshalOnly{}
	spans := 0
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; {
		var batch []traceSpans
		for k := 0; k < DefaultBatchSize && n < b.N; k, n = k+1, n+1 {
			t := traces[n%len(traces)]
			batch = append(batch, traceSpans{t.TraceID, t.Spans})
			spans += len(t.Spans)
		}
		if err := export(batch, client); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "traces/s")
	b.ReportMetric(float64(client.bytes)/float64(b.N), "OTLP-bytes/trace")
	b.ReportMetric(float64(spans)/float64(b.N), "spans/trace")
}
