package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/readyspan/readyspan/exporters/otlp"
	"github.com/readyspan/readyspan/exporters/terminal"
	"github.com/readyspan/readyspan/node"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/rollout/tracker"
	"github.com/readyspan/readyspan/safetext"
	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/watch"
)

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string { return strings.Join(*s, ",") }
func (s *stringList) Type() string   { return "strings" }
func (s *stringList) Set(v string) error {
	for _, x := range strings.Split(v, ",") {
		if x = strings.TrimSpace(x); x != "" {
			*s = append(*s, x)
		}
	}
	return nil
}

// onOff is a flag that is on or off, spelt so (--trace-context=off).
type onOff bool

func (o *onOff) String() string {
	if *o {
		return "on"
	}
	return "off"
}
func (o *onOff) Type() string { return "on|off" }
func (o *onOff) Set(v string) error {
	switch v {
	case "on":
		*o = true
	case "off":
		*o = false
	default:
		return fmt.Errorf("want on or off, got %q", v)
	}
	return nil
}

// newFlagSet is a command's flag set: kubectl-style flags (--long, -x) that may stand anywhere
// among the arguments (readyspan explain pod/web -n prod), and a usage line naming the command
// the way it was invoked (readyspan or kubectl readyspan).
func newFlagSet(name, synopsis string, stderr io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet(prog+" "+name, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage:\n  %s %s %s\n\nFlags:\n%s", prog, name, synopsis, fs.FlagUsages())
	}
	return fs
}

// kubectlFlags are the connection flags of the commands a person runs from a terminal (watch,
// explain, record): kubectl's own (genericclioptions), with kubectl's meaning, so that
// `kubectl readyspan explain deployment/web -n prod --context staging` talks to the cluster and
// namespace `kubectl get deployment/web -n prod --context staging` would.
type kubectlFlags struct {
	config        *genericclioptions.ConfigFlags
	allNamespaces bool
	selector      string
	encoding      encodingFlag // the commands that watch
}

// register adds kubectl's flags; withAll adds -A/--all-namespaces for the commands that watch.
func (k *kubectlFlags) register(fs *pflag.FlagSet, withAll bool) {
	k.config = genericclioptions.NewConfigFlags(true)
	k.config.AddFlags(fs)
	if withAll {
		fs.BoolVarP(&k.allNamespaces, "all-namespaces", "A", false, "watch every namespace (default: the one -n or the kubeconfig context names)")
		k.encoding.register(fs)
	}
	fs.StringVarP(&k.selector, "selector", "l", "", "label selector for the Pods to trace")
}

// namespace is the namespace kubectl would use: -n, else the kubeconfig context's, else
// "default" (or the ServiceAccount's namespace when running in a Pod without a kubeconfig).
func (k *kubectlFlags) namespace() (string, error) {
	if err := k.checkKubeconfig(); err != nil {
		return "", err
	}
	ns, _, err := k.config.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", fmt.Errorf("load kubeconfig: %s", safetext.OneLine(err))
	}
	return ns, nil
}

// watched is the namespaces to watch: all with -A, else the one namespace() names.
func (k *kubectlFlags) watched() ([]string, error) {
	if k.allNamespaces {
		return nil, nil
	}
	ns, err := k.namespace()
	if err != nil {
		return nil, err
	}
	return []string{ns}, nil
}

// checkKubeconfig turns a --kubeconfig that does not exist into one clear line (client-go would
// report it as a load error of the merged configuration), and a $KUBECONFIG that names no file
// that exists too (missingKubeconfigEnv).
func (k *kubectlFlags) checkKubeconfig() error {
	if p := *k.config.KubeConfig; p != "" {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("kubeconfig %s: %w", p, err)
		}
		return nil
	}
	if k.config.APIServer != nil && *k.config.APIServer != "" {
		return nil // --server needs no kubeconfig
	}
	return missingKubeconfigEnv()
}

