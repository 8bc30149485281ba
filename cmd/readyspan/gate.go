package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/readyspan/readyspan/gate"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/pipeline"
	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/rollout/tracker"
	"github.com/readyspan/readyspan/safetext"
	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/web"
)

// exitCode is an error that ends the command with its own exit status: the gate's 1 (an
// objective broken; nothing more to print) and 2 (it could not judge).
type exitCode struct {
	code int
	err  error // nil: the verdict said it all
}

func (e *exitCode) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitCode) Unwrap() error { return e.err }

// gateFlags are `readyspan gate`'s flags.
type gateFlags struct {
	kf           kubectlFlags
	tf           traceFlags
	slo          string
	recording    string
	window       time.Duration
	timeout      time.Duration
	waitStarting time.Duration
	output       string
	junit        string
	report       string
	traceURL     string
	// url, tokenFile, caFile: read the traces of a running readyspan (its UI's API) instead of
	// watching.
	url, tokenFile, caFile string
}

// Defaults of the gate's waits.
const (
	defaultGateTimeout  = 15 * time.Minute
	defaultWaitStarting = 2 * time.Minute
	// podTraceGrace is how long, after the rollout's trace, the gate waits for its Pods' own
	// traces still settling (the correlator's settle time, the endpoints).
	podTraceGrace = 10 * time.Second
)

func (g *gateFlags) register(fs *pflag.FlagSet) {
	g.kf.register(fs, true)
	g.tf.register(fs)
	// A gate judges what starts while it watches (a recording is replayed whole): tracing Pods
	// already Ready would judge a rollout that is over.
	_ = fs.MarkHidden("backfill")
	fs.StringVar(&g.slo, "slo", "", "the SLO file to judge against (docs/gate.md; required)")
	fs.StringVar(&g.recording, "recording", "", "judge a recording (readyspan record) offline instead of the cluster")
	fs.DurationVar(&g.window, "for", 0, "judge every Pod started in a window this long (no KIND/NAME)")
	fs.DurationVar(&g.timeout, "timeout", defaultGateTimeout, "with KIND/NAME: how long to wait for the rollout to end before giving up (exit 2)")
	fs.DurationVar(&g.waitStarting, "wait-starting", defaultWaitStarting, "with --for: how long after the window to wait for its Pods still starting; those still starting then count as stuck")
	fs.StringVarP(&g.output, "output", "o", "text", "output: text or json")
	fs.StringVar(&g.junit, "junit", "", "also write the verdict as JUnit XML to this file (one testcase per objective)")
	fs.StringVar(&g.report, "report", "", "also write the self-contained HTML report of the judged traces, the verdict at the top, to this file")
	registerTraceURL(fs, &g.traceURL)
	fs.StringVar(&g.url, "url", "", "judge the traces of a running readyspan's UI (http://readyspan.NS:8080) instead of watching: its rollouts' rotation and the components' spans included")
	fs.StringVar(&g.tokenFile, "token-file", "", "with --url: a file holding the bearer token the daemon asks for (readyspan run --metrics-secure)")
	fs.StringVar(&g.caFile, "ca-file", "", "with an https --url: the PEM certificates to trust for it (default: the system's)")
}

// runGate is `readyspan gate`: judge a rollout, a window of startups, or a recording against an
// SLO file; exit 0 when every objective is met, 1 when one is broken, 2 when it cannot judge.
func runGate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	v, err := gateRun(ctx, args, stdout, stderr)
	switch {
	case errors.Is(err, pflag.ErrHelp):
		return err
	case err != nil:
		return &exitCode{code: gate.ExitNoJudge, err: err}
	case v.Exit != gate.ExitPass:
		return &exitCode{code: v.Exit}
	}
	return nil
}

// gateJob is what one gate run judged: the traces, and the words naming what was waited for.
type gateJob struct {
	title string
	in    gate.Input
	notes []string
	// failed says why the gate could not judge (a timeout); "" when it could.
	failed string
}

func gateRun(ctx context.Context, args []string, stdout, stderr io.Writer) (gate.Verdict, error) {
	fs := newFlagSet("gate", "[KIND/NAME | --for DURATION | --recording DIR] --slo FILE [-n NS | -A] [--url DAEMON] [flags]", stderr)
	var g gateFlags
	g.register(fs)
	if err := fs.Parse(args); err != nil {
		return gate.Verdict{}, err
	}
	if fs.Changed("backfill") {
		return gate.Verdict{}, errors.New("--backfill: a gate judges the Pods that start while it watches")
	}
	target, err := g.check(fs.Args())
	if err != nil {
		return gate.Verdict{}, err
	}
	slo, err := loadSLO(g.slo)
	if err != nil {
		return gate.Verdict{}, err
	}
	var job gateJob
	switch {
	case g.recording != "":
		job, err = g.fromRecording(fs, target, stderr)
	case g.url != "" && target != nil:
		job, err = g.rolloutFromDaemon(ctx, *target, stderr)
	case g.url != "":
		job, err = g.windowFromDaemon(ctx, stderr)
	case target != nil:
		job, err = g.rollout(ctx, *target, stderr)
	default:
		job, err = g.windowed(ctx, stderr)
	}
	if err != nil {
		return gate.Verdict{}, err
	}
	v := gate.Judge(slo, job.in)
	v.Notes = append(job.notes, v.Notes...)
	if job.failed != "" {
		v.Exit = gate.ExitNoJudge
		v.Notes = append(v.Notes, job.failed)
	}
	return v, g.write(stdout, job, v)
}

