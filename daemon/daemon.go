package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/client-go/kubernetes"

	"github.com/readyspan/readyspan/access"
	"github.com/readyspan/readyspan/dataplane"
	"github.com/readyspan/readyspan/exporters/otlp"
	promexp "github.com/readyspan/readyspan/exporters/prometheus"
	"github.com/readyspan/readyspan/leader"
	"github.com/readyspan/readyspan/node"
	"github.com/readyspan/readyspan/otlpin"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/pipeline"
	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/rollout/tracker"
	"github.com/readyspan/readyspan/safetext"
	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/watch"
	"github.com/readyspan/readyspan/web"
)

// Daemon is one replica of readyspan run, wired: the live pipeline → router → exporters.
type Daemon struct {
	opts   Options
	client kubernetes.Interface
	host   string
	log    *slog.Logger

	metrics *promexp.Metrics
	exp     *otlp.Exporter
	gate    *leader.Gate
	corr    *tracer.Correlator
	live    *pipeline.Live
	source  *watch.Source
	srv     *http.Server
	ready   atomic.Bool
	// recv and join are the OTLP input and the stage that joins its spans into the Pod traces
	// (nil without --otlp-receive).
	recv *otlpin.Receiver
	join *joinStage
	// lastMile holds the traces waiting for the nodes' kube-proxy rules (readyspan node).
	lastMile *lastMileStage
}

// Run runs the daemon until ctx ends, then stops it (see stop for the order).
func Run(ctx context.Context, o Options, client kubernetes.Interface, host string, log *slog.Logger) error {
	d, err := New(ctx, o, client, host, log)
	if err != nil {
		return err
	}
	return d.Run(ctx)
}