// missingKubeconfigEnv reports a $KUBECONFIG none of whose files exists. client-go skips missing
// files silently (its loader's MissingConfigError, "Config not found: …", is logged at -v=1 only,
// for kubectl too) and goes on with an empty configuration: http://localhost:8080, so the user
// reads "cannot reach the apiserver at http://localhost:8080" and not why. Outside a Pod, where
// client-go would use the in-cluster configuration instead, it is an error.
func missingKubeconfigEnv() error {
	env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar)
	var missing []string
	for _, p := range filepath.SplitList(env) {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			return nil // there, or unreadable: client-go reports that itself
		}
		missing = append(missing, p)
	}
	if len(missing) == 0 {
		return nil
	}
	if _, err := rest.InClusterConfig(); err == nil {
		return nil
	}
	return fmt.Errorf("kubeconfig not found: $%s names %s, and no such file exists", clientcmd.RecommendedConfigPathEnvVar, strings.Join(missing, ", "))
}

func (k *kubectlFlags) restConfig() (*rest.Config, error) {
	if err := k.checkKubeconfig(); err != nil {
		return nil, err
	}
	cfg, err := k.config.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %s", safetext.OneLine(err))
	}
	return cfg, nil
}

// watchConfig is what watch and record watch: the namespaces, the Pods' selector, the encoding
// (client() has checked it).
func (k *kubectlFlags) watchConfig(namespaces []string, jsonClient kubernetes.Interface) watch.Config {
	enc, _ := k.encoding.value()
	return watch.Config{Namespaces: namespaces, Selector: k.selector, Encoding: enc, JSONClient: jsonClient}
}

// client is the clientset of the commands a person runs, in the encoding --watch-encoding names
// (protobuf for explain, which has no such flag), and the JSON one kinds with no protobuf
// encoding are read through.
func (k *kubectlFlags) client() (kubernetes.Interface, kubernetes.Interface, *rest.Config, error) {
	enc, err := k.encoding.value()
	if err != nil {
		return nil, nil, nil, err
	}
	cfg, err := k.restConfig()
	if err != nil {
		return nil, nil, nil, err
	}
	return newClient(cfg, enc)
}

// daemonFlags select the cluster and what to watch for `readyspan run`, the in-cluster daemon:
// no kubeconfig means the in-cluster config, and every namespace unless --namespace narrows it.
type daemonFlags struct {
	kubeconfig string
	context    string
	namespaces stringList
	selector   string
	encoding   encodingFlag
}

func (c *daemonFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "path to a kubeconfig (default: $KUBECONFIG, ~/.kube/config, or the in-cluster config)")
	fs.StringVar(&c.context, "context", "", "kubeconfig context to use")
	fs.Var(&c.namespaces, "namespace", "namespace to watch (repeatable; default: all)")
	fs.StringVar(&c.selector, "selector", "", "label selector for the Pods to trace")
	c.encoding.register(fs)
}

// client is the daemon's clientset in enc (daemon.Options.Validate has checked it), and the JSON
// one kinds with no protobuf encoding are read through.
func (c *daemonFlags) client(enc watch.Encoding) (kubernetes.Interface, kubernetes.Interface, *rest.Config, error) {
	cfg, err := c.restConfig()
	if err != nil {
		return nil, nil, nil, err
	}
	return newClient(cfg, enc)
}

// encodingFlag is --watch-encoding: what the commands that watch ask the apiserver for.
type encodingFlag struct{ name string }

func (e *encodingFlag) register(fs *pflag.FlagSet) {
	fs.StringVar(&e.name, "watch-encoding", string(watch.DefaultEncoding), "encoding of the lists and watches: protobuf (JSON accepted where the apiserver has no protobuf for a kind) or json")
}

