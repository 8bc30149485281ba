package otlpin

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"golang.org/x/net/netutil"
	"k8s.io/client-go/kubernetes"

	"github.com/readyspan/readyspan/access"
)

// Limits of the input, as an OpenTelemetry Collector's OTLP receiver sets them (confighttp's
// max_request_body_size and timeouts, configgrpc's max_recv_msg_size_mib and
// max_concurrent_streams): every one bounds what a sender, slow, large or many, can make
// readyspan hold.
const (
	// maxRequestBytes bounds one request once decompressed (an OTLP exporter's batch is well
	// below: 512 spans by default), and less where the in-flight bound could not admit it.
	maxRequestBytes = 16 << 20
	// DefaultInflightBytes bounds the memory of all requests being read and decoded at once;
	// past it a request is refused with the retryable answer (HTTP 429, gRPC
	// RESOURCE_EXHAUSTED with a retry delay), so a Collector in front backs off and retries.
	DefaultInflightBytes = 64 << 20
	// retryDelay is the delay a refused sender is told to wait.
	retryDelay = 2 * time.Second
	// maxConns bounds the connections open at once; more wait to be accepted.
	maxConns = 256
	// maxStreams bounds the requests in flight on one HTTP/2 (gRPC) connection.
	maxStreams = 16
)

// The HTTP server's timeouts: a slow sender's connection is closed, not kept (variables for the
// tests that wait for them).
var (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second // a whole request, headers and body
	writeTimeout      = 30 * time.Second
	idleTimeout       = 2 * time.Minute
	pingTimeout       = 15 * time.Second // an HTTP/2 connection that does not answer a ping is closed
	sendPingAfter     = time.Minute      // an idle HTTP/2 connection is pinged after this
)

// Config is the OTLP input's configuration.
type Config struct {
	// Addr is where to listen (host:port). OTLP/gRPC and OTLP/HTTP (POST /v1/traces, protobuf)
	// share it.
	Addr string
	// CertFile and KeyFile serve TLS; empty, plain text on loopback or with Insecure, a
	// self-signed certificate where senders authenticate.
	CertFile, KeyFile string
	// Insecure serves an address that is not loopback to anyone who reaches it, without TLS
	// or tokens (--otlp-receive-insecure): every sender may then write every span.
	Insecure bool
	// Hold and MaxBytes bound what is held (DefaultHold, DefaultMaxBytes when zero).
	Hold     time.Duration
	MaxBytes int64
	// MaxInflightBytes bounds the requests being read (DefaultInflightBytes when zero).
	MaxInflightBytes int64
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

// Guarded reports whether senders authenticate: on any address but loopback, unless the
// operator opened it with Insecure.
func (c *Config) Guarded() bool { return !Loopback(c.Addr) && !c.Insecure }

// Validate checks the configuration before anything listens.
func (c *Config) Validate() error {
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("--otlp-receive %q: want host:port: %w", c.Addr, err)
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return errors.New("--otlp-receive-tls-cert-file and --otlp-receive-tls-key-file go together")
	}
	if c.Hold < 0 || c.MaxBytes < 0 || c.MaxInflightBytes < 0 {
		return errors.New("--otlp-receive-hold, --otlp-receive-max-mib and --otlp-receive-inflight-mib must not be negative")
	}
	if c.MaxInflightBytes > 0 && c.MaxInflightBytes < 2*chunkCharge {
		return fmt.Errorf("--otlp-receive-inflight-mib must be at least %d", 2*chunkCharge>>20)
	}
	return nil
}

// Receiver serves the OTLP input and fills a Store.
type Receiver struct {
	store    *Store
	inflight *budget
	srv      *http.Server
	addr     net.Addr
	log      *slog.Logger
}

// Listen starts receiving on cfg.Addr into store. Where cfg.Guarded, client checks each
// sender's token and what it may write (see sender.go); Listen fails without one. Every error
// names what failed: the address, the certificate, the access rules.
func Listen(cfg Config, store *Store, client kubernetes.Interface, log *slog.Logger) (*Receiver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	maxInflight := cfg.MaxInflightBytes
	if maxInflight == 0 {
		maxInflight = DefaultInflightBytes
	}
	r := &Receiver{store: store, inflight: &budget{max: maxInflight}, log: log}
	handler, wrap, err := guard(cfg, client, log, http.HandlerFunc(r.serve))
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("--otlp-receive %s: %w", cfg.Addr, err)
	}
	if ln, err = wrap(netutil.LimitListener(ln, maxConns)); err != nil {
		return nil, fmt.Errorf("--otlp-receive: %w", err)
	}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetHTTP2(true)
	protocols.SetUnencryptedHTTP2(true) // gRPC without TLS: HTTP/2 with prior knowledge
	r.srv = &http.Server{Handler: handler, Protocols: &protocols,
		ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: readTimeout, WriteTimeout: writeTimeout, IdleTimeout: idleTimeout,
		MaxHeaderBytes: 64 << 10,
		HTTP2: &http.HTTP2Config{MaxConcurrentStreams: maxStreams, SendPingTimeout: sendPingAfter, PingTimeout: pingTimeout,
			MaxReceiveBufferPerStream: 1 << 20, MaxReceiveBufferPerConnection: 4 << 20},
		// A bad client's errors (a failed handshake) at debug, not on stderr.
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
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

// guard returns the handler as senders reach it and what wraps the listener: where cfg is
// Guarded, TLS (cfg's certificate, else a self-signed one) and every request's bearer token
// checked with the apiserver, the sender needing VerbSend on AccessPath and its grants asked;
// else TLS when a certificate is given, and open.
func guard(cfg Config, client kubernetes.Interface, log *slog.Logger, h http.Handler) (http.Handler, func(net.Listener) (net.Listener, error), error) {
	if cfg.Guarded() {
		if client == nil {
			return nil, nil, fmt.Errorf("--otlp-receive %s: senders on an address that is not loopback must authenticate, and there is no apiserver to ask (use a loopback address, or --otlp-receive-insecure)", cfg.Addr)
		}
		g, err := access.New(access.Config{Secure: true, CertFile: cfg.CertFile, KeyFile: cfg.KeyFile, Verb: VerbSend,
			Path: AccessPath, Grants: []string{VerbAnyNode, VerbAPIServer}, NextProtos: nextProtos}, client, log)
		if err != nil {
			return nil, nil, fmt.Errorf("--otlp-receive: %w", err)
		}
		return g.Handler(h), g.Wrap, nil
	}
	if cfg.CertFile == "" {
		return h, func(ln net.Listener) (net.Listener, error) { return ln, nil }, nil
	}
	cert, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("--otlp-receive-tls-cert-file: %w", err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: nextProtos}
	return h, func(ln net.Listener) (net.Listener, error) { return tls.NewListener(ln, tc), nil }, nil
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

// serve tells the two transports apart: gRPC is HTTP/2 with a gRPC content type.
func (r *Receiver) serve(rw http.ResponseWriter, req *http.Request) {
	if req.ProtoMajor == 2 && strings.HasPrefix(req.Header.Get("Content-Type"), "application/grpc") {
		r.serveGRPC(rw, req)
		return
	}
	if req.URL.Path != "/v1/traces" {
		http.NotFound(rw, req)
		return
	}
	r.serveHTTP(rw, req)
}

// file decodes a request's message and files its spans from sender, a chunk at a time.
func (r *Receiver) file(sender Sender, b []byte) error {
	fr := r.store.Request(sender)
	defer fr.End()
	return DecodeMessage(b, fr.Add)
}
