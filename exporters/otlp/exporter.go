// Package otlp exports readyspan's traces over OTLP (gRPC or HTTP), without ever blocking the
// watch: traces are queued, sent in batches (a trace waits up to linger for company), retried
// with backoff while the backend is down, and dropped (and counted) when the queue is full or
// retries run out.
package otlp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/readyspan/readyspan/node"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/safetext"
)

// Defaults for Config.
const (
	// DefaultQueueTraces and DefaultQueueBytes bound what waits for the backend. Measured
	// (TestQueueCostMeasured): a bare Pod's trace is 9 spans, ~3.0 KB by the estimate the byte
	// bound counts (queueBytes) and ~3.7 KB of heap while queued (5.1 KB before a span's bounds
	// became fields, 4.2 KB before a span lost its copy of the trace ID), 1.24 heap bytes per
	// estimated byte; a Deployment Pod with an init container and a Service has ~25 spans, ~8 KB.
	// So 32 MiB of estimate holds ~4 000–10 000 traces (a 5-minute outage at 13–35 Pod startups
	// per second) in ≤ ~40 MiB of heap, inside the manifests' 256Mi limit next to the informers'
	// share; the count bound caps a queue of small traces.
	DefaultQueueTraces = 10000
	DefaultQueueBytes  = 32 << 20
	DefaultBatchSize   = 64
	DefaultMaxBackoff  = 30 * time.Second
	// grpcMaxReconnect caps gRPC's wait between reconnects to a backend that was down.
	grpcMaxReconnect = 5 * time.Second
	// attemptTimeout bounds one export request: a backend that hangs is a failing backend.
	attemptTimeout = 10 * time.Second
)

// Drop reasons, as counted by Stats.TraceDropped.
const (
	// DropExportFailed: the queue was over its bound while the backend was failing, so the
	// oldest trace was dropped to make room.
	DropExportFailed = "export_failed"
	// DropQueueFull: the queue was over its bound with the backend answering (a burst faster
	// than the backend takes it); the oldest trace was dropped.
	DropQueueFull = "queue_full"
	// DropShutdown: still queued when Shutdown's deadline ran out, or exported after Shutdown.
	DropShutdown = "shutdown"
)

// Config selects the OTLP endpoint. Empty fields are left to the standard OTEL_EXPORTER_OTLP_*
// environment variables (and their defaults), so a flag is passed only when the user set it.
type Config struct {
	Protocol string // "grpc" (default) or "http" (http/protobuf)
	Endpoint string // host:port, or a URL
	Insecure bool
	Headers  map[string]string

	// QueueTraces and QueueBytes bound the traces waiting for the backend, by count and by
	// their estimated OTLP size; past either, the oldest are dropped (and counted).
	QueueTraces int
	QueueBytes  int64
	// InitialBackoff is the first retry delay (default 1s), doubled up to MaxBackoff (30s).
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
	// ResourceAttributes are said of every span's resource besides its service name (the
	// shard, readyspan.shard, when several split the cluster).
	ResourceAttributes map[string]string
}

// Stats receives the exporter's outcomes, for readyspan's self metrics.
type Stats interface {
	TraceExported()
	TraceDropped(reason string)
	ExportError()
}

// Status is the exporter's state now: what waits for the backend and whether it is failing.
type Status struct {
	Traces int
	Bytes  int64
	// FailingSince is the first failure of the current run of failed attempts; zero while the
	// backend answers.
	FailingSince time.Time
	LastError    string
}

// queued is one trace waiting for the backend.
type queued struct {
	trace traceSpans
	bytes int64
	at    time.Time // when it was queued
	// sending: part of an export attempt now, so not dropped to make room until the attempt
	// ends (it may succeed, and a trace must not be counted both dropped and exported).
	sending bool
}

// Exporter queues traces and sends them to an OTLP backend. The queue is bounded by count and
// by bytes; past the bound the oldest traces are dropped, each counted once.
type Exporter struct {
	cfg    Config
	client otlptrace.Client
	stats  Stats
	log    *slog.Logger
	res    *resources
	// blocks are the messages of the request being sent, kept for the next one (send, only
	// ever called by loop).
	blocks requestBlocks

	mu      sync.Mutex
	queue   []*queued // oldest first
	bytes   int64
	status  Status
	closed  bool
	started bool
	wake    chan struct{} // a trace was queued or Shutdown began
	flush   chan struct{} // closed by Shutdown: retry now, not at the end of the backoff
	stop    chan struct{} // Shutdown's deadline ran out: stop sending
	done    chan struct{}

	stopOnce sync.Once
}

