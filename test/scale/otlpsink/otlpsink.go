// Package otlpsink is the scale test bed's OTLP/gRPC trace receiver: it accepts every request
// and keeps, per trace, when its root span (pod.startup) was first received. Nothing else is
// kept, so it stays small at any rate; a trace received twice keeps its first time and counts
// the repeat.
package otlpsink

import (
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"sync"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
)

// RootSpan is the name of the span readyspan starts every Pod's trace with.
const RootSpan = "pod.startup"

// Sink records receive times.
type Sink struct {
	collectortrace.UnimplementedTraceServiceServer

	mu       sync.Mutex
	received map[string]time.Time // trace ID (hex) → first receive of its root span
	repeats  int
	spans    int
	requests int

	server *grpc.Server
}

// New returns an empty Sink.
func New() *Sink { return &Sink{received: map[string]time.Time{}} }

// Export implements the OTLP trace service.
func (s *Sink) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				s.spans++
				if sp.GetName() != RootSpan {
					continue
				}
				id := hex.EncodeToString(sp.GetTraceId())
				if _, ok := s.received[id]; ok {
					s.repeats++
					continue
				}
				s.received[id] = now
			}
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// Start serves OTLP/gRPC on addr; it returns once listening.
func (s *Sink) Start(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen for otlp on %s: %w", addr, err)
	}
	s.server = grpc.NewServer(grpc.MaxRecvMsgSize(64 << 20))
	collectortrace.RegisterTraceServiceServer(s.server, s)
	go func() { _ = s.server.Serve(l) }()
	return nil
}

// Shutdown stops serving; safe before Start and twice.
func (s *Sink) Shutdown() {
	if s.server != nil {
		s.server.Stop()
	}
}

// Received returns a copy of the receive times by trace ID.
func (s *Sink) Received() map[string]time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]time.Time, len(s.received))
	for k, v := range s.received {
		out[k] = v
	}
	return out
}

// Has reports whether the trace with this ID was received.
func (s *Sink) Has(traceID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.received[traceID]
	return ok
}

// Counts returns the traces, the repeated root spans, the spans and the requests received.
func (s *Sink) Counts() (traces, repeats, spans, requests int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.received), s.repeats, s.spans, s.requests
}
