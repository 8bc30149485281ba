package otlpin

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/readyspan/readyspan/dataplane"
)

// nodeRequest is one request of readyspan node: n endpoint.programmed spans of one node, each
// for another address, as the node component sends them.
func nodeRequest(tb testing.TB, node string, n, offset int) []byte {
	str := func(k, v string) *commonpb.KeyValue {
		return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
	}
	num := func(k string, v int64) *commonpb.KeyValue {
		return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v}}}
	}
	at := uint64(time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC).UnixNano())
	ss := &tracepb.ScopeSpans{}
	for i := range n {
		j := offset + i
		id := []byte(fmt.Sprintf("%016x", j+1)) // 16 bytes: a trace ID, and a span ID of its first 8
		ss.Spans = append(ss.Spans, &tracepb.Span{TraceId: id, SpanId: id[8:], Name: dataplane.SpanProgrammed,
			StartTimeUnixNano: at, EndTimeUnixNano: at, Attributes: []*commonpb.KeyValue{
				str(dataplane.AttrNode, node), str(dataplane.AttrNamespace, fmt.Sprintf("ns-%d", j%100)),
				str(dataplane.AttrService, fmt.Sprintf("svc-%d", j%100)), str(dataplane.AttrPortName, "http"),
				str(dataplane.AttrProtocol, "tcp"), str(dataplane.AttrAddress, fmt.Sprintf("10.%d.%d.%d", j>>16&255, j>>8&255, j&255)),
				num(dataplane.AttrPort, 8080), str(dataplane.AttrMode, dataplane.ModeNFTables)}})
	}
	req := &collectortrace.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource:   &resourcepb.Resource{Attributes: []*commonpb.KeyValue{str("service.name", dataplane.Component), str(dataplane.AttrNode, node)}},
		ScopeSpans: []*tracepb.ScopeSpans{ss}}}}
	b, err := proto.Marshal(req)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// BenchmarkNodeReports is the central readyspan's cost of one node's report of one programmed
// endpoint: decoding the span, checking its sender and names, and filing it in the table
// (ns/change), and the heap the table holds per change it keeps (B/change).
func BenchmarkNodeReports(b *testing.B) {
	const perRequest = 512
	raw := [][]byte{nodeRequest(b, "node-a", perRequest, 0)}
	s := NewStore(time.Hour, 0, nil)
	s.SetDataplane(dataplane.NewTable(time.Hour, 1<<30))
	sender := Sender{Name: "node-a", Node: "node-a"}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := s.Request(sender)
		if err := DecodeMessage(raw[0], r.Add); err != nil {
			b.Fatal(err)
		}
		r.End()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perRequest), "ns/change")
	b.StopTimer()
	if s.dataplane.Len() == 0 {
		b.Fatal("no change filed")
	}

	// The heap a table of 100,000 distinct changes holds.
	const changes = 100_000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	t := dataplane.NewTable(time.Hour, 1<<30)
	s = NewStore(time.Hour, 0, nil)
	s.SetDataplane(t)
	for off := 0; off < changes; off += perRequest {
		r := s.Request(sender)
		if err := DecodeMessage(nodeRequest(b, "node-a", perRequest, off), r.Add); err != nil {
			b.Fatal(err)
		}
		r.End()
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(t.Len()), "B/change")
	runtime.KeepAlive(t)
}
