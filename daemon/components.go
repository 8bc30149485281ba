package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/readyspan/readyspan/otlpin"
	"github.com/readyspan/readyspan/phases"
)

// ReceiveOptions are the OTLP input's (readyspan run --otlp-receive): the components' own
// spans joined into each Pod's trace.
type ReceiveOptions struct {
	otlpin.Config
	// Wait is how long a finished Pod trace waits, at most, for the components' spans it
	// expects (they export in batches) before it is exported with what arrived.
	Wait time.Duration
	// LastMileWait is how long a Pod trace waits, at most, for the nodes readyspan node
	// reports from to put the Pod in their rules (a rollout, for its old Pods to leave them).
	LastMileWait time.Duration
}

// DefaultComponentWait is the default of ReceiveOptions.Wait: the kube-apiserver, the kubelet
// and containerd each export their spans in batches every 5 s (the OpenTelemetry SDK's
// default), and a Collector in between adds its own batching; twice that covers a batch that
// had just left when the span ended.
const DefaultComponentWait = 10 * time.Second

// sendingWindow is how recently a component must have sent a span for a trace to wait for
// its spans: a component that sends none (a managed control plane's apiserver) is not waited
// for.
const sendingWindow = 10 * time.Minute

// requestSlack widens the window in which the apiserver's requests on a Pod's name count for
// its trace: the trace's start may be a whole-second stamp after the create request began.
const requestSlack = 5 * time.Second

// joinStage stands between the correlator and the router when the OTLP input is on: each
// finished Pod trace waits until the components' spans it expects are held (or Wait has
// passed), takes them from the store, has them joined (phases.Trace.Join), and goes on. It
// never blocks the correlator: traces wait in a list its own goroutine works through.
type joinStage struct {
	store *otlpin.Store
	wait  time.Duration
	next  func(*phases.Trace)
	log   *slog.Logger
	now   func() time.Time

	mu      sync.Mutex
	pending []pendingTrace
	loop    stageLoop

	waited  *prometheus.HistogramVec
	missing *prometheus.CounterVec
}

type pendingTrace struct {
	t        *phases.Trace
	arrived  time.Time
	deadline time.Time
}

func newJoinStage(store *otlpin.Store, wait time.Duration, next func(*phases.Trace), reg prometheus.Registerer, log *slog.Logger) *joinStage {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	j := &joinStage{store: store, wait: wait, next: next, log: log, now: time.Now, loop: newStageLoop(),
		waited: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "readyspan_otlp_join_wait_seconds",
			Help:    "How long a finished Pod trace waited for the components' spans before export (the added export lag), by whether all it expected arrived.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 60}}, []string{"complete"}),
		missing: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "readyspan_otlp_traces_missing_component_total",
			Help: "Pod traces exported without the spans of a component that sends spans, by component."}, []string{"component"}),
	}
	if reg != nil {
		reg.MustRegister(j.waited, j.missing)
	}
	return j
}

// pod takes a finished trace from the correlator. The correlator keeps the trace it hands
// over (the rollout tracker reads the Pod's spans when its rollout ends, on the correlator's
// goroutine), so the stage joins into a copy of its own: a new list of spans, the spans
// themselves shared and never changed (Join adds spans, MarkMissing clips before it appends).
func (j *joinStage) pod(t *phases.Trace) {
	cp := *t
	cp.Spans = slices.Clone(t.Spans)
	t = &cp
	now := j.now()
	j.mu.Lock()
	j.pending = append(j.pending, pendingTrace{t: t, arrived: now, deadline: now.Add(j.wait)})
	j.mu.Unlock()
	j.loop.wake()
}

// run works through the waiting traces until ctx ends; flush then sends what still waits.
func (j *joinStage) run(ctx context.Context) { j.loop.run(ctx, 200*time.Millisecond, j.step) }

// flush joins and sends every waiting trace now, with what arrived (the daemon's stop).
func (j *joinStage) flush() { j.step(true) }