// New creates the exporter; it does not connect until the first export.
func New(ctx context.Context, cfg Config, stats Stats, log *slog.Logger) (*Exporter, error) {
	client, err := newClient(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return NewWithClient(client, cfg, stats, log), nil
}

// NewWithClient wraps any started OTLP client (tests use in-memory ones). The messages of a
// request are reused once UploadTraces returns: a client that keeps them must copy them
// (proto.Clone), as the OpenTelemetry clients, which marshal the request, need not.
func NewWithClient(client otlptrace.Client, cfg Config, stats Stats, log *slog.Logger) *Exporter {
	if cfg.QueueTraces <= 0 {
		cfg.QueueTraces = DefaultQueueTraces
	}
	if cfg.QueueBytes <= 0 {
		cfg.QueueBytes = DefaultQueueBytes
	}
	if cfg.InitialBackoff <= 0 {
		cfg.InitialBackoff = time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Exporter{cfg: cfg, client: client, stats: stats, log: log, res: newResources(cfg.ResourceAttributes),
		wake: make(chan struct{}, 1), flush: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
}

// newClient makes and starts the OTLP client of cfg's protocol: the OpenTelemetry exporters'
// own, to which readyspan hands requests it builds itself (resourceSpans). A client does not
// connect until its first request.
func newClient(ctx context.Context, cfg Config) (otlptrace.Client, error) {
	var client otlptrace.Client
	switch cfg.Protocol {
	case "", "grpc":
		opts := []otlptracegrpc.Option{otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false}),
			// The queue retries with its own backoff. gRPC's reconnect backoff grows to 120 s
			// on its own, and while it waits every export fails at once: after a 5-minute
			// outage, measured, the traces went out 91 s after the backend was back.
			otlptracegrpc.WithDialOption(grpc.WithConnectParams(grpc.ConnectParams{
				Backoff:           backoff.Config{BaseDelay: time.Second, Multiplier: 1.6, Jitter: 0.2, MaxDelay: grpcMaxReconnect},
				MinConnectTimeout: 5 * time.Second,
			}))}
		if cfg.Endpoint != "" {
			opts = append(opts, endpointGRPC(cfg.Endpoint))
		}
		if cfg.Insecure {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		if len(cfg.Headers) > 0 {
			opts = append(opts, otlptracegrpc.WithHeaders(cfg.Headers))
		}
		client = otlptracegrpc.NewClient(opts...)
	case "http", "http/protobuf":
		opts := []otlptracehttp.Option{otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false})}
		if cfg.Endpoint != "" {
			opts = append(opts, endpointHTTP(cfg.Endpoint))
		}
		if cfg.Insecure {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		if len(cfg.Headers) > 0 {
			opts = append(opts, otlptracehttp.WithHeaders(cfg.Headers))
		}
		client = otlptracehttp.NewClient(opts...)
	default:
		return nil, fmt.Errorf("unknown OTLP protocol %q: use grpc or http", cfg.Protocol)
	}
	if err := client.Start(ctx); err != nil {
		return nil, err
	}
	return client, nil
}

func endpointGRPC(ep string) otlptracegrpc.Option {
	if hasScheme(ep) {
		return otlptracegrpc.WithEndpointURL(ep)
	}
	return otlptracegrpc.WithEndpoint(ep)
}

func endpointHTTP(ep string) otlptracehttp.Option {
	if hasScheme(ep) {
		return otlptracehttp.WithEndpointURL(ep)
	}
	return otlptracehttp.WithEndpoint(ep)
}

func hasScheme(s string) bool {
	for _, p := range []string{"http://", "https://"} {
		if len(s) > len(p) && s[:len(p)] == p {
			return true
		}
	}
	return false
}

// Export queues a Pod's trace. It never blocks: over the queue's bound the oldest trace is
// dropped and counted.
func (e *Exporter) Export(t *phases.Trace) { e.enqueue(traceSpans{t.TraceID, t.Spans}) }

// ExportRollout queues a rollout's trace, like Export.
func (e *Exporter) ExportRollout(t *rollout.Trace) { e.enqueue(traceSpans{t.TraceID, t.Spans}) }

// ExportNode queues a node startup's trace, like Export.
func (e *Exporter) ExportNode(t *node.Trace) { e.enqueue(traceSpans{t.TraceID, t.Spans}) }

func (e *Exporter) enqueue(t traceSpans) {
	q := &queued{trace: t, bytes: queueBytes(t.spans), at: time.Now()}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		e.stats.TraceDropped(DropShutdown)
		return
	}
	e.queue = append(e.queue, q)
	e.bytes += q.bytes
	e.makeRoom()
	e.status.Traces, e.status.Bytes = len(e.queue), e.bytes
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// makeRoom drops the oldest traces not in an export attempt until the queue is within its
// bounds. The newest trace always stays, even alone over the byte bound. Called with mu held.
func (e *Exporter) makeRoom() {
	reason := DropQueueFull
	if !e.status.FailingSince.IsZero() {
		reason = DropExportFailed
	}
	for i := 0; i < len(e.queue)-1 && (len(e.queue) > e.cfg.QueueTraces || e.bytes > e.cfg.QueueBytes); {
		if e.queue[i].sending {
			i++
			continue
		}
		e.bytes -= e.queue[i].bytes
		e.queue[i] = nil
		e.queue = append(e.queue[:i], e.queue[i+1:]...)
		e.stats.TraceDropped(reason)
	}
}

// Status reports what waits for the backend and whether exports are failing.
func (e *Exporter) Status() Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.status
}

