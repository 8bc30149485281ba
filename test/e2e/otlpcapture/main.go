// Command otlpcapture is the end-to-end tests' witness of what readyspan exported. It is an
// OTLP/gRPC trace receiver that forwards every request unchanged to the next receiver (the local
// Jaeger) and, once that receiver has accepted it, appends each span of the request to a JSON-lines
// file: one line per span received, so a trace exported twice shows up twice. Jaeger cannot serve
// as that witness: its query layer may merge byte-identical duplicate spans.
//
//	otlpcapture --listen 127.0.0.1:4319,10.88.77.1:4319 --forward 127.0.0.1:4317 --out .local/e2e/otlp-capture.jsonl
//
// A request the forward target refuses is refused too and not written, so readyspan's retry of it
// is not counted twice. The fault suite also makes it a bad backend: --delay answers every request
// that much later (a slow backend), --refuse-for refuses every request as Unavailable for that
// long after it starts (a backend answering errors).
package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// Line is one captured span. The e2e tests decode the same fields.
type Line struct {
	TraceID      string    `json:"trace_id"`
	SpanID       string    `json:"span_id"`
	ParentSpanID string    `json:"parent_span_id,omitempty"`
	Name         string    `json:"name"`
	Service      string    `json:"service"`
	Received     time.Time `json:"received"`
}

type capture struct {
	collectortrace.UnimplementedTraceServiceServer
	forward    collectortrace.TraceServiceClient
	mu         sync.Mutex
	out        *os.File
	delay      time.Duration // before each answer
	refuseTill time.Time     // every request before it is refused
}

func (c *capture) Export(ctx context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	if time.Now().Before(c.refuseTill) {
		return nil, status.Error(codes.Unavailable, "otlpcapture: refusing requests (--refuse-for)")
	}
	if c.delay > 0 {
		select {
		case <-time.After(c.delay):
		case <-ctx.Done():
			return nil, ctx.Err() // the client gave up: nothing received, nothing written
		}
	}
	resp, err := c.forward.Export(ctx, req)
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	var buf []byte
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				l := Line{TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					Name: s.GetName(), Service: service, Received: now}
				if p := s.GetParentSpanId(); len(p) > 0 {
					l.ParentSpanID = hex.EncodeToString(p)
				}
				b, _ := json.Marshal(l)
				buf = append(append(buf, b...), '\n')
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.out.Write(buf); err != nil {
		return nil, fmt.Errorf("write capture: %w", err)
	}
	return resp, nil
}

func main() {
	listen := flag.String("listen", "127.0.0.1:4319", "OTLP/gRPC addresses to receive on, comma-separated")
	forward := flag.String("forward", "127.0.0.1:4317", "OTLP/gRPC receiver to forward every request to")
	out := flag.String("out", "otlp-capture.jsonl", "JSON-lines file the spans are appended to")
	delay := flag.Duration("delay", 0, "answer every request this much later: a slow backend")
	refuseFor := flag.Duration("refuse-for", 0, "refuse every request as Unavailable for this long after starting: a backend answering errors")
	flag.Parse()
	c := &capture{delay: *delay, refuseTill: time.Now().Add(*refuseFor)}
	if err := run(c, *listen, *forward, *out); err != nil {
		fmt.Fprintln(os.Stderr, "otlpcapture:", err)
		os.Exit(1)
	}
}

func run(c *capture, listen, forward, out string) error {
	f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open capture file: %w", err)
	}
	defer f.Close()
	conn, err := grpc.NewClient(forward, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("dial %s: %w", forward, err)
	}
	defer conn.Close()
	var listeners []net.Listener
	for _, addr := range strings.Split(listen, ",") {
		lis, err := net.Listen("tcp", strings.TrimSpace(addr))
		if err != nil {
			return err
		}
		listeners = append(listeners, lis)
	}
	srv := grpc.NewServer()
	c.forward, c.out = collectortrace.NewTraceServiceClient(conn), f
	collectortrace.RegisterTraceServiceServer(srv, c)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		srv.GracefulStop()
	}()
	errs := make(chan error, len(listeners))
	for _, lis := range listeners {
		go func() { errs <- srv.Serve(lis) }()
	}
	return <-errs
}