// New validates the options and wires every part; nothing reads the cluster until Run. On an
// error, what was started is stopped.
func New(ctx context.Context, o Options, client kubernetes.Interface, host string, log *slog.Logger) (d *Daemon, err error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d = &Daemon{opts: o, client: client, host: host, log: log}
	reg := prometheus.NewRegistry()
	ui := o.UI.ring()
	if ui != nil {
		registerRingMetrics(reg, ui)
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	d.metrics = promexp.New(reg, o.Version, tracer.Kinds.RolloutKinds(), o.Metrics)

	otlpCfg := o.OTLP
	if o.Shard.Sharded() {
		otlpCfg.ResourceAttributes = map[string]string{"readyspan.shard": o.Shard.String()}
	}
	if d.exp, err = otlp.New(ctx, otlpCfg, d.metrics, log); err != nil {
		return nil, fmt.Errorf("set up OTLP exporter: %w", err)
	}
	d.exp.Start(ctx)
	// A failed New returns a nil Daemon: the deferred clean-up holds its own reference.
	started := d
	defer func() {
		if err != nil {
			_ = started.recv.Shutdown(ctx)
			started.shutdownExporter(ctx)
		}
	}()
	promexp.RegisterExportBacklog(reg, func() promexp.ExportBacklog {
		s := d.exp.Status()
		return promexp.ExportBacklog{Traces: s.Traces, Bytes: s.Bytes, Failing: !s.FailingSince.IsZero()}
	})

	if err = d.buildPipeline(d.newRouter(ui), reg); err != nil {
		return nil, err
	}
	if d.srv, err = d.serve(reg, ui); err != nil {
		return nil, err
	}
	return d, nil
}

// newRouter routes the finished traces to the exporters: the UI's ring on every replica, the
// rest through the leader gate.
func (d *Daemon) newRouter(ui *web.Ring) *router {
	r := &router{leaderOnly: []Exporter{
		exportFuncs{pod: d.metrics.Export, rollout: d.metrics.ExportRollout, node: d.metrics.ExportNode},
		exportFuncs{pod: d.exp.Export, rollout: d.exp.ExportRollout, node: d.exp.ExportNode},
		exportFuncs{pod: d.logPod, rollout: d.logRollout, node: d.logNode},
	}}
	if ui != nil {
		r.everyReplica = append(r.everyReplica, exportFuncs{pod: ui.AddPod, rollout: ui.AddRollout, node: ui.AddNode})
	}
	// Only the leader exports (traces and trace metrics); a standby correlates too, so it is
	// hot when it takes over.
	o := d.opts
	d.gate = leader.New(leader.Config{
		Elected: o.Leader.Elect, Leases: d.client.CoordinationV1().Leases(o.Leader.Namespace), Lease: o.LeaseName(),
		Sink: tracer.SinkFunc(r.exportPod), Metrics: d.metrics, Log: d.log,
	})
	r.gate = d.gate
	return r
}

// buildPipeline builds the live pipeline with r as its sinks and, with --otlp-receive, the OTLP
// input and the join stage between the correlator and r.
func (d *Daemon) buildPipeline(r *router, reg *prometheus.Registry) error {
	o := d.opts
	cfg, err := d.correlatorConfig()
	if err != nil {
		return err
	}
	if o.Leader.Elect {
		cfg.ResumeAfter = d.gate.ResumeAfter() // a replica that may take over traces what turned Ready recently
	}
	sink, rollouts, nodes := r.sinks()
	if o.Shard.Index > 0 {
		// Every shard sees every Node: the first alone traces their startups.
		nodes = nil
	}
	if o.Receive.Addr != "" {
		store := otlpin.NewStore(o.Receive.Hold, o.Receive.MaxBytes, reg)
		if d.recv, err = otlpin.Listen(o.Receive.Config, store, d.client, d.log); err != nil {
			return err
		}
		if o.Receive.Insecure {
			d.log.Warn("The OTLP input is open: whoever reaches it may add spans to any Pod's trace (--otlp-receive-insecure)", "addr", o.Receive.Addr)
		}
		d.join = newJoinStage(store, o.Receive.Wait, sink.Export, reg, d.log)
		sink = tracer.SinkFunc(d.join.pod)
		table := dataplane.NewTable(0, 0)
		store.SetDataplane(table)
		d.lastMile = newLastMileStage(table, o.Receive.LastMileWait, sink.Export, rollouts.ExportRollout)
		sink, rollouts = tracer.SinkFunc(d.lastMile.pod), tracker.SinkFunc(d.lastMile.rollout)
	}
	po := o.Pipeline
	po.Trace = cfg
	po.Watch.Shard = o.Shard
	// The webhook histogram is filled from the components' spans only; its webhook label
	// takes the names the cluster's webhook configurations declare.
	po.Webhooks = d.recv != nil
	live := pipeline.NewLive(po, pipeline.Env{
		Client: d.client, Host: d.host, Metrics: d.metrics, Log: d.log,
		AuditFailed: func(err error) { d.log.Error("Not reading the audit log", "err", err) },
	}, pipeline.Sinks{Pods: sink, Rollouts: rollouts, Nodes: nodes})
	d.live, d.corr, d.source = live, live.Correlator, live.Source
	if d.recv != nil {
		d.metrics.SetWebhooks(d.source.Webhooks())
	}
	return nil
}

// correlatorConfig is the Options' correlator configuration, resumed from the state file of a
// previous run when there is one (and no leader election decides what is owed).
func (d *Daemon) correlatorConfig() (tracer.Config, error) {
	cfg := d.opts.Pipeline.Trace
	if d.opts.StateFile == "" {
		return cfg, nil
	}
	st, err := leader.ReadState(d.opts.StateFile)
	if err != nil {
		return cfg, err
	}
	if st != nil && !d.opts.Leader.Elect {
		cfg.ResumeAfter, cfg.ResumeSkip = st.StoppedAt, st.Skip()
		d.log.Info("Resuming after the previous run", "stoppedAt", st.StoppedAt, "recentlyExported", len(st.Exported))
	}
	return cfg, nil
}

// serve starts the metrics address: /metrics, the health endpoints, the UI and the profiles.
func (d *Daemon) serve(reg *prometheus.Registry, ui *web.Ring) (*http.Server, error) {
	acc := d.opts.Access
	acc.Open = []string{"/healthz", "/readyz"}
	guard, err := access.New(acc, d.client, d.log)
	if err != nil {
		return nil, err
	}
	var uiHandler http.Handler
	if ui != nil {
		if uiHandler, err = d.opts.UI.handler(ui, d.opts.MetricsAddr); err != nil {
			return nil, err
		}
	}
	return serve(d.opts.MetricsAddr, guard, reg, d.source.Watcher(), &d.ready, d.exp.Status, uiHandler, d.opts.Pprof, d.log)
}

func (d *Daemon) logPod(t *phases.Trace) {
	d.log.Debug("Trace complete", "pod", t.Pod.Namespace+"/"+t.Pod.Name, "outcome", t.Summary.Outcome, "traceID", t.TraceID.String())
}

func (d *Daemon) logNode(t *node.Trace) {
	d.log.Debug("Node startup complete", "node", t.Startup.Name, "outcome", t.Summary.Outcome, "duration", t.Summary.Duration, "traceID", t.TraceID.String())
}

func (d *Daemon) logRollout(t *rollout.Trace) {
	d.log.Debug("Rollout complete", "workload", t.Rollout.Workload.Kind+" "+t.Rollout.Workload.Namespace+"/"+t.Rollout.Workload.Name,
		"outcome", t.Summary.Outcome, "summary", t.Summary.Sentence, "traceID", t.TraceID.String())
}

// Run watches, correlates and exports until ctx ends, then stops.
func (d *Daemon) Run(ctx context.Context) error {
	o := d.opts
	d.log.Info("Starting readyspan", "version", o.Version, "apiserver", d.host, "namespaces", strings.Join(o.Pipeline.Watch.Namespaces, ","),
		"shard", o.Shard.String(), "metricsAddr", o.MetricsAddr, "otlpReceive", o.Receive.Addr)
	if d.join != nil {
		joinCtx, stopJoin := context.WithCancel(ctx)
		defer stopJoin()
		go d.join.run(joinCtx)
		go d.lastMile.run(joinCtx)
	}
	if err := d.source.Reachable(ctx); err != nil {
		d.log.Error("Apiserver unreachable; retrying in the background", "err", err.Error()) // a daemon keeps trying
	}
	d.source.Start(ctx)
	// Cut off from the apiserver, the informers notice only when their connections time out
	// (up to a minute); asking every 5 s makes /readyz say so within the outage grace.
	go d.source.Watcher().FollowReachability(ctx, 5*time.Second, func(ctx context.Context) error { return watch.Reachable(ctx, d.client, d.host) })
	// Leader election runs on its own context: on SIGTERM the leader first exports what is
	// Ready (Drain) and flushes, and only then releases the Lease, so the next leader's owed
	// window starts after the last trace this one sent.
	electCtx, stopElect := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElect()
	electDone := make(chan struct{})
	go func() {
		defer close(electDone)
		d.elect(ctx, electCtx)
	}()
	d.live.Run(ctx)
	return d.stop(ctx, stopElect, electDone)
}

// elect waits for the caches and then, with leader election, contends for the Lease: only a
// replica that has its state contends, since a leader that just started would not know what is
// in flight.
func (d *Daemon) elect(ctx, electCtx context.Context) {
	if err := d.source.Watcher().WaitForSync(ctx); err != nil {
		if ctx.Err() == nil {
			d.log.Error("Caches did not sync", "err", err)
		}
		return
	}
	d.ready.Store(true)
	d.metrics.SetCacheSynced(true)
	d.log.Info("Caches synced; tracing")
	if !d.opts.Leader.Elect {
		return
	}
	err := leader.Run(electCtx, leader.ElectionConfig{
		Leases: d.client.CoordinationV1(), Namespace: d.opts.Leader.Namespace, Name: d.opts.LeaseName(),
		Identity: identity(), Settle: d.opts.Pipeline.Trace.Settle,
		OnStartedLeading: func(prevAlive time.Time, released bool) { d.gate.TakeOver(ctx, prevAlive, released) },
		OnStoppedLeading: d.gate.StepDown,
		Log:              d.log,
	})
	if err != nil {
		d.log.Error("Not contending for the Lease", "err", err)
	}
}

// stop is the one shutdown order: export what is Ready now (the next run will not trace it),
// flush the exporter, record the state or leave a handover for the next leader, release the
// Lease, and close the metrics address last, so /readyz and /metrics answer until the end.
func (d *Daemon) stop(ctx context.Context, stopElect context.CancelFunc, electDone <-chan struct{}) error {
	if d.gate.Leading() {
		d.corr.Drain()
	}
	if d.join != nil {
		// The traces waiting for the nodes' rules and the components' spans go with what
		// arrived.
		d.lastMile.flush()
		d.join.flush()
	}
	if err := d.recv.Shutdown(context.WithoutCancel(ctx)); err != nil {
		d.log.Warn("OTLP input did not stop cleanly", "err", safetext.OneLine(err))
	}
	d.log.Info("Shutting down", "inFlight", d.corr.InFlight())
	d.shutdownExporter(ctx)
	var err error
	if d.opts.StateFile != "" && !d.opts.Leader.Elect {
		err = d.gate.WriteState(d.opts.StateFile)
	}
	if herr := d.gate.Handover(context.WithoutCancel(ctx)); herr != nil {
		d.log.Warn("Could not leave a handover for the next leader", "err", safetext.OneLine(herr))
	}
	stopElect()
	select {
	case <-electDone:
	case <-time.After(5 * time.Second):
		d.log.Warn("Leader election did not stop in 5s")
	}
	if serr := d.srv.Shutdown(context.WithoutCancel(ctx)); serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		d.log.Warn("Metrics server did not stop cleanly", "err", safetext.OneLine(serr))
	}
	return err
}

// shutdownExporter flushes the OTLP queue, for at most 10 s.
func (d *Daemon) shutdownExporter(ctx context.Context) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := d.exp.Shutdown(sctx); err != nil {
		d.log.Warn("Traces not flushed", "err", safetext.OneLine(err))
	}
}

// identity names this replica on the Lease: its Pod name, else the host name.
func identity() string {
	if id := os.Getenv("POD_NAME"); id != "" {
		return id
	}
	id, _ := os.Hostname()
	return id
}
