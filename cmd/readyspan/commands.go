package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/readyspan/readyspan/daemon"
	"github.com/readyspan/readyspan/node"
	"github.com/readyspan/readyspan/otlpin"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/pipeline"
	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/rollout/tracker"
	"github.com/readyspan/readyspan/safetext"
	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/watch"
	"k8s.io/client-go/kubernetes"
)

// runWatch is `readyspan watch`: a live waterfall for each Pod as its startup completes.
func runWatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("watch", "[-n NS | -A] [flags]", stderr)
	var kf kubectlFlags
	var tf traceFlags
	var out outputFlag
	kf.register(fs, true)
	tf.register(fs)
	out.register(fs)
	duration := fs.Duration("for", 0, "stop after this long (default: until interrupted)")
	auditLog := fs.String("audit-log", "", "kube-apiserver audit log to follow (measures the apiserver phase)")
	receive := fs.String("otlp-receive", "", "receive the components' own spans (kube-apiserver, kubelet, containerd) over OTLP/gRPC and OTLP/HTTP on this loopback host:port and join them into each Pod's trace, as readyspan run does (docs/otlp.md)")
	receiveWait := fs.Duration("otlp-receive-wait", daemon.DefaultComponentWait, "with --otlp-receive: how long a finished Pod trace waits, at most, for the components' spans it expects before it is printed with what arrived")
	if _, err := parseOutput(fs, args, &out); err != nil {
		return err
	}
	namespaces, err := kf.watched()
	if err != nil {
		return err
	}
	client, jsonClient, restCfg, err := kf.client()
	if err != nil {
		return err
	}
	log, _ := newLogger(stderr, "warn")
	pr := &printer{out: out, w: stdout}
	var sink tracer.Sink = tracer.SinkFunc(pr.pod)
	if *receive != "" {
		join, err := daemon.StartComponentJoin(ctx, daemon.ReceiveOptions{Config: otlpin.Config{Addr: *receive}, Wait: *receiveWait}, sink.Export, log)
		if err != nil {
			return err
		}
		// Deferred first, run last: the traces still waiting are printed before the watch ends.
		defer func() { _ = join.Stop(context.WithoutCancel(ctx)) }()
		sink = tracer.SinkFunc(join.Pod)
	}
	o := pipeline.Options{Trace: tf.config(), Watch: kf.watchConfig(namespaces, jsonClient), AuditLog: *auditLog}
	if err := o.Validate(); err != nil {
		return err
	}
	p := pipeline.NewLive(o, pipeline.Env{Client: client, Host: restCfg.Host, Log: log,
		AuditFailed: func(err error) {
			fmt.Fprintf(stderr, "%s: not reading the audit log: %v\n", prog, err)
		},
	}, pipeline.Sinks{Pods: sink, Rollouts: tracker.SinkFunc(pr.rollout), Nodes: tracer.NodeSinkFunc(pr.node)})
	ctx, stop, err := p.Source.StartFor(ctx, *duration)
	if err != nil {
		return err
	}
	defer stop()
	syncCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := p.Source.Watcher().WaitForSync(syncCtx); err != nil {
		return fmt.Errorf("watch %s: %w", restCfg.Host, err)
	}
	fmt.Fprintf(stderr, "%s: watching %s; a waterfall is printed as each Pod becomes Ready, fails or gets stuck, and as each new Node finishes starting, and a Gantt chart as each rollout ends (Ctrl-C to stop)\n", prog, namespacesText(namespaces))
	p.Run(ctx)
	return pr.firstErr()
}

// printer is watch's sink: it prints each trace as it finishes, from the correlator's goroutine
// and the join stage's, and keeps the first write error for the command's end.
type printer struct {
	out outputFlag
	w   io.Writer
	mu  sync.Mutex
	err error
}

func (p *printer) pod(t *phases.Trace) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.out.write(p.w, t); err != nil && p.err == nil {
		p.err = err
	}
}

func (p *printer) rollout(t *rollout.Trace) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.out.writeRollout(p.w, t); err != nil && p.err == nil {
		p.err = err
	}
}