// value is the encoding asked for; protobuf for a command without the flag.
func (e *encodingFlag) value() (watch.Encoding, error) {
	if e.name == "" {
		return watch.DefaultEncoding, nil
	}
	enc, err := watch.ParseEncoding(e.name)
	if err != nil {
		return "", fmt.Errorf("--watch-encoding: %w", err)
	}
	return enc, nil
}

func (c *daemonFlags) restConfig() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if c.kubeconfig != "" {
		if _, err := os.Stat(c.kubeconfig); err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", c.kubeconfig, err)
		}
		rules.ExplicitPath = c.kubeconfig
	} else if err := missingKubeconfigEnv(); err != nil {
		return nil, err
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: c.context})
	cfg, err := cc.ClientConfig()
	if err == nil {
		return cfg, nil
	}
	if c.kubeconfig == "" && os.Getenv("KUBECONFIG") == "" {
		if in, inErr := rest.InClusterConfig(); inErr == nil {
			return in, nil
		}
	}
	return nil, fmt.Errorf("load kubeconfig: %s", safetext.OneLine(err))
}

// newClient builds the clientsets that name themselves and may burst through the initial lists:
// the one asking for enc, and the JSON one (watch.NewClients).
func newClient(cfg *rest.Config, enc watch.Encoding) (kubernetes.Interface, kubernetes.Interface, *rest.Config, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "readyspan/" + version
	cfg.QPS, cfg.Burst = 50, 100
	cs, js, err := watch.NewClients(cfg, enc)
	if err != nil {
		return nil, nil, nil, err
	}
	return cs, js, cfg, nil
}

// outputFlag is -o: "waterfall" (default), "json" (one JSON object per span per line) or, for
// the commands that end (explain, replay), "html" (one self-contained page with every trace).
type outputFlag struct {
	format string
	html   bool // the command accepts html
}

func (o *outputFlag) register(fs *pflag.FlagSet) {
	help := "output: waterfall or json (one JSON object per span per line)"
	if o.html {
		help = "output: waterfall, json (one JSON object per span per line) or html (one self-contained page: rollout Gantt charts, Pod and node waterfalls)"
	}
	fs.StringVarP(&o.format, "output", "o", "waterfall", help)
}

func (o *outputFlag) validate() error {
	switch {
	case o.format == "waterfall", o.format == "json":
		return nil
	case o.format == "html" && o.html:
		return nil
	case o.format == "html":
		return errors.New("-o html writes one page once every trace is known: use it with explain or replay (readyspan run serves the same view live)")
	case o.html:
		return fmt.Errorf("unknown output %q: use waterfall, json or html", o.format)
	}
	return fmt.Errorf("unknown output %q: use waterfall or json", o.format)
}

// writeRollout prints a rollout: its Gantt chart, or its spans as JSON lines. Both pass through
// safetext.Writer: the renderers escape every cluster string they print, and the Writer keeps
// any they missed from reaching the terminal as a control sequence (JSON's own escapes leave
// nothing for it to change).
func (o *outputFlag) writeRollout(out io.Writer, t *rollout.Trace) error {
	w := safetext.NewWriter(out)
	defer w.Flush()
	if o.format == "json" {
		return terminal.JSONRollout(w, t)
	}
	if err := terminal.Gantt(w, t); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w)
	return err
}

// writeNode prints a node's startup trace: its waterfall, or its spans as JSON lines (see
// writeRollout).
func (o *outputFlag) writeNode(out io.Writer, t *node.Trace) error {
	w := safetext.NewWriter(out)
	defer w.Flush()
	if o.format == "json" {
		return terminal.JSONNode(w, t)
	}
	if err := terminal.NodeWaterfall(w, t); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w)
	return err
}

// write prints a Pod trace: its waterfall, or its spans as JSON lines (see writeRollout).
func (o *outputFlag) write(out io.Writer, t *phases.Trace) error {
	w := safetext.NewWriter(out)
	defer w.Flush()
	if o.format == "json" {
		return terminal.JSONLines(w, t)
	}
	if err := terminal.Waterfall(w, t); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w)
	return err
}

