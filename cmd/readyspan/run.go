package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"

	"github.com/readyspan/readyspan/access"
	"github.com/readyspan/readyspan/exporters/otlp"
	promexp "github.com/readyspan/readyspan/exporters/prometheus"
	"github.com/readyspan/readyspan/leader"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/shard"
	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/web"
)

// runDaemon is `readyspan run`: watch, correlate, export traces and serve metrics.
func runDaemon(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs := newFlagSet("run", "[flags]", stderr)
	var cf daemonFlags
	var tf traceFlags
	cf.register(fs)
	tf.register(fs)
	metricsAddr := fs.String("metrics-addr", ":8080", "address for /metrics, /healthz and /readyz")
	var of otlpFlags
	of.register(fs, "OTLP endpoint, host:port or URL (default: $OTEL_EXPORTER_OTLP_ENDPOINT, else localhost:4317)")
	leaderElect := fs.Bool("leader-elect", false, "run several replicas; only the holder of a Lease exports")
	leNamespace := fs.String("leader-elect-namespace", envOr("POD_NAMESPACE", "default"), "namespace of the leader-election Lease")
	leName := fs.String("leader-elect-lease-name", "readyspan", "name of the leader-election Lease (with --total-shards above 1, each shard's Lease is this name with -shard-N-of-M added)")
	shardIndex := fs.Int("shard", 0, "this replica's shard, from 0 to --total-shards-1: it traces the Pods and rollouts of the workloads whose key hashes to it (docs/scale.md)")
	totalShards := fs.Int("total-shards", 1, "how many shards split the cluster; each shard runs its own readyspan (or its own leader-elected replicas)")
	auditLog := fs.String("audit-log", "", "kube-apiserver audit log (JSON lines) to follow: measures the apiserver phase of Deployment changes and bare Pods")
	stateFile := fs.String("state-file", "", "file where a stopping readyspan records what it exported, so a restart neither loses nor repeats a trace")
	var uf uiFlags
	uf.register(fs)
	maxInFlight := fs.Int("max-in-flight", tracer.DefaultMaxInFlight, "most Pods traced at once; more are dropped and counted")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	pprof := fs.Bool("pprof", false, "serve Go's profiles (net/http/pprof) at /debug/pprof/ on --metrics-addr, behind the same access rules as /metrics")
	// The OTLP queue's bounds: what readyspan keeps while the backend is down or slow.
	queueTraces := fs.Int("otlp-queue-traces", otlp.DefaultQueueTraces, "most traces kept for the OTLP backend while it is down or slow; past it the oldest are dropped and counted")
	queueBytes := fs.Int64("otlp-queue-bytes", otlp.DefaultQueueBytes, "most bytes (estimated OTLP size) of traces kept for the OTLP backend; past it the oldest are dropped and counted")
	// Who may read --metrics-addr: anyone who can reach it (default; see the NetworkPolicy), or
	// over TLS whoever the apiserver says may GET the path.
	var acc access.Config
	fs.BoolVar(&acc.Secure, "metrics-secure", false, "serve --metrics-addr over TLS and let only callers the apiserver authorizes (TokenReview, SubjectAccessReview for GET on the path) read /metrics; /healthz and /readyz stay open")
	fs.StringVar(&acc.CertFile, "metrics-tls-cert-file", "", "with --metrics-secure: the serving certificate (default: a self-signed one made at start)")
	fs.StringVar(&acc.KeyFile, "metrics-tls-key-file", "", "with --metrics-secure: the serving certificate's key")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("run takes no arguments, got %q", fs.Args())
	}
	log, err := newLogger(stderr, *logLevel)
	if err != nil {
		return err
	}
	klog.SetSlogLogger(log) // client-go's own lines (leader election, reflectors) in the same format
	otlpCfg, err := of.config()
	if err != nil {
		return err
	}
	ui, err := uf.ring()
	if err != nil {
		return err
	}
	if *queueTraces <= 0 || *queueBytes <= 0 {
		return fmt.Errorf("--otlp-queue-traces and --otlp-queue-bytes must be positive, got %d and %d", *queueTraces, *queueBytes)
	}
	otlpCfg.QueueTraces, otlpCfg.QueueBytes = *queueTraces, *queueBytes
	part, err := shard.New(*shardIndex, *totalShards)
	if err != nil {
		return err
	}
	lease := leaseFor(*leName, part)
	if part.Sharded() {
		otlpCfg.ResourceAttributes = map[string]string{"readyspan.shard": part.String()}
	}
	client, restCfg, err := cf.client()
	if err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	if ui != nil {
		registerRingMetrics(reg, ui)
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := promexp.New(reg, version)

	exp, err := otlp.New(ctx, otlpCfg, metrics, log)
	if err != nil {
		return fmt.Errorf("set up OTLP exporter: %w", err)
	}
	exp.Start(ctx)
	promexp.RegisterExportBacklog(reg, func() promexp.ExportBacklog {
		s := exp.Status()
		return promexp.ExportBacklog{Traces: s.Traces, Bytes: s.Bytes, Failing: !s.FailingSince.IsZero()}
	})
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if serr := exp.Shutdown(sctx); serr != nil {
			err = errors.Join(err, fmt.Errorf("shut down OTLP exporter: %s", oneLine(serr)))
		}
	}()

	cfg := tf.config()
	cfg.MaxInFlight = *maxInFlight
	if *stateFile != "" {
		st, err := leader.ReadState(*stateFile)
		if err != nil {
			return err
		}
		if st != nil && !*leaderElect {
			cfg.ResumeAfter, cfg.ResumeSkip = st.StoppedAt, st.Skip()
			log.Info("Resuming after the previous run", "stoppedAt", st.StoppedAt, "recentlyExported", len(st.Exported))
		}
	}
	// Only the leader exports (traces and trace metrics); a standby correlates too, so it is
	// hot when it takes over.
	gate := leader.New(leader.Config{
		Elected: *leaderElect,
		Leases:  client.CoordinationV1().Leases(*leNamespace),
		Lease:   lease,
		Sink: tracer.SinkFunc(func(t *phases.Trace) {
			metrics.Export(t)
			exp.Export(t)
			log.Debug("Trace complete", "pod", t.Pod.Namespace+"/"+t.Pod.Name, "outcome", t.Summary.Outcome, "traceID", t.TraceID.String())
		}),
		Metrics: metrics,
		Log:     log,
	})
	if *leaderElect {
		cfg.ResumeAfter = gate.ResumeAfter() // a replica that may take over traces what turned Ready recently
	}
	// Rollout traces have deterministic IDs, so a new leader that exports one again merges with
	// the first in the backend; only the leader exports them.
	cfg.Rollouts = tracer.RolloutSinkFunc(func(t *rollout.Trace) {
		if ui != nil {
			ui.AddRollout(t) // every replica shows what it reconstructed, leading or not
		}
		if !gate.Leading() {
			return
		}
		metrics.ExportRollout(t)
		exp.ExportRollout(t)
		log.Debug("Rollout complete", "workload", t.Rollout.Workload.Kind+" "+t.Rollout.Workload.Namespace+"/"+t.Rollout.Workload.Name,
			"outcome", t.Summary.Outcome, "summary", t.Summary.Sentence, "traceID", t.TraceID.String())
	})
	sink := tracer.SinkFunc(gate.Offer)
	if ui != nil {
		sink = func(t *phases.Trace) {
			ui.AddPod(t)
			gate.Offer(t)
		}
	}
	corr := tracer.New(cfg, sink, metrics, log)
	p := newPipeline(pipelineConfig{
		client: client, host: restCfg.Host,
		watch: tracer.WatchConfig{Namespaces: cf.namespaces, Selector: cf.selector, Shard: part},
		errs:  metrics, log: log,
		auditLog:    *auditLog,
		auditFailed: func(err error) { log.Error("Not reading the audit log", "err", err) },
		correlator:  corr,
	})
	w := p.watcher

	acc.Open = []string{"/healthz", "/readyz"}
	guard, err := access.New(acc, client, log)
	if err != nil {
		return err
	}
	var ready atomic.Bool
	var uiHandler http.Handler
	if ui != nil {
		if uiHandler, err = uf.handler(ui, *metricsAddr); err != nil {
			return err
		}
	}
	srv, err := serve(*metricsAddr, guard, reg, w, &ready, exp.Status, uiHandler, *pprof, log)
	if err != nil {
		return err
	}
	defer srv.Shutdown(context.WithoutCancel(ctx))

	log.Info("Starting readyspan", "version", version, "apiserver", restCfg.Host, "namespaces", cf.namespaces.String(), "shard", part.String(), "metricsAddr", *metricsAddr)
	if err := p.reachable(ctx); err != nil {
		log.Error("Apiserver unreachable; retrying in the background", "err", err.Error()) // a daemon keeps trying
	}
	p.start(ctx)
	// Cut off from the apiserver, the informers notice only when their connections time out
	// (up to a minute); asking every 5 s makes /readyz say so within the outage grace.
	go w.FollowReachability(ctx, 5*time.Second, func(ctx context.Context) error { return reachable(ctx, client, restCfg.Host) })
	// Leader election runs on its own context: on SIGTERM the leader first exports what is
	// Ready (Drain) and flushes, and only then releases the Lease, so the next leader's owed
	// window starts after the last trace this one sent.
	electCtx, stopElect := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElect()
	electDone := make(chan struct{})
	go func() {
		defer close(electDone)
		if err := w.WaitForSync(ctx); err != nil {
			if ctx.Err() == nil {
				log.Error("Caches did not sync", "err", err)
			}
			return
		}
		ready.Store(true)
		metrics.SetCacheSynced(true)
		log.Info("Caches synced; tracing")
		if *leaderElect {
			// Only a replica that has its state contends: a leader that just started would
			// not know what is in flight.
			err := leader.Run(electCtx, leader.ElectionConfig{
				Leases:           client.CoordinationV1(),
				Namespace:        *leNamespace,
				Name:             lease,
				Identity:         identity(),
				Settle:           cfg.Settle,
				OnStartedLeading: func(prevAlive time.Time, released bool) { gate.TakeOver(ctx, prevAlive, released) },
				OnStoppedLeading: gate.StepDown,
				Log:              log,
			})
			if err != nil {
				log.Error("Not contending for the Lease", "err", err)
			}
		}
	}()
	p.loop(ctx)
	// Stopping: export what is Ready now (the next run will not trace it), flush, then hand over.
	if gate.Leading() {
		corr.Drain()
	}
	log.Info("Shutting down", "inFlight", corr.InFlight())
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := exp.Shutdown(sctx); err != nil {
		log.Warn("Traces not flushed", "err", oneLine(err))
	}
	if *stateFile != "" && !*leaderElect {
		if err := gate.WriteState(*stateFile); err != nil {
			return err
		}
	}
	if err := gate.Handover(context.WithoutCancel(ctx)); err != nil {
		log.Warn("Could not leave a handover for the next leader", "err", oneLine(err))
	}
	stopElect()
	select {
	case <-electDone:
	case <-time.After(5 * time.Second):
		log.Warn("Leader election did not stop in 5s")
	}
	return nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func parseHeaders(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("bad --otlp-headers entry %q: want key=value", kv)
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out, nil
}

