package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/readyspan/readyspan/access"
	"github.com/readyspan/readyspan/exporters/otlp"
	"github.com/readyspan/readyspan/watch"
	"github.com/readyspan/readyspan/web"
)

// serve starts the metrics and health endpoints. /healthz says the process runs; /readyz says
// the caches synced, no watch is forbidden, and the apiserver answers and lists and watches work
// (an outage counts after 10 s). A failing OTLP backend does not make readyspan
// unready (restarting it would lose the queue, and another replica would meet the same
// backend): /readyz stays 200 and says so on a second line, as the export gauges do. ui, when
// set, serves everything else: the web UI at / and its API (behind the same guard as /metrics,
// and answering only to the names of the metrics address and UIOptions.AllowedHosts; the other
// paths answer to any name, as Prometheus and the kubelet's probes reach them by whatever
// address they were given).
func serve(addr string, guard *access.Guard, reg *prometheus.Registry, w *watch.Watcher, ready *atomic.Bool, export func() otlp.Status, ui http.Handler, profiles bool, log *slog.Logger) (*http.Server, error) {
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

// servePprof adds Go's profiles to mux at /debug/pprof/ (readyspan run --pprof): heap and CPU
// profiles of a running readyspan, so what it caches per Pod is measured rather than guessed.
// Registered by hand rather than by importing net/http/pprof for its side effect, which would
// put them on http.DefaultServeMux, unguarded.
func servePprof(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}

// ring is the UI's ring, or nil with the UI off.
func (u *UIOptions) ring() *web.Ring {
	if !u.Enabled {
		return nil
	}
	return web.NewRing(web.RingConfig{MaxRollouts: u.MaxRollouts, MaxPods: u.MaxPods, MaxBytes: int64(u.MaxMiB) << 20})
}

// handler is the UI on the metrics address addr.
func (u *UIOptions) handler(ring *web.Ring, addr string) (http.Handler, error) {
	hosts, err := web.ListenHosts(addr, u.AllowedHosts)
	if err != nil {
		return nil, err
	}
	return web.NewServer(ring, web.ServerConfig{TraceUI: u.TraceURL, Hosts: hosts}), nil
}

// registerRingMetrics exposes the UI ring's size, so what the UI costs shows next to the rest.
func registerRingMetrics(reg prometheus.Registerer, ring *web.Ring) {
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "readyspan_ui_ring_bytes",
			Help: "Bytes of trace views the web UI's ring of recent traces holds (bounded by --ui-max-mib)."},
			func() float64 { return float64(ring.Bytes()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "readyspan_ui_ring_rollouts",
			Help: "Rollout traces the web UI's ring holds (bounded by --ui-rollouts)."},
			func() float64 { r, _ := ring.Len(); return float64(r) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "readyspan_ui_ring_pods",
			Help: "Pod traces the web UI's ring holds (bounded by --ui-pods)."},
			func() float64 { _, p := ring.Len(); return float64(p) }),
	)
}