// Start runs the send loop until Shutdown.
func (e *Exporter) Start(ctx context.Context) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.started || e.closed {
		return
	}
	e.started = true
	go e.loop()
}

// loop sends the oldest traces in batches. A failed batch stays at the head of the queue and is
// tried again after an exponential backoff, with whatever newer traces fit in the batch by
// then; only the queue's bound ever drops a trace.
func (e *Exporter) loop() {
	defer close(e.done)
	backoff := e.cfg.InitialBackoff
	flush := e.flush
	for {
		batch := e.nextBatch()
		if batch == nil {
			return
		}
		err := e.send(batch)
		if err == nil {
			backoff = e.cfg.InitialBackoff
			continue
		}
		select {
		case <-time.After(backoff):
		case <-flush:
			flush = nil // one immediate retry at Shutdown, then the backoff again
		case <-e.stop:
		}
		if backoff *= 2; backoff > e.cfg.MaxBackoff {
			backoff = e.cfg.MaxBackoff
		}
	}
}

// linger is how long a trace may wait in the queue for others to share its request: each
// request has a cost of its own (the gRPC call, its HTTP/2 frames, the backend's answer), as
// large as marshalling its traces when they went out 1.7 to a request at a few hundred Pods/s.
// It adds at most that much to a trace's export lag.
const linger = 10 * time.Millisecond

// nextBatch waits for queued traces and marks the oldest DefaultBatchSize as being sent, once
// they fill a batch or the oldest has lingered. It returns nil when the exporter stops: closed
// with nothing left, or out of time.
func (e *Exporter) nextBatch() []*queued {
	for {
		e.mu.Lock()
		if len(e.queue) > 0 {
			select {
			case <-e.stop:
				e.dropQueued()
				e.mu.Unlock()
				return nil
			default:
			}
			if wait := e.lingerLeft(); wait > 0 {
				e.mu.Unlock()
				e.waitMore(wait)
				continue
			}
			n := min(len(e.queue), DefaultBatchSize)
			batch := make([]*queued, n)
			copy(batch, e.queue[:n])
			for _, q := range batch {
				q.sending = true
			}
			e.mu.Unlock()
			return batch
		}
		closed := e.closed
		e.mu.Unlock()
		if closed {
			return nil
		}
		select {
		case <-e.wake:
		case <-e.stop:
		}
	}
}

// lingerLeft is how much longer the head of the queue may wait for company: none once a batch
// is full or the exporter is closing. Called with mu held.
func (e *Exporter) lingerLeft() time.Duration {
	if e.closed || len(e.queue) >= DefaultBatchSize {
		return 0
	}
	return linger - time.Since(e.queue[0].at)
}

// waitMore waits up to d for another trace, or for Shutdown.
func (e *Exporter) waitMore(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-e.wake:
	case <-e.flush:
	case <-e.stop:
	}
}

// dropQueued counts what is still queued as dropped at shutdown. Called with mu held.
func (e *Exporter) dropQueued() {
	for range e.queue {
		e.stats.TraceDropped(DropShutdown)
	}
	if len(e.queue) > 0 {
		e.log.Error("Dropping queued traces at shutdown: the OTLP backend did not take them in time", "traces", len(e.queue))
	}
	e.queue, e.bytes = nil, 0
	e.status.Traces, e.status.Bytes = 0, 0
}

