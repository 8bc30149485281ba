package otlpsink

import (
	"context"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func request(spans ...*tracepb.Span) *collectortrace.ExportTraceServiceRequest {
	return &collectortrace.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: spans}},
	}}}
}

func TestExportKeepsFirstRootSpan(t *testing.T) {
	s := New()
	id := []byte{0xab, 0xcd, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}
	other := []byte{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}
	ctx := context.Background()
	if _, err := s.Export(ctx, request(&tracepb.Span{TraceId: id, Name: "kubelet"}, &tracepb.Span{TraceId: id, Name: RootSpan})); err != nil {
		t.Fatal(err)
	}
	first := s.Received()["abcd0102030405060708090a0b0c0d0e"]
	if first.IsZero() {
		t.Fatalf("root span not recorded: %v", s.Received())
	}
	if _, err := s.Export(ctx, request(&tracepb.Span{TraceId: id, Name: RootSpan}, &tracepb.Span{TraceId: other, Name: "status"})); err != nil {
		t.Fatal(err)
	}
	traces, repeats, spans, requests := s.Counts()
	if traces != 1 || repeats != 1 || spans != 4 || requests != 2 {
		t.Errorf("counts = %d traces, %d repeats, %d spans, %d requests; want 1, 1, 4, 2", traces, repeats, spans, requests)
	}
	if got := s.Received()["abcd0102030405060708090a0b0c0d0e"]; !got.Equal(first) {
		t.Errorf("a repeat moved the receive time from %v to %v", first, got)
	}
	if s.Has("01010101010101010101010101010101") {
		t.Error("a trace with no root span counts as received")
	}
}

// TestRolloutsAndShards counts rollout root spans per trace without merging repeats, and root
// spans per sending shard.
func TestRolloutsAndShards(t *testing.T) {
	s := New()
	ctx := context.Background()
	roll := []byte{2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2}
	pod := []byte{3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3}
	from := func(shard string, spans ...*tracepb.Span) *collectortrace.ExportTraceServiceRequest {
		r := request(spans...)
		r.ResourceSpans[0].Resource = &resourcepb.Resource{Attributes: []*commonpb.KeyValue{
			{Key: ShardAttribute, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: shard}}}}}
		return r
	}
	for _, r := range []*collectortrace.ExportTraceServiceRequest{
		from("0/2", &tracepb.Span{TraceId: roll, Name: RolloutRootSpan}, &tracepb.Span{TraceId: roll, Name: "rollout.step"}),
		from("1/2", &tracepb.Span{TraceId: pod, Name: RootSpan}),
		from("1/2", &tracepb.Span{TraceId: roll, Name: RolloutRootSpan}),
	} {
		if _, err := s.Export(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if traces, repeats := s.Rollouts(); traces != 1 || repeats != 1 {
		t.Errorf("rollouts: %d traces, %d repeats; want 1, 1", traces, repeats)
	}
	if got := s.ByShard(); got["0/2"] != 1 || got["1/2"] != 2 || len(got) != 2 {
		t.Errorf("by shard %v, want 0/2: 1, 1/2: 2", got)
	}
}

// TestGzip receives what an OpenTelemetry Collector's OTLP exporter sends by default: gzip.
func TestGzip(t *testing.T) {
	s := New()
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	conn, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	id := []byte{4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4}
	_, err = collectortrace.NewTraceServiceClient(conn).Export(context.Background(), request(&tracepb.Span{TraceId: id, Name: RootSpan}), grpc.UseCompressor("gzip")) // registered by the sink's import alone
	if err != nil {
		t.Fatalf("a gzip-compressed export was refused: %v", err)
	}
	if !s.Has("04040404040404040404040404040404") {
		t.Error("the trace was not recorded")
	}
}