// gateTarget is the workload whose rollout a gate waits for.
type gateTarget struct {
	kind, arg, name string
}

// check validates the flags together and parses the target.
func (g *gateFlags) check(pos []string) (*gateTarget, error) {
	if g.slo == "" {
		return nil, errors.New("gate needs --slo FILE: the objectives to judge against (docs/gate.md)")
	}
	if g.output != "text" && g.output != "json" {
		return nil, fmt.Errorf("unknown output %q: use text or json", g.output)
	}
	if err := checkTraceURL(g.traceURL); err != nil {
		return nil, err
	}
	if len(pos) > 1 {
		return nil, fmt.Errorf("gate takes at most one KIND/NAME, got %d arguments", len(pos))
	}
	var target *gateTarget
	if len(pos) == 1 {
		t, err := parseGateTarget(pos[0])
		if err != nil {
			return nil, err
		}
		target = t
	}
	switch {
	case target != nil && g.window > 0:
		return nil, errors.New("gate judges a rollout (KIND/NAME) or a window (--for), not both")
	case g.recording == "" && target == nil && g.window <= 0:
		return nil, errors.New("gate needs what to judge: KIND/NAME (a rollout), --for DURATION (a window) or --recording DIR")
	case g.recording != "" && g.window > 0:
		return nil, errors.New("--for is the window of a live gate; a recording is judged whole")
	case g.recording != "" && g.kf.selector != "":
		return nil, errors.New("--selector picks the Pods a live gate watches; a recording holds what it recorded")
	case target != nil && g.kf.allNamespaces:
		return nil, errors.New("a rollout is in one namespace: use -n, not -A")
	case g.url != "" && g.recording != "":
		return nil, errors.New("--url reads a daemon's traces and --recording a recording: give one")
	case g.url == "" && (g.tokenFile != "" || g.caFile != ""):
		return nil, errors.New("--token-file and --ca-file read a daemon: give its --url")
	case g.url != "" && g.kf.selector != "":
		return nil, errors.New("--selector picks the Pods a live gate watches; with --url narrow by namespace (-n)")
	case g.timeout <= 0 || g.waitStarting < 0:
		return nil, errors.New("--timeout must be positive and --wait-starting not negative")
	}
	return target, nil
}

// parseGateTarget reads KIND/NAME: a kind of the registry whose rollouts are traced, by any name
// explain takes for it.
func parseGateTarget(arg string) (*gateTarget, error) {
	kindArg, name, ok := strings.Cut(arg, "/")
	if !ok || name == "" {
		return nil, fmt.Errorf("gate %q: want KIND/NAME, e.g. deployment/web", arg)
	}
	ek, ok := explainKinds[strings.ToLower(kindArg)]
	if !ok || !ek.Rollouts {
		var kinds []string
		for _, k := range tracer.Kinds.ExplainKinds() {
			if k.Rollouts {
				kinds = append(kinds, k.Names[0])
			}
		}
		return nil, fmt.Errorf("gate %s: a rollout is one of a %s; for other Pods judge a window (--for)", arg, strings.Join(kinds, ", "))
	}
	return &gateTarget{kind: ek.Kind, arg: strings.ToLower(kindArg), name: name}, nil
}

// loadSLO reads and validates the SLO file.
func loadSLO(path string) (*gate.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("slo file: %w", err)
	}
	defer f.Close()
	slo, err := gate.Parse(f)
	if err == nil {
		err = slo.Validate()
	}
	if err != nil {
		return nil, fmt.Errorf("slo file %s: %w", path, err)
	}
	return slo, nil
}

// write prints the verdict (text or JSON) and writes the JUnit and report files asked for.
func (g *gateFlags) write(stdout io.Writer, job gateJob, v gate.Verdict) error {
	var err error
	if g.output == "json" {
		w := safetext.NewWriter(stdout)
		if err = gate.WriteJSON(w, job.title, v); err == nil {
			err = w.Flush()
		}
	} else {
		err = gate.WriteText(stdout, job.title, v)
	}
	if err != nil {
		return err
	}
	if g.junit != "" {
		if err := writeFile(g.junit, func(w io.Writer) error { return gate.WriteJUnit(w, job.title, v) }); err != nil {
			return err
		}
	}
	if g.report != "" {
		return writeFile(g.report, func(w io.Writer) error {
			sortTraces(job.in.Pods)
			return web.WriteVerdictReport(w, "readyspan gate "+job.title, g.traceURL, reportVerdict(v), job.in.Pods, job.in.Rollouts, nil)
		})
	}
	return nil
}