func (p *printer) node(t *node.Trace) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.out.writeNode(p.w, t); err != nil && p.err == nil {
		p.err = err
	}
}

func (p *printer) firstErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

func namespacesText(namespaces []string) string {
	if len(namespaces) == 0 {
		return "all namespaces"
	}
	return "namespace " + strings.Join(namespaces, ", ")
}

// runExplain is `readyspan explain (pod|deployment|statefulset|daemonset)/NAME`: a one-shot
// reconstruction from what the API still holds (objects, conditions, statuses, and events
// younger than their 1 h TTL). A workload shows its latest rollout as a Gantt chart.
func runExplain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("explain", "("+explainNames("|", "|")+")/NAME [-n NS] [flags]", stderr)
	var kf kubectlFlags
	out := outputFlag{html: true}
	kf.register(fs, false)
	out.register(fs)
	withPods := fs.Bool("pods", false, "for a workload, also print the waterfall of each of its current Pods")
	revision := fs.String("revision", "", "for a workload, the rollout of this revision (only the latest can be rebuilt from the API; older ones from a recording: readyspan replay)")
	var traceURL string
	registerTraceURL(fs, &traceURL)
	pos, err := parseOutput(fs, args, &out)
	if err != nil {
		return err
	}
	if err := checkTraceURL(traceURL); err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("explain needs one argument: " + explainNames("/NAME, ", "/NAME or ") + "/NAME")
	}
	kindArg, name, ok := strings.Cut(pos[0], "/")
	if !ok || name == "" {
		return fmt.Errorf("explain %q: want %s/NAME", pos[0], explainNames("/NAME, ", "/NAME or "))
	}
	ek, ok := explainKinds[strings.ToLower(kindArg)]
	if !ok {
		return fmt.Errorf("explain %s/%s: kind must be %s", kindArg, name, explainNames(", ", " or "))
	}
	kind := ek.Kind
	namespace, err := kf.namespace()
	if err != nil {
		return err
	}
	client, _, restCfg, err := kf.client()
	if err != nil {
		return err
	}
	if kind == "Node" {
		return explainNode(ctx, client, restCfg.Host, name, traceURL, &out, stdout)
	}
	var traces []*phases.Trace
	var rollouts []*rollout.Trace
	err = pipeline.Explain(ctx, pipeline.Env{Client: client, Host: restCfg.Host}, pipeline.Target{Kind: kind, Namespace: namespace, Name: name}, pipeline.Sinks{
		Pods:     tracer.SinkFunc(func(t *phases.Trace) { traces = append(traces, t) }),
		Rollouts: tracker.SinkFunc(func(t *rollout.Trace) { rollouts = append(rollouts, t) }),
	})
	if err != nil {
		return err
	}
	if out.format == "html" {
		sortTraces(traces)
		return writeReport(stdout, "readyspan explain "+pos[0]+" -n "+namespace, traceURL, traces, rollouts, nil)
	}
	for _, t := range rollouts {
		if *revision != "" && t.Rollout.Revision != *revision {
			return fmt.Errorf("%s %s/%s: the latest rollout is revision %s; only the latest can be rebuilt from what the API holds (record the cluster with readyspan record to keep earlier ones)",
				strings.ToLower(kind), namespace, name, t.Rollout.Revision)
		}
		if err := out.writeRollout(stdout, t); err != nil {
			return err
		}
	}
	if kind != "Pod" && ek.Rollouts && !*withPods {
		return nil // a workload without rollouts (a Job, a CronJob) is shown by its Pods
	}
	sortTraces(traces)
	for _, t := range traces {
		for _, w := range t.TimeWarnings() {
			printWarning(stderr, w)
		}
		if err := out.write(stdout, t); err != nil {
			return err
		}
	}
	return nil
}

