package otlpsink

import (
	"context"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
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