// sortTraces orders traces by start, then namespace and name, for stable output.
func sortTraces(ts []*phases.Trace) {
	sort.SliceStable(ts, func(i, j int) bool {
		a, b := ts[i], ts[j]
		if !a.Root().Start.Equal(b.Root().Start) {
			return a.Root().Start.Before(b.Root().Start)
		}
		if a.Pod.Namespace != b.Pod.Namespace {
			return a.Pod.Namespace < b.Pod.Namespace
		}
		return a.Pod.Name < b.Pod.Name
	})
}

// traceFlags tune when a trace is complete.
type traceFlags struct {
	stuckAfter        time.Duration
	failAfter         time.Duration
	backfill          bool
	rolloutStuckAfter time.Duration
	rolloutBlocked    time.Duration
	traceContext      onOff
}

func (t *traceFlags) register(fs *pflag.FlagSet) {
	fs.DurationVar(&t.stuckAfter, "stuck-after", tracer.DefaultStuckAfter, "export a Pod not Ready this long after creation as stuck")
	fs.DurationVar(&t.failAfter, "fail-after", tracer.DefaultFailAfter, "export a Pod whose failure (ErrImagePull, CrashLoopBackOff…) persists this long as failed")
	fs.BoolVar(&t.backfill, "backfill", false, "also trace Pods that were already Ready when readyspan started")
	fs.DurationVar(&t.rolloutStuckAfter, "rollout-stuck-after", tracker.DefaultStuckAfter, "export a rollout without the controller's verdict this long after it began as failed")
	fs.DurationVar(&t.rolloutBlocked, "rollout-blocked-after", tracker.DefaultBlockedAfter, "export a rollout whose Pod creates the apiserver has refused this long (quota, admission, PodSecurity), none made since, as blocked")
	t.traceContext = true
	fs.Var(&t.traceContext, "trace-context", "join traces to the tracing.k8s.io/traceparent annotation of workloads and Pods (docs/trace-context.md); "+
		"off where whoever may annotate them must not be able to place readyspan's spans in other traces")
}

func (t *traceFlags) config() tracer.Config {
	return tracer.Config{StuckAfter: t.stuckAfter, FailAfter: t.failAfter, Backfill: t.backfill, Settle: 2 * time.Second,
		RolloutStuckAfter: t.rolloutStuckAfter, RolloutBlockedAfter: t.rolloutBlocked, IgnoreTraceContext: !bool(t.traceContext)}
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: use debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// otlpFlags select the OTLP backend. Unset flags leave the standard OTEL_EXPORTER_OTLP_*
// variables in charge.
type otlpFlags struct {
	endpoint, protocol, headers string
	insecure                    bool
}

func (o *otlpFlags) register(fs *pflag.FlagSet, endpointHelp string) {
	fs.StringVar(&o.endpoint, "otlp-endpoint", "", endpointHelp)
	fs.StringVar(&o.protocol, "otlp-protocol", envOr("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"), "OTLP protocol: grpc or http")
	fs.BoolVar(&o.insecure, "otlp-insecure", false, "OTLP without TLS (also $OTEL_EXPORTER_OTLP_INSECURE=true)")
	fs.StringVar(&o.headers, "otlp-headers", "", "OTLP headers, k=v,k2=v2 (also $OTEL_EXPORTER_OTLP_HEADERS)")
}

func (o *otlpFlags) config() (otlp.Config, error) {
	h, err := parseHeaders(o.headers)
	if err != nil {
		return otlp.Config{}, err
	}
	return otlp.Config{Protocol: o.protocol, Endpoint: o.endpoint, Insecure: o.insecure, Headers: h}, nil
}

// parseOutput parses flags and the -o value together: every printing command does both. It
// returns the positional arguments.
func parseOutput(fs *pflag.FlagSet, args []string, out *outputFlag) ([]string, error) {
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return fs.Args(), out.validate()
}