// explainNode is `readyspan explain node/NAME`: the Node's startup, from what the API holds of it
// (its creation, conditions, NodeClaim, DaemonSet Pods; no watch times, so each boundary is the
// API's own stamp).
func explainNode(ctx context.Context, client kubernetes.Interface, host, name, traceURL string, out *outputFlag, stdout io.Writer) error {
	var nodes []*node.Trace
	err := pipeline.Explain(ctx, pipeline.Env{Client: client, Host: host}, pipeline.Target{Kind: "Node", Name: name},
		pipeline.Sinks{Nodes: tracer.NodeSinkFunc(func(t *node.Trace) { nodes = append(nodes, t) })})
	if err != nil {
		return err
	}
	if len(nodes) == 0 {
		return fmt.Errorf("node %s: nothing to rebuild its startup from", name)
	}
	if out.format == "html" {
		return writeReport(stdout, "readyspan explain node/"+name, traceURL, nil, nil, nodes[:1])
	}
	return out.writeNode(stdout, nodes[0])
}

// explainKinds maps what explain accepts (kubectl's names and short names) to a kind, from the
// registry of kinds.
var explainKinds = func() map[string]watch.Explainable {
	m := map[string]watch.Explainable{}
	for _, k := range tracer.Kinds.ExplainKinds() {
		for _, n := range k.Names {
			m[n] = k
		}
	}
	return m
}()

// explainNames is what usage and errors list: each kind's first name, "pod, deployment, …".
func explainNames(sep, last string) string {
	var names []string
	for _, k := range tracer.Kinds.ExplainKinds() {
		names = append(names, k.Names[0])
	}
	if len(names) < 2 {
		return strings.Join(names, sep)
	}
	return strings.Join(names[:len(names)-1], sep) + last + names[len(names)-1]
}

// runRecord is `readyspan record DIR`: writes the watch streams readyspan consumes, one JSON watch
// event per line per stream, each with its local receive time, for bug reports and tests.
func runRecord(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("record", "DIR [-n NS | -A] [flags]", stderr)
	var kf kubectlFlags
	kf.register(fs, true)
	duration := fs.Duration("for", 0, "stop after this long (default: until interrupted)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	pos := fs.Args()
	if len(pos) != 1 {
		return errors.New("record needs one argument: the directory to write")
	}
	dir := pos[0]
	namespaces, err := kf.watched()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create recording directory: %w", err)
	}
	client, jsonClient, restCfg, err := kf.client()
	if err != nil {
		return err
	}
	rec := watch.NewRecorder(tracer.Kinds, dir)
	defer rec.Close()
	log, _ := newLogger(stderr, "warn")
	// Deltas alone: record writes what it sees and correlates nothing.
	p := pipeline.NewLive(pipeline.Options{Watch: kf.watchConfig(namespaces, jsonClient)},
		pipeline.Env{Client: client, Host: restCfg.Host, Log: log},
		pipeline.Sinks{Deltas: rec.Write})
	ctx, stop, err := p.Source.StartFor(ctx, *duration)
	if err != nil {
		return err
	}
	defer stop()
	fmt.Fprintf(stderr, "%s: recording %s into %s (Ctrl-C to stop)\n", prog, namespacesText(namespaces), dir)
	p.Run(ctx)
	if err := rec.Close(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "recorded %d watch events into %s\n", rec.Written(), dir)
	return nil
}

