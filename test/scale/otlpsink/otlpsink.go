// Package otlpsink is the scale test bed's OTLP/gRPC trace receiver: it accepts every request
// and keeps, per trace, when its root span (pod.startup) was first received, and how often each
// rollout's root span (workload.rollout) came. Nothing else is kept, so it stays small at any
// rate; it merges nothing: a trace received twice keeps its first time and counts the repeat.
// Root spans are also counted by the shard that sent them (the readyspan.shard resource
// attribute), so a split run shows who exported what.
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
	_ "google.golang.org/grpc/encoding/gzip" // an OpenTelemetry Collector's OTLP exporter compresses by default
)

// RootSpan is the name of the span readyspan starts every Pod's trace with.
const RootSpan = "pod.startup"

// RolloutRootSpan starts every rollout's trace.
const RolloutRootSpan = "workload.rollout"

// ShardAttribute is the resource attribute a sharded readyspan names its shard with.
const ShardAttribute = "readyspan.shard"

// Sink records receive times.
type Sink struct {
	collectortrace.UnimplementedTraceServiceServer

	mu       sync.Mutex
	received map[string]time.Time // trace ID (hex) → first receive of its root span
	repeats  int
	rollouts map[string]int // rollout trace ID (hex) → root spans received
	byShard  map[string]int // readyspan.shard ("" unsharded) → root spans received
	spans    int
	requests int

	server *grpc.Server
	addr   net.Addr
}

// New returns an empty Sink.
func New() *Sink {
	return &Sink{received: map[string]time.Time{}, rollouts: map[string]int{}, byShard: map[string]int{}}
}

// Export implements the OTLP trace service.
func (s *Sink) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	for _, rs := range req.GetResourceSpans() {
		shard := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == ShardAttribute {
				shard = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				s.spans++
				switch sp.GetName() {
				case RolloutRootSpan:
					s.rollouts[hex.EncodeToString(sp.GetTraceId())]++
					s.byShard[shard]++
					continue
				case RootSpan:
					s.byShard[shard]++
				default:
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
	s.addr = l.Addr()
	s.server = grpc.NewServer(grpc.MaxRecvMsgSize(64 << 20))
	collectortrace.RegisterTraceServiceServer(s.server, s)
	go func() { _ = s.server.Serve(l) }()
	return nil
}

// Addr is where Start listens (the port chosen when it was given port 0).
func (s *Sink) Addr() string { return s.addr.String() }

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

// Rollouts returns the rollout traces received and the root spans received beyond one each.
func (s *Sink) Rollouts() (traces, repeats int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.rollouts {
		traces++
		repeats += n - 1
	}
	return traces, repeats
}

// ByShard returns the root spans (Pods' and rollouts') received from each shard, by its
// readyspan.shard attribute ("" for an unsharded readyspan).
func (s *Sink) ByShard() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.byShard))
	for k, v := range s.byShard {
		out[k] = v
	}
	return out
}