// writeFile writes a whole file through fn, reporting a failed close too.
func writeFile(path string, fn func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := fn(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// reportVerdict is the verdict as the report's banner shows it, broken objectives first.
func reportVerdict(v gate.Verdict) web.Verdict {
	out := web.Verdict{Outcome: v.Word(), Headline: v.Headline(), Notes: v.Notes}
	for _, r := range v.Ordered() {
		row := web.VerdictRow{Status: r.Status.Words(), Objective: r.Objective, Message: r.Message,
			Broken: r.Status == gate.StatusBroken || r.Status == gate.StatusNotObserved}
		for _, c := range r.Culprits {
			row.Pods = append(row.Pods, c.Line())
		}
		out.Rows = append(out.Rows, row)
	}
	return out
}

// fromRecording judges a recording: the latest rollout of the target in it (with its Pods), or
// every Pod and rollout (of -n's namespace, when given).
func (g *gateFlags) fromRecording(fs *pflag.FlagSet, target *gateTarget, stderr io.Writer) (gateJob, error) {
	deltas, err := loadRecording(g.recording, false, stderr)
	if err != nil {
		return gateJob{}, err
	}
	var pods []*phases.Trace
	var rollouts []*rollout.Trace
	opts := pipeline.Options{Trace: g.tf.config()}
	for _, w := range pipeline.Replay(opts, deltas, pipeline.Sinks{
		Pods:     tracer.SinkFunc(func(t *phases.Trace) { pods = append(pods, t) }),
		Rollouts: tracker.SinkFunc(func(t *rollout.Trace) { rollouts = append(rollouts, t) }),
	}) {
		printWarning(stderr, w)
	}
	ns := ""
	if fs.Changed("namespace") {
		ns = *g.kf.config.Namespace
	}
	job := gateJob{title: "recording " + g.recording}
	if target == nil {
		job.in = gate.Input{Pods: inNamespace(pods, ns), Rollouts: rolloutsIn(rollouts, ns)}
		return job, nil
	}
	job.title = target.arg + "/" + target.name + " in recording " + g.recording
	var last *rollout.Trace
	for _, rt := range rollouts {
		w := rt.Rollout.Workload
		if w.Kind == target.kind && w.Name == target.name && (ns == "" || w.Namespace == ns) &&
			(last == nil || rt.Root().Start.After(last.Root().Start)) {
			last = rt
		}
	}
	if last == nil {
		return gateJob{}, fmt.Errorf("recording %s holds no rollout of %s/%s", g.recording, target.arg, target.name)
	}
	job.in, job.notes = rolloutInput(last, byUID(pods))
	job.notes = append([]string{fmt.Sprintf("judged the recording's latest rollout of %s/%s: %s, generation %d, revision %s, %s",
		target.arg, target.name, last.Summary.Kind, last.Rollout.Generation, last.Rollout.Revision, last.Summary.Outcome)}, job.notes...)
	return job, nil
}

// rolloutInput is a rollout and its new Pods' traces: the one the rollout holds, else the one
// the gate collected; a Pod with neither is named in a note.
func rolloutInput(rt *rollout.Trace, traced map[string]*phases.Trace) (gate.Input, []string) {
	in := gate.Input{Rollouts: []*rollout.Trace{rt}}
	missing := 0
	for _, np := range rt.Rollout.NewPods {
		t := np.Trace
		if t == nil {
			t = traced[np.UID]
		}
		if t == nil {
			missing++
			continue
		}
		in.Pods = append(in.Pods, t)
	}
	var notes []string
	if missing > 0 {
		notes = append(notes, fmt.Sprintf("%d of the rollout's %d new Pods have no trace (Ready before the gate watched, or deleted unseen): not judged", missing, len(rt.Rollout.NewPods)))
	}
	return in, notes
}

func byUID(pods []*phases.Trace) map[string]*phases.Trace {
	m := make(map[string]*phases.Trace, len(pods))
	for _, t := range pods {
		m[t.Pod.UID] = t
	}
	return m
}

func inNamespace(pods []*phases.Trace, ns string) []*phases.Trace {
	if ns == "" {
		return pods
	}
	var out []*phases.Trace
	for _, t := range pods {
		if t.Pod.Namespace == ns {
			out = append(out, t)
		}
	}
	return out
}

func rolloutsIn(rs []*rollout.Trace, ns string) []*rollout.Trace {
	if ns == "" {
		return rs
	}
	var out []*rollout.Trace
	for _, rt := range rs {
		if rt.Rollout.Workload.Namespace == ns {
			out = append(out, rt)
		}
	}
	return out
}