// send makes one export attempt of a batch. On success the batch leaves the queue; on failure
// it stays (a trace dropped meanwhile to make room is already counted).
func (e *Exporter) send(batch []*queued) error {
	traces := make([]traceSpans, len(batch))
	for i, q := range batch {
		traces[i] = q.trace
	}
	request := e.blocks.request(traces, e.res)
	ctx, cancel := context.WithTimeout(context.Background(), attemptTimeout)
	go func() {
		select {
		case <-e.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := e.client.UploadTraces(ctx, request)
	cancel()
	e.blocks.release() // the client has marshalled the request: its messages are free
	if err != nil {
		err = fmt.Errorf("traces export: %w", err) // as the OpenTelemetry exporter says it
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	for _, q := range batch {
		q.sending = false
	}
	if err != nil {
		e.stats.ExportError()
		msg := safetext.OneLine(err) // a backend's HTML error page on one line
		if e.status.FailingSince.IsZero() {
			e.status.FailingSince = time.Now()
			e.log.Warn("OTLP export failing; keeping traces in the queue and retrying with backoff", "err", msg, "queuedTraces", len(e.queue), "queuedBytes", e.bytes)
		} else if msg != e.status.LastError {
			e.log.Warn("OTLP export still failing", "err", msg, "failingFor", time.Since(e.status.FailingSince).Round(time.Second), "queuedTraces", len(e.queue), "queuedBytes", e.bytes)
		}
		e.status.LastError = msg
		e.makeRoom() // the bound may have been passed while the batch was protected
		e.status.Traces, e.status.Bytes = len(e.queue), e.bytes
		return err
	}
	// The batch is still the head of the queue: only makeRoom removes traces, and never one
	// being sent, and new traces go to the tail.
	for i, q := range e.queue[:len(batch)] {
		e.bytes -= q.bytes
		e.queue[i] = nil
		e.stats.TraceExported()
	}
	e.queue = e.queue[len(batch):]
	if !e.status.FailingSince.IsZero() {
		e.log.Info("OTLP export recovered", "failedFor", time.Since(e.status.FailingSince).Round(time.Second), "queuedTraces", len(e.queue))
		e.status.FailingSince, e.status.LastError = time.Time{}, ""
	}
	e.status.Traces, e.status.Bytes = len(e.queue), e.bytes
	return nil
}

// Shutdown stops accepting traces, sends what is queued (until ctx ends; what is left then is
// counted as dropped) and closes the connection. It is safe to call more than once, and before
// Start (queued traces are then counted as dropped).
func (e *Exporter) Shutdown(ctx context.Context) error {
	var err error
	e.stopOnce.Do(func() {
		e.mu.Lock()
		e.closed = true
		started := e.started
		close(e.flush)
		select {
		case e.wake <- struct{}{}:
		default:
		}
		if !started {
			e.dropQueued()
		}
		e.mu.Unlock()
		if started {
			select {
			case <-e.done:
			case <-ctx.Done():
				close(e.stop)
				<-e.done
				err = errors.Join(err, fmt.Errorf("flush traces: %w", ctx.Err()))
			}
		}
		err = errors.Join(err, e.client.Stop(ctx))
	})
	return err
}

// queueBytes estimates a trace's OTLP size: the strings it carries plus a fixed cost per span,
// event, link and attribute (IDs, times, tags). It is what the byte bound counts.
func queueBytes(spans []phases.Span) int64 {
	n := int64(0)
	for i := range spans {
		s := &spans[i]
		var bounds [8]phases.Attr
		n += 64 + int64(len(s.Name)+len(s.Service)+len(s.StatusMessage)) + attrBytes(s.BoundAttrs(bounds[:0])) + attrBytes(s.Attrs)
		for _, ev := range s.Events() {
			n += 24 + int64(len(ev.Name)) + attrBytes(ev.Attrs)
		}
		for _, l := range s.Links() {
			n += 40 + attrBytes(l.Attrs)
		}
	}
	return n
}

func attrBytes(as []phases.Attr) int64 {
	n := int64(0)
	for _, a := range as {
		n += 12 + int64(len(a.Key))
		if v, ok := a.Value.(string); ok {
			n += int64(len(v))
		}
	}
	return n
}
