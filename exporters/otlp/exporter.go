package otlp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
)

// Defaults for Config.
const (
	DefaultQueueSize  = 4096
	DefaultBatchSize  = 64
	DefaultMaxBackoff = 30 * time.Second
	// DefaultGiveUpAfter bounds how long one batch is retried while the backend is down before
	// it is dropped (and counted): the queue behind it must keep moving.
	DefaultGiveUpAfter = 5 * time.Minute
)

// Config selects the OTLP endpoint. Empty fields are left to the standard OTEL_EXPORTER_OTLP_*
// environment variables (and their defaults), so a flag is passed only when the user set it.
type Config struct {
	Protocol string // "grpc" (default) or "http" (http/protobuf)
	Endpoint string // host:port, or a URL
	Insecure bool
	Headers  map[string]string

	QueueSize   int
	GiveUpAfter time.Duration
	// InitialBackoff is the first retry delay (default 1s), doubled up to 30s.
	InitialBackoff time.Duration
}

// Stats receives the exporter's outcomes, for readyspan's self metrics.
type Stats interface {
	TraceExported()
	TraceDropped(reason string)
	ExportError()
}

// Exporter queues traces and sends them to an OTLP backend.
type Exporter struct {
	cfg   Config
	exp   sdktrace.SpanExporter
	stats Stats
	log   *slog.Logger
	res   resources

	queue    chan []phases.Span // one trace's spans
	mu       sync.Mutex
	closed   bool
	started  bool
	done     chan struct{}
	stopOnce sync.Once
}

// New creates the exporter; it does not connect until the first export.
func New(ctx context.Context, cfg Config, stats Stats, log *slog.Logger) (*Exporter, error) {
	exp, err := newSpanExporter(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return NewWithExporter(exp, cfg, stats, log), nil
}

// NewWithExporter wraps any span exporter (tests use an in-memory one).
func NewWithExporter(exp sdktrace.SpanExporter, cfg Config, stats Stats, log *slog.Logger) *Exporter {
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = DefaultQueueSize
	}
	if cfg.GiveUpAfter <= 0 {
		cfg.GiveUpAfter = DefaultGiveUpAfter
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Exporter{cfg: cfg, exp: exp, stats: stats, log: log, res: resources{}, queue: make(chan []phases.Span, cfg.QueueSize), done: make(chan struct{})}
}

func newSpanExporter(ctx context.Context, cfg Config) (sdktrace.SpanExporter, error) {
	switch cfg.Protocol {
	case "", "grpc":
		opts := []otlptracegrpc.Option{otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false})}
		if cfg.Endpoint != "" {
			opts = append(opts, endpointGRPC(cfg.Endpoint))
		}
		if cfg.Insecure {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		if len(cfg.Headers) > 0 {
			opts = append(opts, otlptracegrpc.WithHeaders(cfg.Headers))
		}
		return otlptracegrpc.New(ctx, opts...)
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
		return otlptracehttp.New(ctx, opts...)
	}
	return nil, fmt.Errorf("unknown OTLP protocol %q: use grpc or http", cfg.Protocol)
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

// Export queues a Pod's trace. It never blocks: with the queue full the trace is dropped and
// counted.
func (e *Exporter) Export(t *phases.Trace) { e.enqueue(t.Spans) }

// ExportRollout queues a rollout's trace, like Export.
func (e *Exporter) ExportRollout(t *rollout.Trace) { e.enqueue(t.Spans) }

func (e *Exporter) enqueue(t []phases.Span) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		e.stats.TraceDropped("shutdown")
		return
	}
	select {
	case e.queue <- t:
	default:
		e.stats.TraceDropped("queue_full")
	}
}

// Start runs the send loop until Shutdown.
func (e *Exporter) Start(ctx context.Context) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.started || e.closed {
		return
	}
	e.started = true
	go e.loop(ctx)
}

func (e *Exporter) loop(ctx context.Context) {
	defer close(e.done)
	batch := make([][]phases.Span, 0, DefaultBatchSize)
	for {
		t, ok := <-e.queue
		if !ok {
			return
		}
		batch = append(batch[:0], t)
	fill:
		for len(batch) < DefaultBatchSize {
			select {
			case t, ok := <-e.queue:
				if !ok {
					break fill
				}
				batch = append(batch, t)
			default:
				break fill
			}
		}
		e.send(ctx, batch)
	}
}

// send exports one batch, retrying with exponential backoff while the backend is unreachable,
// up to GiveUpAfter; then the batch is dropped and counted.
func (e *Exporter) send(ctx context.Context, batch [][]phases.Span) {
	var spans []sdktrace.ReadOnlySpan
	for _, t := range batch {
		spans = append(spans, readOnly(t, e.res)...)
	}
	backoff := e.cfg.InitialBackoff
	if backoff <= 0 {
		backoff = time.Second
	}
	start := time.Now()
	for attempt := 1; ; attempt++ {
		sendCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		err := e.exp.ExportSpans(sendCtx, spans)
		cancel()
		if err == nil {
			for range batch {
				e.stats.TraceExported()
			}
			return
		}
		e.stats.ExportError()
		if attempt == 1 || attempt%10 == 0 {
			e.log.Warn("OTLP export failed, retrying", "err", err, "traces", len(batch), "attempt", attempt)
		}
		if time.Since(start) > e.cfg.GiveUpAfter || e.isClosed() && ctx.Err() != nil {
			e.log.Error("Dropping traces after OTLP export kept failing", "err", err, "traces", len(batch), "retriedFor", time.Since(start).Round(time.Second))
			for range batch {
				e.stats.TraceDropped("export_failed")
			}
			return
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			if e.isClosed() {
				for range batch {
					e.stats.TraceDropped("shutdown")
				}
				return
			}
		}
		if backoff *= 2; backoff > DefaultMaxBackoff {
			backoff = DefaultMaxBackoff
		}
	}
}

func (e *Exporter) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// Shutdown stops accepting traces, sends what is queued (until ctx ends) and closes the
// connection. It is safe to call more than once, and before Start (queued traces are dropped).
func (e *Exporter) Shutdown(ctx context.Context) error {
	var err error
	e.stopOnce.Do(func() {
		e.mu.Lock()
		e.closed = true
		started := e.started
		close(e.queue)
		e.mu.Unlock()
		if started {
			select {
			case <-e.done:
			case <-ctx.Done():
				err = errors.Join(err, fmt.Errorf("flush traces: %w", ctx.Err()))
			}
		}
		err = errors.Join(err, e.exp.Shutdown(ctx))
	})
	return err
}