// serve starts the metrics and health endpoints. /healthz says the process runs; /readyz says
// the caches synced, no watch is forbidden, and the apiserver answers and lists and watches work
// (an outage counts after 10 s). A failing OTLP backend does not make readyspan
// unready (restarting it would lose the queue, and another replica would meet the same
// backend): /readyz stays 200 and says so on a second line, as the export gauges do. ui, when
// set, serves everything else: the web UI at / and its API (behind the same guard as /metrics,
// and answering only to the names of --metrics-addr and --ui-allowed-hosts; the other paths
// answer to any name, as Prometheus and the kubelet's probes reach them by whatever address
// they were given).
func serve(addr string, guard *access.Guard, reg *prometheus.Registry, w *tracer.Watcher, ready *atomic.Bool, export func() otlp.Status, ui http.Handler, profiles bool, log *slog.Logger) (*http.Server, error) {
	mux := http.NewServeMux()
	if ui != nil {
		mux.Handle("/", ui)
	}
	if profiles {
		servePprof(mux)
	}
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true, Registry: reg}))
	mux.HandleFunc("/healthz", func(rw http.ResponseWriter, _ *http.Request) { fmt.Fprintln(rw, "ok") })
	mux.HandleFunc("/readyz", readyz(w.Problem, ready, export))
	ln, err := guard.Listen(addr)
	if err != nil {
		return nil, fmt.Errorf("listen on --metrics-addr %s: %w", addr, err)
	}
	srv := web.NewHTTPServer(web.SecurityHeaders(guard.Handler(mux)))
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("Metrics server stopped", "err", err)
		}
	}()
	return srv, nil
}

// readyz answers /readyz: 503 with the reason until the caches synced, while a watch is
// forbidden or while the apiserver is out of reach; else 200 "ok", plus a line on the export while the OTLP backend is failing.
func readyz(problem func() string, ready *atomic.Bool, export func() otlp.Status) http.HandlerFunc {
	return func(rw http.ResponseWriter, _ *http.Request) {
		if p := problem(); p != "" || !ready.Load() {
			if p == "" {
				p = "caches not synced yet"
			}
			http.Error(rw, "not ready: "+p, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(rw, "ok")
		if s := export(); !s.FailingSince.IsZero() {
			fmt.Fprintf(rw, "export failing for %s, %d traces (%d bytes) queued: %s\n",
				time.Since(s.FailingSince).Round(time.Second), s.Traces, s.Bytes, s.LastError)
		}
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

// leaseFor is the Lease a replica contends for: each shard elects its own leader.
func leaseFor(name string, part shard.Shard) string {
	if !part.Sharded() {
		return name
	}
	return fmt.Sprintf("%s-shard-%d-of-%d", name, part.Index, part.Total)
}
