// Package agent is the node component's sending half (readyspan node): it takes the changes a
// watcher of the node's kube-proxy rules reports, adds a heartbeat, and sends both as OTLP
// spans (dataplane's contract) to the central readyspan's --otlp-receive, under the node-bound
// ServiceAccount token of the DaemonSet's Pod. It never blocks the watcher: spans wait in a
// bounded queue (the oldest dropped and counted past it), go out in batches, and are retried
// with backoff while the receiver is down.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/readyspan/readyspan/dataplane"
)

// Watcher reads the node's rules: dataplane/proxyrules' Watcher, or a fake in tests.
type Watcher interface {
	// Run reports every change after the initial set until ctx ends.
	Run(ctx context.Context, out func([]dataplane.Change)) error
	// Current is kube-proxy's mode as the rules show it ("" until they have been read, or on a
	// node without kube-proxy) and how many endpoints are in some rotation.
	Current() (mode string, endpoints int)
}

// Defaults for Config.
const (
	// DefaultQueue bounds the spans waiting for the receiver. A change is ~0.5 KB queued, so
	// the bound is ~5 MB; at a rolling update's pace (tens of changes per second on a node) it
	// holds minutes of outage.
	DefaultQueue      = 10000
	DefaultBatch      = 256
	DefaultMaxBackoff = 30 * time.Second
	// DefaultShutdownGrace is how long a stopping agent keeps sending what is queued.
	DefaultShutdownGrace = 5 * time.Second
	// firstSyncPoll is how often the agent looks whether the watcher has read the rules yet,
	// to send the first heartbeat as soon as it can say the node is observed.
	firstSyncPoll = 200 * time.Millisecond
)

// Drop reasons (readyspan_node_export_dropped_total{reason}).
const (
	DropQueueFull    = "queue_full"    // over the queue's bound with the receiver answering
	DropExportFailed = "export_failed" // over the bound while exports were failing
	DropRejected     = "rejected"      // the receiver refused them for good (400, 413, partial success)
	DropShutdown     = "shutdown"      // still queued when a stopping agent's grace ran out
)

// Config is the agent's settings; Node and Endpoint are required.
type Config struct {
	Node string
	// Endpoint is the receiver: host:port (TLS unless Insecure) or an http(s):// URL; the path
	// defaults to /v1/traces.
	Endpoint string
	// TokenFile holds the bearer token (a projected ServiceAccount token), read again for
	// every request; empty sends none (a loopback or --otlp-receive-insecure receiver).
	TokenFile string
	// CAFile is the PEM CA that signed the receiver's certificate (default: the system's).
	CAFile string
	// Insecure sends in plain text: for loopback or a trusted network only.
	Insecure bool
	// MetricsAddr serves /metrics and /healthz; empty serves nothing.
	MetricsAddr string

	Queue, Batch               int
	InitialBackoff, MaxBackoff time.Duration
	ShutdownGrace              time.Duration

	Log      *slog.Logger
	Registry *prometheus.Registry
	// Now and After are the clock (tests inject one): the heartbeat's times and waits.
	Now   func() time.Time
	After func(time.Duration) <-chan time.Time
}

// Agent sends a node's rule changes and heartbeats to the central readyspan.
type Agent struct {
	cfg     Config
	watcher Watcher
	target  target
	queue   *queue
	m       *metrics
	log     *slog.Logger

	mu        sync.Mutex
	failSince time.Time
	lastErr   string
}

// Validate checks the settings without sending anything: the node name, the endpoint and
// how to reach it, the CA and token files.
func (c Config) Validate() error {
	_, err := c.resolve()
	return err
}

func (c Config) resolve() (target, error) {
	if c.Node == "" {
		return target{}, errors.New("no node name: set --node-name or NODE_NAME (the DaemonSet sets it from spec.nodeName)")
	}
	return resolveTarget(c)
}

// New checks cfg and prepares the agent; it sends nothing until Run.
func New(cfg Config, w Watcher) (*Agent, error) {
	t, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	if cfg.Queue <= 0 {
		cfg.Queue = DefaultQueue
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.InitialBackoff <= 0 {
		cfg.InitialBackoff = time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = DefaultShutdownGrace
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.After == nil {
		cfg.After = time.After
	}
	a := &Agent{cfg: cfg, watcher: w, target: t, log: cfg.Log}
	a.m = newMetrics(cfg.Registry)
	a.queue = newQueue(cfg.Queue, a.m.drop)
	return a, nil
}

// Run sends until ctx ends or the watcher fails, then keeps sending what is queued for
// ShutdownGrace. The metrics address, when set, is listened on first, so a port in use is an
// error at start, not a silent absence.
func (a *Agent) Run(ctx context.Context) error {
	var srv *http.Server
	if a.cfg.MetricsAddr != "" {
		ln, err := net.Listen("tcp", a.cfg.MetricsAddr)
		if err != nil {
			return fmt.Errorf("metrics address: %w", err)
		}
		srv = &http.Server{Handler: a.Handler(), ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
	}
	a.log.Info("Sending the node's kube-proxy rule changes", "node", a.cfg.Node, "endpoint", a.target.url)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	sent := make(chan struct{})
	// wctx, not ctx: a watcher that fails ends the agent too, and starts the send grace.
	go func() { defer close(sent); a.sendLoop(wctx) }()
	beat := make(chan struct{})
	go func() { defer close(beat); a.heartbeat(wctx) }()
	err := a.watcher.Run(wctx, a.changes)
	stop()
	<-beat
	a.queue.close()
	<-sent
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("watch the node's rules: %w", err)
	}
	return nil
}

// changes is the watcher's callback: count and queue, never wait.
func (a *Agent) changes(cs []dataplane.Change) {
	its := make([]item, 0, len(cs))
	for _, c := range cs {
		if c.Node == "" {
			c.Node = a.cfg.Node
		}
		its = append(its, item{name: c.SpanName(), attrs: c.Attrs(), at: c.At})
		a.m.changes.WithLabelValues(c.SpanName()).Inc()
	}
	a.m.queued.Set(float64(a.queue.push(its...)))
}

// heartbeat sends rules.synced once the watcher has read the rules (its mode is known) and
// every dataplane.SyncEvery after. A node whose rules show no kube-proxy sends none: the
// heartbeat tells the central readyspan to wait for this node's rules, which would never come.
func (a *Agent) heartbeat(ctx context.Context) {
	wait := firstSyncPoll
	for {
		mode, n := a.watcher.Current()
		a.m.endpoints.Set(float64(n))
		if mode != "" {
			s := dataplane.Sync{Node: a.cfg.Node, Mode: mode, At: a.cfg.Now(), Endpoints: n}
			a.m.syncs.Inc()
			a.m.queued.Set(float64(a.queue.push(item{name: dataplane.SpanSynced, attrs: s.Attrs(), at: s.At})))
			wait = dataplane.SyncEvery
		}
		select {
		case <-ctx.Done():
			return
		case <-a.cfg.After(wait):
		}
	}
}