// step sends the traces whose expected spans are all held or whose wait is over (all, with
// force), in the order they arrived.
func (j *joinStage) step(force bool) {
	now := j.now()
	j.mu.Lock()
	var ready []pendingTrace
	keep := j.pending[:0]
	for _, p := range j.pending {
		if force || !now.Before(p.deadline) || len(j.expectedMissing(p.t)) == 0 {
			ready = append(ready, p)
		} else {
			keep = append(keep, p)
		}
	}
	clear(j.pending[len(keep):])
	j.pending = keep
	j.mu.Unlock()
	for _, p := range ready {
		missing := j.expectedMissing(p.t)
		n := p.t.Join(j.store.Take(query(p.t)))
		if len(missing) > 0 {
			p.t.MarkMissing(missing)
			for _, c := range missing {
				j.missing.WithLabelValues(c).Inc()
			}
		}
		j.waited.WithLabelValues(boolLabel(len(missing) == 0)).Observe(now.Sub(p.arrived).Seconds())
		j.log.Debug("Joined the components' spans", "pod", p.t.Pod.Namespace+"/"+p.t.Pod.Name, "spans", n, "missing", missing, "waitedMs", now.Sub(p.arrived).Milliseconds())
		j.next(p.t)
	}
}

// expectedMissing lists the components whose spans the trace expects and the store does not
// hold yet: the apiserver's request that created the Pod, the kubelet's syncPod that started
// it (a Pod that reached a node) and containerd's spans beneath its CRI calls; each only from
// a component that sends spans at all.
func (j *joinStage) expectedMissing(t *phases.Trace) []string {
	have := j.store.Present(query(t))
	var out []string
	if !have.Create && j.store.Sending(phases.ServiceAPIServer, sendingWindow) {
		out = append(out, phases.ServiceAPIServer)
	}
	if t.Pod.Node != "" && t.Pod.KubeletStarted.Known() {
		if !have.Sync && j.store.Sending(phases.ServiceKubelet, sendingWindow) {
			out = append(out, phases.ServiceKubelet)
		}
		if !have.Runtime && j.store.Sending(phases.ServiceContainerd, sendingWindow) {
			out = append(out, phases.ServiceContainerd)
		}
	}
	sort.Strings(out)
	return out
}

// query is what a Pod's trace asks of the store.
func query(t *phases.Trace) otlpin.Query {
	root := t.Root()
	return otlpin.Query{UID: t.Pod.UID, Node: t.Pod.Node, Namespace: t.Pod.Namespace, Name: t.Pod.Name,
		From: root.Start.Add(-requestSlack), To: root.End.Add(requestSlack)}
}

func boolLabel(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// ComponentJoin is the OTLP input with its join stage, for a command that traces without the
// daemon (readyspan watch): the components' spans received on its address are joined into each
// finished Pod trace before it goes to next, exactly as readyspan run --otlp-receive does. It
// has no metrics and no access rules: StartComponentJoin takes a loopback address only.
type ComponentJoin struct {
	recv  *otlpin.Receiver
	stage *joinStage
	stop  context.CancelFunc
	done  chan struct{}
}

// StartComponentJoin listens on o.Addr (a loopback address) and joins what it receives into
// the traces given to Pod, which then go to next (from the stage's own goroutine).
func StartComponentJoin(ctx context.Context, o ReceiveOptions, next func(*phases.Trace), log *slog.Logger) (*ComponentJoin, error) {
	if !otlpin.Loopback(o.Addr) {
		return nil, fmt.Errorf("--otlp-receive %q: only a loopback address here (readyspan run serves other addresses behind its access rules)", o.Addr)
	}
	if o.Wait <= 0 {
		return nil, errors.New("--otlp-receive-wait must be positive")
	}
	store := otlpin.NewStore(o.Hold, o.MaxBytes, nil)
	recv, err := otlpin.Listen(o.Config, store, nil, log)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	c := &ComponentJoin{recv: recv, stage: newJoinStage(store, o.Wait, next, nil, log), stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		c.stage.run(ctx)
	}()
	return c, nil
}

// Pod takes a finished trace; it goes on once the components' spans it expects are held, or
// after the wait.
func (c *ComponentJoin) Pod(t *phases.Trace) { c.stage.pod(t) }

// Stop sends the traces still waiting with what arrived, and stops the input.
func (c *ComponentJoin) Stop(ctx context.Context) error {
	c.stop()
	<-c.done
	c.stage.flush()
	return c.recv.Shutdown(ctx)
}

// Addr is the address the input listens on.
func (c *ComponentJoin) Addr() net.Addr { return c.recv.Addr() }
