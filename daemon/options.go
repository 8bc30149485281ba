// Package daemon is `readyspan run`: it builds the live pipeline (package pipeline) with its
// router as the sink, routes every finished trace through the leader gate to the exporters
// (OTLP, Prometheus, the web UI's ring), serves /metrics, /healthz, /readyz and the UI, and
// stops in one order. The command parses flags into Options; everything after Validate is here,
// so the daemon can be run and tested as a package, as kube-state-metrics splits pkg/options
// from pkg/app.
package daemon

import (
	"errors"
	"fmt"

	"github.com/readyspan/readyspan/access"
	"github.com/readyspan/readyspan/exporters/otlp"
	promexp "github.com/readyspan/readyspan/exporters/prometheus"
	"github.com/readyspan/readyspan/pipeline"
	"github.com/readyspan/readyspan/shard"
	"github.com/readyspan/readyspan/web"
)

// Options is everything the daemon runs with, but the client (the command builds it from the
// kubeconfig) and the logger.
type Options struct {
	// Pipeline is what to watch and how to correlate it. The daemon sets the rest: the watch's
	// Shard from the Options' Shard, Webhooks from Receive, the correlator's resume point from
	// the state file or the Lease, and the sinks (its router).
	Pipeline pipeline.Options
	// Shard is this replica's part of the cluster (zero: all of it).
	Shard shard.Shard
	// MetricsAddr serves /metrics, /healthz, /readyz, the UI and, with Pprof, Go's profiles.
	MetricsAddr string
	Pprof       bool
	// Metrics are the opt-in labels of the Pod histograms and their cap.
	Metrics promexp.Options
	// Access says who may read MetricsAddr.
	Access access.Config
	// OTLP is the trace backend and the bounds of what is queued for it.
	OTLP   otlp.Config
	Leader LeaderOptions
	UI     UIOptions
	// Receive is the OTLP input for the components' own spans (Addr "" for none).
	Receive ReceiveOptions
	// StateFile is where a stopping daemon records what it exported ("" for none).
	StateFile string
	// Version is reported by readyspan_build_info and the start-up line.
	Version string
}

// LeaderOptions run several replicas of which only the holder of a Lease exports.
type LeaderOptions struct {
	Elect     bool
	Namespace string
	// Lease is the Lease's name; a shard's Lease is this name with -shard-N-of-M added.
	Lease string
}

// UIOptions configure the web UI on MetricsAddr.
type UIOptions struct {
	Enabled  bool
	TraceURL string // a trace UI's URL with {trace_id}; "" for no links
	// AllowedHosts are more names the UI answers to, beyond the listen address's own.
	AllowedHosts []string
	MaxRollouts  int
	MaxPods      int
	MaxMiB       int
}

// Validate checks the options before any work: a daemon that would fail later says so now.
func (o *Options) Validate() error {
	if o.MetricsAddr == "" {
		return errors.New("--metrics-addr must be set")
	}
	if err := o.Pipeline.Validate(); err != nil {
		return err
	}
	if o.OTLP.QueueTraces <= 0 || o.OTLP.QueueBytes <= 0 {
		return fmt.Errorf("--otlp-queue-traces and --otlp-queue-bytes must be positive, got %d and %d", o.OTLP.QueueTraces, o.OTLP.QueueBytes)
	}
	if err := o.Metrics.Validate(); err != nil {
		return err
	}
	if o.Leader.Elect && (o.Leader.Namespace == "" || o.Leader.Lease == "") {
		return errors.New("--leader-elect needs --leader-elect-namespace and --leader-elect-lease-name")
	}
	if o.Receive.Addr != "" {
		if err := o.Receive.Validate(); err != nil {
			return err
		}
		if o.Receive.Wait < 0 {
			return fmt.Errorf("--otlp-receive-wait must not be negative, got %s", o.Receive.Wait)
		}
		if o.Receive.Addr == o.MetricsAddr {
			return fmt.Errorf("--otlp-receive and --metrics-addr must differ, both are %s", o.MetricsAddr)
		}
	}
	if o.UI.Enabled {
		if err := web.CheckTraceUI(o.UI.TraceURL); err != nil {
			return err
		}
		if o.UI.MaxRollouts <= 0 || o.UI.MaxPods <= 0 || o.UI.MaxMiB <= 0 {
			return errors.New("--ui-rollouts, --ui-pods and --ui-max-mib must be positive")
		}
		if _, err := web.ListenHosts(o.MetricsAddr, o.UI.AllowedHosts); err != nil {
			return err
		}
	}
	return nil
}

// LeaseName is the Lease a replica contends for: each shard elects its own leader.
func (o *Options) LeaseName() string {
	if !o.Shard.Sharded() {
		return o.Leader.Lease
	}
	return fmt.Sprintf("%s-shard-%d-of-%d", o.Leader.Lease, o.Shard.Index, o.Shard.Total)
}
