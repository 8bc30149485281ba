// Command otlpraw keeps the OTLP/gRPC trace requests it receives, as received: each request's
// protobuf encoding, preceded by its length as a uvarint, appended to one file. It makes the
// captures of the components' own spans that readyspan's OTLP input is tested on
// (otlpin/testdata; deploy/local/scripts/capture-components.sh runs it where readyspan's
// --otlp-receive would listen).
//
//	otlpraw --listen 127.0.0.1:4321 --out components.otlp
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	_ "google.golang.org/grpc/encoding/gzip" // a Collector's OTLP exporter compresses by default
	"google.golang.org/protobuf/proto"
)

type raw struct {
	collectortrace.UnimplementedTraceServiceServer
	mu  sync.Mutex
	out *os.File
}

func (r *raw) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	b, err := proto.Marshal(req)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := r.out.Write(binary.AppendUvarint(nil, uint64(len(b)))); err != nil {
		return nil, err
	}
	if _, err := r.out.Write(b); err != nil {
		return nil, err
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

func main() {
	listen := flag.String("listen", "127.0.0.1:4321", "address to receive OTLP/gRPC on")
	out := flag.String("out", "", "file to append the requests to")
	flag.Parse()
	if err := run(*listen, *out); err != nil {
		fmt.Fprintln(os.Stderr, "otlpraw:", err)
		os.Exit(1)
	}
}

func run(listen, out string) error {
	if out == "" {
		return fmt.Errorf("--out is required")
	}
	f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, &raw{out: f})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); srv.GracefulStop() }()
	return srv.Serve(ln)
}
