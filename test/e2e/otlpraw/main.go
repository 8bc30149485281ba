// Command otlpraw keeps the OTLP trace requests it receives (OTLP/gRPC, and OTLP/HTTP with
// protobuf bodies, on the same address), as received: each request's protobuf encoding,
// preceded by its length as a uvarint, appended to one file. It makes the
// captures of the components' own spans that readyspan's OTLP input is tested on
// (otlpin/testdata; deploy/local/scripts/capture-components.sh runs it where readyspan's
// --otlp-receive would listen).
//
//	otlpraw --listen 127.0.0.1:4321 --out components.otlp
package main

import (
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

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
	listen := flag.String("listen", "127.0.0.1:4321", "address to receive OTLP/gRPC and OTLP/HTTP on")
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
	r := &raw{out: f}
	g := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(g, r)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", r.serveHTTP)
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true) // gRPC without TLS: HTTP/2 with prior knowledge
	srv := &http.Server{Protocols: &protocols, ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if req.ProtoMajor == 2 && strings.HasPrefix(req.Header.Get("Content-Type"), "application/grpc") {
				g.ServeHTTP(w, req)
				return
			}
			mux.ServeHTTP(w, req)
		})}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); _ = srv.Shutdown(context.Background()) }()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// serveHTTP keeps one OTLP/HTTP request (protobuf, gzip-compressed or not), as the
// OpenTelemetry Collector's otlphttp exporter sends it.
func (r *raw) serveHTTP(w http.ResponseWriter, req *http.Request) {
	var body io.Reader = http.MaxBytesReader(w, req.Body, 64<<20)
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var in collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	resp, err := r.Export(req.Context(), &in)
	if err == nil {
		b, err = proto.Marshal(resp)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(b)
}
