package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/protobuf/proto"

	"github.com/readyspan/readyspan/dataplane"
)

// sendLoop sends the queue's oldest spans in batches until the queue is closed and empty. A
// failed batch goes back to the head of the queue and is tried again after a backoff (1 s
// doubling to MaxBackoff, or the receiver's Retry-After). Once ctx ends it has ShutdownGrace
// to send what is left; the rest is counted as dropped.
func (a *Agent) sendLoop(ctx context.Context) {
	// Requests outlive ctx by the grace, so that what is queued at shutdown still goes out.
	sendCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer context.AfterFunc(ctx, func() { time.AfterFunc(a.cfg.ShutdownGrace, cancel) })()
	backoff := a.cfg.InitialBackoff
	for {
		batch := a.queue.take(a.cfg.Batch)
		if batch == nil {
			if a.queue.isClosed() {
				return
			}
			<-a.queue.wake // a push, or close
			continue
		}
		wait, ok := a.export(sendCtx, batch)
		if ok {
			backoff = a.cfg.InitialBackoff
			continue
		}
		if sendCtx.Err() != nil {
			a.m.drop(DropShutdown, len(batch))
			n := len(batch) + a.queue.drain(DropShutdown)
			a.log.Error("Dropped the spans still queued at shutdown: the OTLP receiver did not take them in time", "spans", n)
			return
		}
		a.queue.putBack(batch)
		a.m.queued.Set(float64(a.queue.len()))
		if wait <= 0 {
			wait = backoff
			backoff = min(backoff*2, a.cfg.MaxBackoff)
		}
		select {
		case <-time.After(min(wait, a.cfg.MaxBackoff)):
		case <-sendCtx.Done():
		}
	}
}

// export makes one attempt at a batch. ok: the batch is done with (sent, or refused for good
// and counted); otherwise it is to be retried after wait (0: the caller's backoff).
func (a *Agent) export(ctx context.Context, batch []item) (wait time.Duration, ok bool) {
	body, err := proto.Marshal(request(a.cfg.Node, batch))
	if err != nil { // cannot happen with valid UTF-8; the contract's strings are
		a.m.drop(DropRejected, len(batch))
		a.log.Error("Cannot encode spans", "err", err)
		return 0, true
	}
	rejected, err := a.target.send(ctx, body)
	var ee *exportError
	switch {
	case err == nil:
		a.m.exported.Add(float64(int64(len(batch)) - rejected))
		if rejected > 0 {
			a.m.drop(DropRejected, int(rejected))
			a.log.Warn("The OTLP receiver refused some spans", "spans", rejected)
		}
		a.recovered()
		return 0, true
	case errors.As(err, &ee) && !ee.retry:
		a.m.errors.Inc()
		a.m.drop(DropRejected, len(batch))
		a.log.Error("The OTLP receiver refused a batch for good; dropped", "spans", len(batch), "err", ee.msg)
		return 0, true
	}
	a.m.errors.Inc()
	a.failed(err)
	if errors.As(err, &ee) {
		return ee.retryAfter, false
	}
	return 0, false
}

// failed records a failing receiver: logged once, and again when the error changes.
func (a *Agent) failed(err error) {
	msg := err.Error()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.queue.setFailing(true)
	a.m.failing.Set(1)
	if a.failSince.IsZero() {
		a.failSince = time.Now()
		a.log.Warn("OTLP export failing; keeping the spans queued and retrying with backoff", "err", msg, "queued", a.queue.len())
	} else if msg != a.lastErr {
		a.log.Warn("OTLP export still failing", "err", msg, "failingFor", time.Since(a.failSince).Round(time.Second), "queued", a.queue.len())
	}
	a.lastErr = msg
}

func (a *Agent) recovered() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.m.queued.Set(float64(a.queue.len()))
	if a.failSince.IsZero() {
		return
	}
	a.log.Info("OTLP export recovered", "failedFor", time.Since(a.failSince).Round(time.Second), "queued", a.queue.len())
	a.failSince, a.lastErr = time.Time{}, ""
	a.queue.setFailing(false)
	a.m.failing.Set(0)
}

// Handler serves /metrics and /healthz. /healthz is 200 while the process runs, failing
// exports or not (a restart would lose the queue and change nothing at the receiver), with
// the failure on a second line for whoever looks.
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(a.cfg.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(rw, "ok")
		a.mu.Lock()
		since, msg := a.failSince, a.lastErr
		a.mu.Unlock()
		if !since.IsZero() {
			fmt.Fprintf(rw, "export failing for %s, %d spans queued: %s\n", time.Since(since).Round(time.Second), a.queue.len(), msg)
		}
	})
	return mux
}

// metrics are the agent's own, under readyspan_node_.
type metrics struct {
	changes   *prometheus.CounterVec
	dropped   *prometheus.CounterVec
	syncs     prometheus.Counter
	exported  prometheus.Counter
	errors    prometheus.Counter
	queued    prometheus.Gauge
	failing   prometheus.Gauge
	endpoints prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "readyspan_node_changes_total",
			Help: "Endpoints seen entering (kind=endpoint.programmed) or leaving (endpoint.removed) a Service port's rotation in the node's rules."}, []string{"kind"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "readyspan_node_export_dropped_total",
			Help: "Spans not delivered, by reason: queue_full, export_failed, rejected, shutdown."}, []string{"reason"}),
		syncs: prometheus.NewCounter(prometheus.CounterOpts{Name: "readyspan_node_syncs_total",
			Help: "Heartbeats (rules.synced) queued."}),
		exported: prometheus.NewCounter(prometheus.CounterOpts{Name: "readyspan_node_exported_spans_total",
			Help: "Spans the OTLP receiver accepted."}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Name: "readyspan_node_export_errors_total",
			Help: "Failed export requests."}),
		queued: prometheus.NewGauge(prometheus.GaugeOpts{Name: "readyspan_node_export_queue_spans",
			Help: "Spans waiting for the OTLP receiver."}),
		failing: prometheus.NewGauge(prometheus.GaugeOpts{Name: "readyspan_node_export_failing",
			Help: "1 while exports to the OTLP receiver fail."}),
		endpoints: prometheus.NewGauge(prometheus.GaugeOpts{Name: "readyspan_node_endpoints",
			Help: "Endpoints in some Service port's rotation in the node's rules."}),
	}
	for _, k := range []string{dataplane.SpanProgrammed, dataplane.SpanRemoved} {
		m.changes.WithLabelValues(k)
	}
	for _, r := range []string{DropQueueFull, DropExportFailed, DropRejected, DropShutdown} {
		m.dropped.WithLabelValues(r)
	}
	reg.MustRegister(m.changes, m.dropped, m.syncs, m.exported, m.errors, m.queued, m.failing, m.endpoints)
	return m
}

func (m *metrics) drop(reason string, n int) { m.dropped.WithLabelValues(reason).Add(float64(n)) }
