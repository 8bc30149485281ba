package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"k8s.io/klog/v2"

	"github.com/readyspan/readyspan/daemon"
	"github.com/readyspan/readyspan/exporters/otlp"
	promexp "github.com/readyspan/readyspan/exporters/prometheus"
	"github.com/readyspan/readyspan/otlpin"
	"github.com/readyspan/readyspan/shard"
	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/watch"
)

// runDaemon is `readyspan run`: its flags become daemon.Options, and the daemon package does the
// rest.
func runDaemon(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("run", "[flags]", stderr)
	var cf daemonFlags
	var tf traceFlags
	var uf uiFlags
	var of otlpFlags
	var o daemon.Options
	cf.register(fs)
	tf.register(fs)
	fs.StringVar(&o.MetricsAddr, "metrics-addr", ":8080", "address for /metrics, /healthz and /readyz")
	of.register(fs, "OTLP endpoint, host:port or URL (default: $OTEL_EXPORTER_OTLP_ENDPOINT, else localhost:4317)")
	fs.BoolVar(&o.Leader.Elect, "leader-elect", false, "run several replicas; only the holder of a Lease exports")
	fs.StringVar(&o.Leader.Namespace, "leader-elect-namespace", envOr("POD_NAMESPACE", "default"), "namespace of the leader-election Lease")
	fs.StringVar(&o.Leader.Lease, "leader-elect-lease-name", "readyspan", "name of the leader-election Lease (with --total-shards above 1, each shard's Lease is this name with -shard-N-of-M added)")
	shardIndex := fs.Int("shard", 0, "this replica's shard, from 0 to --total-shards-1: it traces the Pods and rollouts of the workloads whose key hashes to it (docs/scale.md)")
	totalShards := fs.Int("total-shards", 1, "how many shards split the cluster; each shard runs its own readyspan (or its own leader-elected replicas)")
	fs.StringVar(&o.Pipeline.AuditLog, "audit-log", "", "kube-apiserver audit log (JSON lines) to follow: measures the apiserver phase of Deployment changes and bare Pods")
	fs.StringVar(&o.Receive.Addr, "otlp-receive", "", "receive the components' own spans (kube-apiserver, kubelet, containerd) over OTLP/gRPC and OTLP/HTTP on this host:port and join them into each Pod's trace (docs/otlp.md); where not loopback, senders authenticate with a token the apiserver checks, over TLS")
	fs.StringVar(&o.Receive.CertFile, "otlp-receive-tls-cert-file", "", "serve --otlp-receive over TLS with this certificate (where senders authenticate, a self-signed one is made at start without it)")
	fs.BoolVar(&o.Receive.Insecure, "otlp-receive-insecure", false, "serve --otlp-receive on an address that is not loopback without TLS or tokens: whoever reaches it may add spans to any Pod's trace")
	fs.StringVar(&o.Receive.KeyFile, "otlp-receive-tls-key-file", "", "the key of --otlp-receive-tls-cert-file")
	fs.DurationVar(&o.Receive.Hold, "otlp-receive-hold", otlpin.DefaultHold, "how long received spans that concern a Pod or workload are held for its trace; then they are dropped and counted")
	receiveMiB := fs.Int("otlp-receive-max-mib", otlpin.DefaultMaxBytes>>20, "most MiB of memory the received spans held take (with the strings they share and what the input remembers); past it the oldest are dropped and counted")
	inflightMiB := fs.Int("otlp-receive-inflight-mib", otlpin.DefaultInflightBytes>>20, "most MiB of memory the OTLP requests being read and decoded take together; past it requests are refused with the retryable answer (HTTP 429, gRPC RESOURCE_EXHAUSTED)")
	fs.DurationVar(&o.Receive.Wait, "otlp-receive-wait", daemon.DefaultComponentWait, "how long a finished Pod trace waits, at most, for the components' spans it expects before it is exported with what arrived")
	fs.DurationVar(&o.Receive.LastMileWait, "last-mile-wait", daemon.DefaultLastMileWait, "with readyspan node reporting through --otlp-receive: how long a Pod trace waits, at most, for every reporting node's kube-proxy to put the Pod in its rules (and a rollout, for its old Pods to leave them)")
	fs.StringVar(&o.StateFile, "state-file", "", "file where a stopping readyspan records what it exported, so a restart neither loses nor repeats a trace")
	uf.register(fs)
	maxInFlight := fs.Int("max-in-flight", tracer.DefaultMaxInFlight, "most Pods traced at once; more are dropped and counted")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	var podLabels stringList
	fs.Var(&podLabels, "metrics-pod-labels", "labels to add to the Pod histograms, comma-separated: namespace, workload (off by default; each capped by --metrics-label-limit)")
	fs.IntVar(&o.Metrics.LabelLimit, "metrics-label-limit", promexp.DefaultLabelLimit, "with --metrics-pod-labels: most values each label takes (namespaces; workloads); later ones are recorded as \"other\" and counted in readyspan_metrics_label_overflow_total")
	fs.BoolVar(&o.Pprof, "pprof", false, "serve Go's profiles (net/http/pprof) at /debug/pprof/ on --metrics-addr, behind the same access rules as /metrics")
	// The OTLP queue's bounds: what readyspan keeps while the backend is down or slow.
	queueTraces := fs.Int("otlp-queue-traces", otlp.DefaultQueueTraces, "most traces kept for the OTLP backend while it is down or slow; past it the oldest are dropped and counted")
	queueBytes := fs.Int64("otlp-queue-bytes", otlp.DefaultQueueBytes, "most bytes (estimated OTLP size) of traces kept for the OTLP backend; past it the oldest are dropped and counted")
	// Who may read --metrics-addr: anyone who can reach it (default; see the NetworkPolicy), or
	// over TLS whoever the apiserver says may GET the path.
	fs.BoolVar(&o.Access.Secure, "metrics-secure", false, "serve --metrics-addr over TLS and let only callers the apiserver authorizes (TokenReview, SubjectAccessReview for GET on the path) read /metrics; /healthz and /readyz stay open")
	fs.StringVar(&o.Access.CertFile, "metrics-tls-cert-file", "", "with --metrics-secure: the serving certificate (default: a self-signed one made at start)")
	fs.StringVar(&o.Access.KeyFile, "metrics-tls-key-file", "", "with --metrics-secure: the serving certificate's key")
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
	if o.OTLP, err = of.config(); err != nil {
		return err
	}
	o.OTLP.QueueTraces, o.OTLP.QueueBytes = *queueTraces, *queueBytes
	o.Receive.MaxBytes = int64(*receiveMiB) << 20
	o.Receive.MaxInflightBytes = int64(*inflightMiB) << 20
	if o.Shard, err = shard.New(*shardIndex, *totalShards); err != nil {
		return err
	}
	o.Metrics.PodLabels = podLabels
	o.Pipeline.Watch = watch.Config{Namespaces: cf.namespaces, Selector: cf.selector, Encoding: watch.Encoding(cf.encoding.name)}
	o.Pipeline.Trace = tf.config()
	o.Pipeline.Trace.MaxInFlight = *maxInFlight
	o.UI = uf.options()
	o.Version = version
	if err := o.Validate(); err != nil {
		return err
	}
	client, jsonClient, restCfg, err := cf.client(o.Pipeline.Watch.Encoding)
	if err != nil {
		return err
	}
	o.Pipeline.Watch.JSONClient = jsonClient
	return daemon.Run(ctx, o, client, restCfg.Host, log)
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
