package otlpin

import (
	"compress/gzip"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	_ "google.golang.org/grpc/encoding/gzip" // OTLP exporters (a Collector's by default) compress
	"google.golang.org/protobuf/proto"
	"k8s.io/client-go/kubernetes"

	"github.com/readyspan/readyspan/access"
)

// maxRequestBytes bounds one request, compressed or not (an OTLP exporter's batch is well
// below: 512 spans by default).
const maxRequestBytes = 16 << 20

// Config is the OTLP input's configuration.
type Config struct {
	// Addr is where to listen (host:port). OTLP/gRPC and OTLP/HTTP (POST /v1/traces, protobuf)
	// share it.
	Addr string
	// CertFile and KeyFile serve TLS; empty, plain text (TLS optional), unless Access applies.
	CertFile, KeyFile string
	// Access is the metrics address's access configuration. Where Addr is not a loopback
	// address, it applies here too: with Secure, TLS (a self-signed certificate without
	// CertFile) and every request's bearer token checked by the apiserver, as for /metrics, the
	// non-resource path being the request's (/v1/traces, or the gRPC method's) and the verb
	// create.
	Access access.Config
	// Hold and MaxBytes bound what is held (DefaultHold, DefaultMaxBytes when zero).
	Hold     time.Duration
	MaxBytes int64
}

// Loopback reports whether addr's host is a loopback address (or localhost).
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Validate checks the configuration before anything listens.
func (c *Config) Validate() error {
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("--otlp-receive %q: want host:port: %w", c.Addr, err)
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return errors.New("--otlp-receive-tls-cert-file and --otlp-receive-tls-key-file go together")
	}
	if c.Hold < 0 || c.MaxBytes < 0 {
		return errors.New("--otlp-receive-hold and --otlp-receive-max-mib must not be negative")
	}
	return nil
}

// Receiver serves the OTLP input and fills a Store.
type Receiver struct {
	store *Store
	srv   *http.Server
	grpc  *grpc.Server
	addr  net.Addr
	log   *slog.Logger
}

// Listen starts receiving on cfg.Addr into store. client checks tokens when the access rules
// apply (see Config.Access).
func Listen(cfg Config, store *Store, client kubernetes.Interface, log *slog.Logger) (*Receiver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Receiver{store: store, log: log}
	r.grpc = grpc.NewServer(grpc.MaxRecvMsgSize(maxRequestBytes))
	collectortrace.RegisterTraceServiceServer(r.grpc, traceService{r: r})
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/traces", r.serveHTTP)
	var handler http.Handler = http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		if req.ProtoMajor == 2 && strings.HasPrefix(req.Header.Get("Content-Type"), "application/grpc") {
			r.grpc.ServeHTTP(rw, req)
			return
		}
		mux.ServeHTTP(rw, req)
	})
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetHTTP2(true)
	protocols.SetUnencryptedHTTP2(true) // gRPC without TLS: HTTP/2 with prior knowledge
	r.srv = &http.Server{Handler: handler, Protocols: &protocols, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 5 * time.Minute,
		// A bad client's errors (a failed handshake) at debug, not on stderr.
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	ln, handler, err := listen(cfg, client, handler, log)
	if err != nil {
		return nil, fmt.Errorf("listen on --otlp-receive %s: %w", cfg.Addr, err)
	}
	r.srv.Handler = handler
	r.addr = ln.Addr()
	go func() {
		if err := r.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("OTLP input stopped", "err", err)
		}
	}()
	return r, nil
}

// h2 is offered to TLS clients first: gRPC needs HTTP/2.
var nextProtos = []string{"h2", "http/1.1"}

// listen opens the listener and guards the handler: where the metrics address's access rules
// apply (Addr not loopback, Access.Secure) as /metrics is guarded; else TLS when a certificate
// is given, and open.
func listen(cfg Config, client kubernetes.Interface, h http.Handler, log *slog.Logger) (net.Listener, http.Handler, error) {
	if !Loopback(cfg.Addr) && cfg.Access.Secure {
		acc := access.Config{Secure: true, CertFile: cfg.CertFile, KeyFile: cfg.KeyFile, Verb: "create", NextProtos: nextProtos}
		if acc.CertFile == "" {
			acc.CertFile, acc.KeyFile = cfg.Access.CertFile, cfg.Access.KeyFile
		}
		guard, err := access.New(acc, client, log)
		if err != nil {
			return nil, nil, err
		}
		ln, err := guard.Listen(cfg.Addr)
		return ln, guard.Handler(h), err
	}
	var cert tls.Certificate
	if cfg.CertFile != "" {
		var err error
		if cert, err = tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile); err != nil {
			return nil, nil, fmt.Errorf("load the OTLP input's TLS certificate: %w", err)
		}
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil || cfg.CertFile == "" {
		return ln, h, err
	}
	return tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: nextProtos}), h, nil
}

// Addr is the address the receiver listens on.
func (r *Receiver) Addr() net.Addr { return r.addr }

// Shutdown stops receiving; safe on a nil Receiver and twice.
func (r *Receiver) Shutdown(ctx context.Context) error {
	if r == nil || r.srv == nil {
		return nil
	}
	return r.srv.Shutdown(ctx)
}

type traceService struct {
	collectortrace.UnimplementedTraceServiceServer
	r *Receiver
}

func (t traceService) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	t.r.store.Add(Decode(req))
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// serveHTTP is OTLP/HTTP: POST /v1/traces, a protobuf ExportTraceServiceRequest, gzip or not.
func (r *Receiver) serveHTTP(rw http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		http.Error(rw, "POST an OTLP ExportTraceServiceRequest", http.StatusMethodNotAllowed)
		return
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		http.Error(rw, fmt.Sprintf("unsupported content type %q: readyspan reads OTLP/HTTP as application/x-protobuf", ct), http.StatusUnsupportedMediaType)
		return
	}
	var body io.Reader = http.MaxBytesReader(rw, req.Body, maxRequestBytes)
	switch enc := req.Header.Get("Content-Encoding"); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(body)
		if err != nil {
			http.Error(rw, "bad gzip body: "+err.Error(), http.StatusBadRequest)
			return
		}
		defer zr.Close()
		body = io.LimitReader(zr, maxRequestBytes+1)
	default:
		http.Error(rw, fmt.Sprintf("unsupported content encoding %q", enc), http.StatusUnsupportedMediaType)
		return
	}
	b, err := io.ReadAll(body)
	if err != nil || len(b) > maxRequestBytes {
		http.Error(rw, "request too large or unreadable", http.StatusRequestEntityTooLarge)
		return
	}
	var msg collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &msg); err != nil {
		http.Error(rw, "not an OTLP ExportTraceServiceRequest: "+err.Error(), http.StatusBadRequest)
		return
	}
	r.store.Add(Decode(&msg))
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	rw.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = rw.Write(out)
}