// runReplay is `readyspan replay DIR`: rebuilds the traces of a recording offline, prints them,
// and optionally exports them over OTLP.
func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("replay", "DIR [flags]", stderr)
	out := outputFlag{html: true}
	var tf traceFlags
	out.register(fs)
	tf.register(fs)
	listen := fs.String("listen", "", "serve the web UI over the recording on this address instead of printing: :8081 on 127.0.0.1 only, 0.0.0.0:8081 on every address")
	var traceURL string
	registerTraceURL(fs, &traceURL)
	var allowedHosts stringList
	registerAllowedHosts(fs, &allowedHosts)
	var of otlpFlags
	of.register(fs, "also export the traces to this OTLP endpoint")
	allowPartial := fs.Bool("allow-partial", false, "replay a recording with unreadable or refused lines anyway: warn of what was skipped and exit 0")
	pos, err := parseOutput(fs, args, &out)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("replay needs one argument: the recording directory")
	}
	if err := checkTraceURL(traceURL); err != nil {
		return err
	}
	deltas, err := loadRecording(pos[0], *allowPartial, stderr)
	if err != nil {
		return err
	}
	var traces []*phases.Trace
	var rollouts []*rollout.Trace
	var nodes []*node.Trace
	for _, w := range pipeline.Replay(pipeline.Options{Trace: tf.config()}, deltas, pipeline.Sinks{
		Pods:     tracer.SinkFunc(func(t *phases.Trace) { traces = append(traces, t) }),
		Rollouts: tracker.SinkFunc(func(t *rollout.Trace) { rollouts = append(rollouts, t) }),
		Nodes:    tracer.NodeSinkFunc(func(t *node.Trace) { nodes = append(nodes, t) }),
	}) {
		printWarning(stderr, w)
	}
	sortTraces(traces)
	switch {
	case *listen != "":
		return serveReplay(ctx, *listen, traceURL, allowedHosts, traces, rollouts, nodes, stderr)
	case out.format == "html":
		if err := writeReport(stdout, "readyspan replay "+filepath.Base(filepath.Clean(pos[0])), traceURL, traces, rollouts, nodes); err != nil {
			return err
		}
	default:
		for _, t := range traces {
			if err := out.write(stdout, t); err != nil {
				return err
			}
		}
		for _, t := range rollouts {
			if err := out.writeRollout(stdout, t); err != nil {
				return err
			}
		}
		for _, t := range nodes {
			if err := out.writeNode(stdout, t); err != nil {
				return err
			}
		}
	}
	if of.endpoint == "" {
		return nil
	}
	ocfg, err := of.config()
	if err != nil {
		return err
	}
	n, err := pipeline.ExportOTLP(ctx, ocfg, traces, rollouts, nodes)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "%s: exported %d traces to %s\n", prog, n, of.endpoint)
	return nil
}

// loadRecording reads the recording in dir. A replay of part of a recording looks complete
// (Pods are missing, not marked), so one with unreadable or refused lines is refused unless
// allowPartial, rather than printed with a warning a script never reads.
func loadRecording(dir string, allowPartial bool, stderr io.Writer) ([]watch.Delta, error) {
	deltas, err := tracer.Kinds.LoadRecording(dir)
	var le *watch.LoadError
	if err != nil && !errors.As(err, &le) {
		return nil, err
	}
	if le != nil {
		printSkipped(stderr, le)
		if !allowPartial {
			return nil, fmt.Errorf("%v; --allow-partial replays the rest", le)
		}
		printWarning(stderr, le.Error()+" (replaying the rest: --allow-partial)")
	}
	return deltas, nil
}

// printSkipped names each entry of a recording that loading skipped, up to a bound: a hostile
// recording may hold millions.
func printSkipped(w io.Writer, le *watch.LoadError) {
	const shown = 20
	for i, p := range le.Problems {
		if i == shown {
			fmt.Fprintf(w, "%s: skipped: %d more\n", prog, len(le.Problems)-shown)
			break
		}
		fmt.Fprintf(w, "%s: skipped: %s\n", prog, safetext.Cut(p.String(), maxMessage))
	}
}

// printWarning writes a warning that may quote the cluster or a recording: each of its lines
// escaped and bounded for the terminal (safetext), each prefixed with the command's name.
func printWarning(w io.Writer, msg string) { printLines(w, "warning: ", msg) }

// printLines writes msg to w a line at a time, each escaped and bounded for the terminal and
// prefixed with the command's name and prefix.
func printLines(w io.Writer, prefix, msg string) {
	for _, line := range strings.Split(msg, "\n") {
		fmt.Fprintf(w, "%s: %s%s\n", prog, prefix, safetext.Cut(line, maxMessage))
	}
}

// maxMessage bounds one line of a warning or error (bytes of the original): long enough for any
// message readyspan writes itself with a few names in it, short of a 1 MiB Event message.
const maxMessage = 2048
