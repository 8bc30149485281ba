// Command scalerun is one load level of the scale test bed (make scale, see docs/scale.md). On a
// cluster whose fake nodes KWOK manages, it starts `readyspan run` (exporting to an OTLP
// receiver of its own) and the bare baseline side by side, each as its own user, applies the load
// driver's Deployments and rollouts, samples both processes from /proc, and writes the report:
// a table on stdout, the figures as JSON and the per-Pod times as JSON lines.
//
//	scalerun --kubeconfig .local/kubeconfig --readyspan bin/readyspan --baseline bin/scale-baseline \
//	  --nodes 50 --pods 1000 --rate 20 --out .local/scale
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/readyspan/readyspan/test/scale/load"
	"github.com/readyspan/readyspan/test/scale/otlpsink"
	"github.com/readyspan/readyspan/test/scale/procstat"
	"github.com/readyspan/readyspan/test/scale/report"
	"github.com/readyspan/readyspan/test/scale/scrape"
	"github.com/readyspan/readyspan/watch"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "scalerun:", err)
		os.Exit(1)
	}
}

type options struct {
	kubeconfig, readyspan, readyspanArgs, baseline, out string
	readyspanEnv                                        string
	otlpAddr, readyspanMetrics, baselineReady           string
	collector, collectorConfig, collectorOTLP           string
	collectorMetrics                                    string
	readyspanEncoding, baselineEncoding                 string
	jsonBaseline, restart                               bool
	restartAfter                                        time.Duration
	nodes, pods, replicas, rolls, namespaces, shards    int
	rate                                                float64
	settle, deadline, steady, idle, exportTimeout       time.Duration
}

func parse() options {
	var o options
	flag.StringVar(&o.kubeconfig, "kubeconfig", ".local/kubeconfig", "the cluster admin's kubeconfig")
	flag.StringVar(&o.readyspan, "readyspan", "bin/readyspan", "readyspan binary")
	flag.StringVar(&o.readyspanArgs, "readyspan-args", "", "more flags for readyspan run, space-separated (e.g. \"--ui=false\")")
	flag.StringVar(&o.readyspanEnv, "readyspan-env", "", "more environment for readyspan run, space-separated KEY=VALUE (e.g. \"GOMEMLIMIT=256MiB\", as the in-cluster manifest sets it from the memory limit)")
	flag.StringVar(&o.baseline, "baseline", "bin/scale-baseline", "baseline binary (test/scale/baseline)")
	flag.StringVar(&o.out, "out", ".local/scale", "directory for the report, the per-Pod times and the processes' logs")
	flag.StringVar(&o.otlpAddr, "otlp-addr", "127.0.0.1:4320", "the receiver readyspan exports to (the trace storage's stand-in)")
	flag.StringVar(&o.collector, "collector", "", "an OpenTelemetry Collector binary (Jaeger v2 is one) to put between readyspan and the receiver, run with --collector-config")
	flag.StringVar(&o.collectorConfig, "collector-config", "deploy/local/config/collector-scale.yaml", "the collector's configuration: OTLP in on --collector-otlp, out to --otlp-addr, its metrics on --collector-metrics")
	flag.StringVar(&o.collectorOTLP, "collector-otlp", "127.0.0.1:4321", "where the collector receives OTLP/gRPC (readyspan exports there when --collector is set)")
	flag.StringVar(&o.collectorMetrics, "collector-metrics", "127.0.0.1:8888", "the collector's own Prometheus metrics")
	flag.StringVar(&o.readyspanMetrics, "readyspan-metrics", "127.0.0.1:8080", "readyspan's --metrics-addr (shard i of --shards listens on the port + 100·i)")
	flag.IntVar(&o.shards, "shards", 1, "readyspan processes splitting the cluster (--shard i --total-shards N), all exporting to the same receiver")
	flag.StringVar(&o.baselineReady, "baseline-ready", "127.0.0.1:8081", "the baseline's --ready-addr")
	flag.StringVar(&o.readyspanEncoding, "readyspan-encoding", "protobuf", "readyspan's --watch-encoding: protobuf or json")
	flag.StringVar(&o.baselineEncoding, "baseline-encoding", "protobuf", "the baseline's --encoding: protobuf or json")
	flag.BoolVar(&o.jsonBaseline, "json-baseline", false, "also run the baseline over JSON, as a third watcher with a user and FlowSchema of its own (with --baseline-encoding protobuf)")
	flag.BoolVar(&o.restart, "restart", true, "after the report's figures, stop readyspan and the baseline and start fresh ones into the full cluster: their catch-up")
	flag.DurationVar(&o.restartAfter, "restart-after", time.Minute, "how long the restarted processes are watched after both synced")
	flag.IntVar(&o.nodes, "nodes", 50, "fake nodes")
	flag.IntVar(&o.pods, "pods", 1000, "Pods existing at the end (Deployments × replicas)")
	flag.IntVar(&o.replicas, "replicas", 10, "replicas per Deployment")
	flag.IntVar(&o.rolls, "rolls", 1, "rollouts of each Deployment after its creation")
	flag.IntVar(&o.namespaces, "namespaces", 4, "namespaces the Deployments are spread over")
	flag.Float64Var(&o.rate, "rate", 20, "Pod startups per second")
	flag.DurationVar(&o.settle, "settle", 2*time.Second, "readyspan's settle time (tracer.Config.Settle of readyspan run), taken off the lag")
	flag.DurationVar(&o.deadline, "deadline", 10*time.Minute, "bound on the load phase")
	flag.DurationVar(&o.idle, "idle", 5*time.Second, "samples after both caches synced, before the load")
	flag.DurationVar(&o.steady, "steady", 15*time.Second, "samples after every trace arrived, with every Pod still cached")
	flag.DurationVar(&o.exportTimeout, "export-timeout", 60*time.Second, "how long after the last Ready to wait for missing traces")
	flag.Parse()
	return o
}

func run(ctx context.Context) (err error) {
	o := parse()
	for _, e := range []string{o.readyspanEncoding, o.baselineEncoding} {
		if _, err := watch.ParseEncoding(e); err != nil {
			return err
		}
	}
	if o.jsonBaseline && o.baselineEncoding == string(watch.EncodingJSON) {
		return errors.New("--json-baseline runs a second baseline over JSON: the first must read protobuf (--baseline-encoding protobuf)")
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return fmt.Errorf("make %s: %w", o.out, err)
	}
	name := fmt.Sprintf("n%d-p%d-r%g", o.nodes, o.pods, o.rate)
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig %s: %w", o.kubeconfig, err)
	}
	cfg.QPS, cfg.Burst, cfg.UserAgent = 200, 400, "readyspan-scale-driver"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("make client: %w", err)
	}
	step := func(format string, args ...any) {
		fmt.Printf("scale: %s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}

	step("watcher users, RBAC and FlowSchemas")
	if err := load.SetUpWatchers(ctx, client); err != nil {
		return err
	}
	rk, bk, jk := filepath.Join(o.out, "readyspan.kubeconfig"), filepath.Join(o.out, "baseline.kubeconfig"), filepath.Join(o.out, "baseline-json.kubeconfig")
	for user, path := range map[string]string{load.ReadyspanUser: rk, load.BaselineUser: bk, load.BaselineJSONUser: jk} {
		if err := impersonating(o.kubeconfig, user, path); err != nil {
			return err
		}
	}
	step("%d fake nodes", o.nodes)
	if err := load.CreateNodes(ctx, client, o.nodes, 3*time.Minute); err != nil {
		return fmt.Errorf("fake nodes not Ready (is kwok running?): %w", err)
	}

	sink := otlpsink.New()
	if err := sink.Start(o.otlpAddr); err != nil {
		return err
	}
	defer sink.Shutdown()
	apiBefore, err := apiserverByUser(ctx, cfg)
	if err != nil {
		return err
	}
	apiserverPid, err := findProcess("kube-apiserver")
	if err != nil {
		return err
	}

	exportTo := o.otlpAddr
	var collectorPid int
	if o.collector != "" {
		step("collector in front of the receiver: %s", o.collectorConfig)
		c, err := startProcess(filepath.Join(o.out, name+"-collector.log"), o.collector, "--config", "file:"+o.collectorConfig)
		if err != nil {
			return err
		}
		defer stopProcess(c)
		if err := waitHTTP(ctx, "http://"+o.collectorMetrics+"/metrics", time.Minute); err != nil {
			return fmt.Errorf("collector: %w", err)
		}
		exportTo, collectorPid = o.collectorOTLP, c.Process.Pid
	}
	step("readyspan (shards: %d) and baseline", o.shards)
	var ready, metricsURLs []string
	var watchers []*exec.Cmd // readyspan's shards, the baseline(s): stopped before the restart
	var pids []int
	for i, addr := range shardAddrs(o.readyspanMetrics, o.shards) {
		rsArgs := append(runArgs(rk, addr, exportTo), "--watch-encoding", o.readyspanEncoding)
		logName := name + "-readyspan.log"
		if o.shards > 1 {
			rsArgs = append(rsArgs, "--shard", fmt.Sprint(i), "--total-shards", fmt.Sprint(o.shards))
			logName = fmt.Sprintf("%s-readyspan-shard%d.log", name, i)
		}
		rs, err := startProcessEnv(filepath.Join(o.out, logName), strings.Fields(o.readyspanEnv), o.readyspan, append(rsArgs, strings.Fields(o.readyspanArgs)...)...)
		if err != nil {
			return err
		}
		defer stopProcess(rs)
		watchers = append(watchers, rs)
		ready, metricsURLs = append(ready, "http://"+addr+"/readyz"), append(metricsURLs, "http://"+addr+"/metrics")
		pids = append(pids, rs.Process.Pid)
	}
	bl, err := startProcess(filepath.Join(o.out, name+"-baseline.log"), o.baseline, "--kubeconfig", bk, "--ready-addr", o.baselineReady, "--encoding", o.baselineEncoding)
	if err != nil {
		return err
	}
	defer stopProcess(bl)
	watchers = append(watchers, bl)
	ready, pids = append(ready, "http://"+o.baselineReady+"/readyz"), append(pids, bl.Process.Pid)
	if o.jsonBaseline {
		const addr = "127.0.0.1:8082"
		bp, err := startProcess(filepath.Join(o.out, name+"-baseline-json.log"), o.baseline, "--kubeconfig", jk, "--ready-addr", addr, "--encoding", "json")
		if err != nil {
			return err
		}
		defer stopProcess(bp)
		watchers = append(watchers, bp)
		ready, pids = append(ready, "http://"+addr+"/readyz"), append(pids, bp.Process.Pid)
	}
	for _, url := range ready {
		if err := waitHTTP(ctx, url, time.Minute); err != nil {
			return err
		}
	}
	if collectorPid != 0 {
		pids = append(pids, collectorPid) // sampled last but one
	}
	pids = append(pids, apiserverPid) // sampled last
	sampler := newSampler(pids...)
	go sampler.run(ctx)
	time.Sleep(o.idle)
	rsBefore, err := getAll(ctx, metricsURLs)
	if err != nil {
		return err
	}

	step("load: %d Pods in Deployments of %d, %d rollouts each, %g Pods/s, %d namespaces", o.pods, o.replicas, o.rolls, o.rate, o.namespaces)
	var nss []string
	for i := 0; i < o.namespaces; i++ {
		nss = append(nss, fmt.Sprintf("scale-%d", i))
	}
	driver := load.New(client, load.Config{Namespaces: nss, Pods: o.pods, Replicas: o.replicas, Rolls: o.rolls, Rate: o.rate, Deadline: o.deadline})
	res, runErr := driver.Run(ctx)
	if runErr != nil && len(res.Pods) == 0 {
		return fmt.Errorf("load: %w", runErr)
	}
	step("load done: %d of %d Pods Ready in %s; waiting for their traces", len(res.Pods), res.Expected, res.End.Sub(res.Start).Round(time.Millisecond))
	waitTraces(ctx, sink, res.Pods, o.settle+o.exportTimeout)
	loadEnd := time.Now()
	step("steady state for %s", o.steady)
	time.Sleep(o.steady)
	rsAfter, err := getAll(ctx, metricsURLs)
	if err != nil {
		return err
	}
	apiAfter, err := apiserverByUser(ctx, cfg)
	if err != nil {
		return err
	}
	end := time.Now()
	samples := sampler.stop()
	apiserverSamples, samples := samples[len(samples)-1], samples[:len(samples)-1]
	var collectorSamples []procstat.Sample
	if collectorPid != 0 {
		collectorSamples, samples = samples[len(samples)-1], samples[:len(samples)-1]
	}
	shardSamples := samples[:o.shards]
	rsSamples, blSamples := sumSamples(shardSamples), samples[o.shards]
	window := report.Window{LoadStart: res.Start, LoadEnd: loadEnd, End: end}
	r, err := build(o, res, sink, rsBefore, rsAfter, scrape.Diff(apiAfter[requestsKey], apiBefore[requestsKey]), rsSamples, blSamples, window)
	if err != nil {
		return err
	}
	// Each watcher's cost and what the apiserver spent on it, from its user's FlowSchema.
	watcher := func(name, enc, user string, p report.Process) report.Watcher {
		return report.Watcher{Name: name, Encoding: enc, User: user, Process: p,
			Requests:       apiAfter[requestsKey][user] - apiBefore[requestsKey][user],
			RequestSeconds: round3(apiAfter[secondsKey][user] - apiBefore[secondsKey][user])}
	}
	r.Watchers = append(r.Watchers,
		watcher("readyspan", o.readyspanEncoding, load.ReadyspanUser, r.Readyspan),
		watcher("baseline", o.baselineEncoding, load.BaselineUser, r.Baseline))
	if len(samples) > o.shards+1 {
		r.Watchers = append(r.Watchers, watcher("baseline", "json", load.BaselineJSONUser, report.Cost(samples[o.shards+1], window, len(res.Pods), o.pods)))
	}
	as := report.Cost(apiserverSamples, window, len(res.Pods), o.pods)
	r.APIServer = &as
	r.APIServerSent = scrape.Diff(apiAfter[sentKey], apiBefore[sentKey])
	if o.shards > 1 {
		for _, ss := range shardSamples {
			r.Shards = append(r.Shards, report.Cost(ss, window, len(res.Pods), o.pods))
		}
	}
	if collectorPid != 0 {
		p := report.Cost(collectorSamples, window, len(res.Pods), o.pods)
		r.Collector = &p
		if text, err := get(ctx, "http://"+o.collectorMetrics+"/metrics"); err == nil {
			r.CollectorSpans = collectorSpans(text)
		} else {
			r.Notes = append(r.Notes, "collector metrics: "+err.Error())
		}
	}
	if len(samples) > o.shards+1 {
		p := report.Cost(samples[o.shards+1], window, len(res.Pods), o.pods)
		r.BaselineJSON = &p
	}
	if runErr != nil {
		r.Notes = append(r.Notes, "load driver: "+runErr.Error())
	}
	if o.restart {
		switch {
		case o.shards > 1:
			r.Notes = append(r.Notes, "restart: not run with shards")
		default:
			for _, w := range watchers {
				stopProcess(w)
			}
			step("restart: a fresh readyspan and baseline into the cluster's %d Pods", len(res.Pods))
			rs, err := restart(ctx, o, name, rk, bk, exportTo, cfg, sink, len(res.Pods))
			if err != nil {
				return fmt.Errorf("restart: %w", err)
			}
			r.Restart = rs
		}
	}
	if err := writeJSON(filepath.Join(o.out, name+".json"), r); err != nil {
		return err
	}
	if err := writePods(filepath.Join(o.out, name+"-pods.jsonl"), res.Pods, sink.Received()); err != nil {
		return err
	}
	if err := writeSamples(filepath.Join(o.out, name+"-samples.jsonl"), rsSamples, blSamples); err != nil {
		return err
	}
	fmt.Println()
	if err := r.Table(os.Stdout); err != nil {
		return err
	}
	fmt.Printf("\nscale: report %s (per-Pod times in %s)\n", filepath.Join(o.out, name+".json"), name+"-pods.jsonl")
	return nil
}

// build assembles the report from what the run recorded.
// Every readyspan shard's metrics are summed.
func build(o options, res load.Result, sink *otlpsink.Sink, rsBefore, rsAfter []string, requests map[string]float64,
	rsSamples, blSamples []procstat.Sample, w report.Window) (*report.Report, error) {
	before, err := families(rsBefore)
	if err != nil {
		return nil, fmt.Errorf("readyspan metrics before the load: %w", err)
	}
	after, err := families(rsAfter)
	if err != nil {
		return nil, fmt.Errorf("readyspan metrics after the load: %w", err)
	}
	byLabel := func(fams []map[string]*dto.MetricFamily, name, label string) map[string]float64 {
		out := map[string]float64{}
		for _, f := range fams {
			for k, v := range scrape.ByLabel(f, name, label, nil) {
				out[k] += v
			}
		}
		return out
	}
	received := sink.Received()
	lags, missing := report.Lag(res.Pods, received, o.settle, false)
	served, _ := report.Lag(res.Pods, received, o.settle, true)
	traces, repeats, _, _ := sink.Counts()
	rollouts, rolloutRepeats := sink.Rollouts()
	startups := len(res.Pods)
	r := &report.Report{
		Level: report.Level{
			Nodes: o.nodes, Pods: o.pods, Startups: res.Expected, Rate: o.rate, Replicas: o.replicas, Rolls: o.rolls,
			Settle: o.settle.String(), Duration: res.End.Sub(res.Start).Round(time.Millisecond).String(),
			Started: res.Start.UTC().Format(time.RFC3339), Machine: machine(),
			Complete: res.Complete, Missing: res.Expected - len(res.Pods), Sustain: report.Sustained(res.Pods),
		},
		ExportLag:       report.Summarize(lags),
		ExportLagServed: report.Summarize(served),
		Traces:          traces,
		NoTrace:         len(missing),
		Readyspan:       report.Cost(rsSamples, w, startups, o.pods),
		Baseline:        report.Cost(blSamples, w, startups, o.pods),
		Repeats:         repeats,
		Rollouts:        rollouts,
		RolloutRepeats:  rolloutRepeats,
		WatchEvents:     scrape.Diff(byLabel(after, "readyspan_watch_events_total", "resource"), byLabel(before, "readyspan_watch_events_total", "resource")),
		Dropped:         byLabel(after, "readyspan_traces_dropped_total", "reason"),
		Unparsed:        byLabel(after, "readyspan_unparsed_messages_total", "reason"),
		ExportErrors:    scrape.Sum(byLabel(after, "readyspan_export_errors_total", "")),
		UIRingMiB:       scrape.Sum(byLabel(after, "readyspan_ui_ring_bytes", "")) / (1 << 20),
		ReadyspanHeap:   report.HeapOf(after[0]),
		Requests:        requests,
	}
	if received := byLabel(after, "readyspan_otlp_received_spans_total", "component"); scrape.Sum(received) > 0 {
		r.OTLPIn = &report.OTLPIn{
			Received:  received,
			Joined:    byLabel(after, "readyspan_otlp_joined_spans_total", "component"),
			Dropped:   byLabel(after, "readyspan_otlp_dropped_spans_total", "reason"),
			HeldSpans: scrape.Sum(byLabel(after, "readyspan_otlp_held_spans", "")),
			HeldMiB:   scrape.Sum(byLabel(after, "readyspan_otlp_held_bytes", "")) / (1 << 20),
			Missing:   byLabel(after, "readyspan_otlp_traces_missing_component_total", "component"),
		}
	}
	if secs := w.LoadEnd.Sub(w.LoadStart).Seconds(); secs > 0 {
		r.WatchEventsPerS = float64(int(scrape.Sum(r.WatchEvents)/secs*10)) / 10
	}
	r.RSSRatio = report.Ratio(r.Readyspan.RSSSteadyMiB, r.Baseline.RSSSteadyMiB)
	r.PeakRatio = report.Ratio(r.Readyspan.RSSPeakMiB, r.Baseline.RSSPeakMiB)
	r.CPURatio = report.Ratio(r.Readyspan.CPUSeconds, r.Baseline.CPUSeconds)
	if repeats > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d traces received more than once", repeats))
	}
	if rolloutRepeats > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d rollout traces received more than once", rolloutRepeats))
	}
	if o.shards > 1 {
		r.RootsByShard = sink.ByShard()
	}
	// A trace cannot arrive a second before the Pod it is about served, except by the driver's
	// clock: its own watch fell behind a loaded apiserver, and its Ready and serving times with it.
	if r.ExportLagServed.N > 0 && r.ExportLagServed.MinMs < -1000 {
		r.Notes = append(r.Notes, fmt.Sprintf("export lags not usable: a trace arrived %.1f s before the driver saw its Pod serve (the driver's watch fell behind)", -r.ExportLagServed.MinMs/1000))
	}
	if traces > len(res.Pods) {
		r.Notes = append(r.Notes, fmt.Sprintf("%d traces of Pods the driver did not see Ready (Ready after it stopped waiting, or never: stuck or deleted)", traces-len(res.Pods)+len(missing)))
	}
	return r, nil
}

// collectorSpans reads, from the collector's own metrics, the spans its receiver accepted and
// refused (the memory limiter refuses) and its exporter sent and failed to send.
func collectorSpans(text string) map[string]float64 {
	fams, err := scrape.Families(scrape.Text(text))
	if err != nil {
		return map[string]float64{"unreadable": 1}
	}
	out := map[string]float64{}
	for key, name := range map[string]string{
		"receiver_accepted": "otelcol_receiver_accepted_spans_total", "receiver_refused": "otelcol_receiver_refused_spans_total",
		"exporter_sent": "otelcol_exporter_sent_spans_total", "exporter_send_failed": "otelcol_exporter_send_failed_spans_total",
	} {
		out[key] = scrape.Sum(scrape.ByLabel(fams, name, "", nil))
	}
	return out
}

// shardAddrs gives each shard its metrics address: the port of addr plus 100 per shard, clear of
// the baselines' addresses next to it.
func shardAddrs(addr string, shards int) []string {
	host, port, err := net.SplitHostPort(addr)
	base, perr := strconv.Atoi(port)
	if err != nil || perr != nil {
		return []string{addr} // reported when readyspan cannot listen on it
	}
	var out []string
	for i := 0; i < max(shards, 1); i++ {
		out = append(out, net.JoinHostPort(host, strconv.Itoa(base+100*i)))
	}
	return out
}

// getAll reads every shard's metrics.
func getAll(ctx context.Context, urls []string) ([]string, error) {
	var out []string
	for _, u := range urls {
		body, err := get(ctx, u)
		if err != nil {
			return nil, err
		}
		out = append(out, body)
	}
	return out, nil
}

func families(texts []string) ([]map[string]*dto.MetricFamily, error) {
	var out []map[string]*dto.MetricFamily
	for _, t := range texts {
		f, err := scrape.Families(scrape.Text(t))
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// sumSamples adds the shards' samples taken in the same round (the sampler reads every process
// once a second): CPU and RSS are the whole readyspan's; the peak is the sum of each one's peak.
func sumSamples(series [][]procstat.Sample) []procstat.Sample {
	if len(series) == 1 {
		return series[0]
	}
	n := len(series[0])
	for _, s := range series {
		n = min(n, len(s))
	}
	out := make([]procstat.Sample, n)
	for i := range out {
		out[i] = series[0][i]
		for _, s := range series[1:] {
			out[i].CPU += s[i].CPU
			out[i].RSS += s[i].RSS
			out[i].PeakRSS += s[i].PeakRSS
			out[i].Threads += s[i].Threads
			out[i].Finished = out[i].Finished || s[i].Finished
		}
	}
	return out
}

// waitTraces returns when every Ready Pod's trace arrived or timeout passed since the call.
func waitTraces(ctx context.Context, sink *otlpsink.Sink, pods []report.PodTimes, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for i := 0; i < len(pods); {
		if sink.Has(report.TraceID(pods[i].UID)) {
			i++
			continue
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func machine() string {
	mem := "?"
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err == nil {
			mem = fmt.Sprintf("%.0f GiB", float64(kb)/(1<<20))
		}
	}
	return fmt.Sprintf("%d cores, %s", runtime.NumCPU(), mem)
}

// impersonating writes a copy of the admin kubeconfig that acts as user (client-go's
// impersonation): the apiserver authorizes and classifies its requests as that user's.
func impersonating(adminKubeconfig, user, path string) error {
	cfg, err := clientcmd.LoadFromFile(adminKubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig %s: %w", adminKubeconfig, err)
	}
	for _, a := range cfg.AuthInfos {
		a.Impersonate = user
	}
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

// The figures apiserverByUser reads.
const (
	requestsKey = "requests" // by user: requests dispatched for its FlowSchema
	secondsKey  = "seconds"  // by user: the seconds they executed
	sentKey     = "sent"     // to every client: watch events and their bytes, LIST response bytes
)

// apiserverByUser reads, from the apiserver's /metrics, the requests dispatched for each of the
// watchers' FlowSchemas and the seconds they executed (apiserver_flowcontrol_request_execution_
// _seconds: for a watch, its start and a streamed initial list; what it sends afterwards is the
// apiserver's work of no request), and what it sent every client. None of the apiserver's
// metrics of bytes sent names the user, so a watcher's bytes are what it read (procstat).
func apiserverByUser(ctx context.Context, cfg *rest.Config) (map[string]map[string]float64, error) {
	fams, err := apiserverMetrics(ctx, cfg)
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]float64{requestsKey: {}, secondsKey: {}, sentKey: {}}
	for _, user := range load.WatcherUsers {
		fs := map[string]string{"flow_schema": user}
		out[requestsKey][user] = scrape.Sum(scrape.ByLabel(fams, "apiserver_flowcontrol_dispatched_requests_total", "flow_schema", fs))
		sum, _ := scrape.HistogramByLabel(fams, "apiserver_flowcontrol_request_execution_seconds", "flow_schema", fs)
		out[secondsKey][user] = scrape.Sum(sum)
	}
	sizes, events := scrape.HistogramByLabel(fams, "apiserver_watch_events_sizes", "", nil)
	lists, _ := scrape.HistogramByLabel(fams, "apiserver_response_sizes", "", map[string]string{"verb": "LIST"})
	out[sentKey]["watch events"] = scrape.Sum(events)
	out[sentKey]["watch event MiB"] = scrape.Sum(sizes) / (1 << 20)
	out[sentKey]["LIST response MiB"] = scrape.Sum(lists) / (1 << 20)
	return out, nil
}

// findProcess returns the pid of the one process whose command is comm (/proc/PID/comm).
func findProcess(comm string) (int, error) {
	dirs, err := filepath.Glob("/proc/[0-9]*/comm")
	if err != nil {
		return 0, err
	}
	var found []int
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil || strings.TrimSpace(string(b)) != comm {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		if err == nil {
			found = append(found, pid)
		}
	}
	if len(found) != 1 {
		return 0, fmt.Errorf("%d processes named %s, want one", len(found), comm)
	}
	return found[0], nil
}

func round3(v float64) float64 { return float64(int64(v*1000+0.5)) / 1000 }

// apiserverMetrics scrapes the apiserver's own metrics.
func apiserverMetrics(ctx context.Context, cfg *rest.Config) (map[string]*dto.MetricFamily, error) {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	body, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("get apiserver metrics: %w", err)
	}
	fams, err := scrape.Families(scrape.Text(string(body)))
	if err != nil {
		return nil, fmt.Errorf("apiserver metrics: %w", err)
	}
	return fams, nil
}

// restart starts a fresh readyspan and baseline side by side into the cluster the load left and
// measures their catch-up: the time and CPU to sync, their memory, the apiserver's LIST and WATCH
// requests meanwhile, and the traces readyspan sends (none is expected: every Pod was Ready
// before it started).
func restart(ctx context.Context, o options, name, rk, bk, exportTo string, cfg *rest.Config, sink *otlpsink.Sink, pods int) (*report.Restart, error) {
	apiBefore, err := apiserverListWatch(ctx, cfg)
	if err != nil {
		return nil, err
	}
	tracesBefore, _, _, _ := sink.Counts()
	rolloutsBefore, _ := sink.Rollouts()
	rsArgs := append(runArgs(rk, o.readyspanMetrics, exportTo), "--watch-encoding", o.readyspanEncoding)
	rsArgs = append(rsArgs, strings.Fields(o.readyspanArgs)...)
	started := time.Now()
	rs, err := startProcessEnv(filepath.Join(o.out, name+"-restart-readyspan.log"), strings.Fields(o.readyspanEnv), o.readyspan, rsArgs...)
	if err != nil {
		return nil, err
	}
	defer stopProcess(rs)
	bl, err := startProcess(filepath.Join(o.out, name+"-restart-baseline.log"), o.baseline, "--kubeconfig", bk, "--ready-addr", o.baselineReady, "--encoding", o.baselineEncoding)
	if err != nil {
		return nil, err
	}
	defer stopProcess(bl)
	// Sampled five times a second: the initial lists are where the memory peaks, and VmHWM
	// keeps the peak whatever the sampling misses.
	sampler := newSamplerEvery(200*time.Millisecond, rs.Process.Pid, bl.Process.Pid)
	go sampler.run(ctx)
	synced := make([]time.Time, 2)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, url := range []string{"http://" + o.readyspanMetrics + "/readyz", "http://" + o.baselineReady + "/readyz"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = waitHTTPEvery(ctx, url, 5*time.Minute, 50*time.Millisecond)
			synced[i] = time.Now()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		sampler.stop()
		return nil, err
	}
	time.Sleep(o.restartAfter)
	samples := sampler.stop()
	apiAfter, err := apiserverListWatch(ctx, cfg)
	if err != nil {
		return nil, err
	}
	tracesAfter, _, _, _ := sink.Counts()
	rolloutsAfter, _ := sink.Rollouts()
	text, err := get(ctx, "http://"+o.readyspanMetrics+"/metrics")
	if err != nil {
		return nil, err
	}
	fams, err := families([]string{text})
	if err != nil {
		return nil, fmt.Errorf("readyspan metrics after the restart: %w", err)
	}
	out := &report.Restart{
		Pods:          pods,
		Readyspan:     report.CatchupOf(samples[0], started, synced[0]),
		Baseline:      report.CatchupOf(samples[1], started, synced[1]),
		Requests:      scrape.Diff(apiAfter, apiBefore),
		NewTraces:     tracesAfter - tracesBefore,
		NewRollouts:   rolloutsAfter - rolloutsBefore,
		ReadyspanHeap: report.HeapOf(fams[0]),
	}
	out.PeakRatio = report.Ratio(out.Readyspan.RSSPeakMiB, out.Baseline.RSSPeakMiB)
	return out, nil
}

// apiserverListWatch reads the apiserver's LIST requests so far and its WATCH requests open now,
// for each resource the watchers watch ("LIST pods", "open WATCH pods"), from every client.
// apiserver_request_total counts a watch only once it ends, so open ones are read from
// apiserver_longrunning_requests.
func apiserverListWatch(ctx context.Context, cfg *rest.Config) (map[string]float64, error) {
	fams, err := apiserverMetrics(ctx, cfg)
	if err != nil {
		return nil, err
	}
	lists := scrape.ByLabel(fams, "apiserver_request_total", "resource", map[string]string{"verb": "LIST"})
	watches := scrape.ByLabel(fams, "apiserver_longrunning_requests", "resource", map[string]string{"verb": "WATCH"})
	out := map[string]float64{}
	for _, r := range watchedResources {
		out["LIST "+r], out["open WATCH "+r] = lists[r], watches[r]
	}
	return out, nil
}

// watchedResources are the resources readyspan and the baseline watch.
var watchedResources = []string{"pods", "events", "replicasets", "deployments", "endpointslices", "services", "statefulsets", "daemonsets", "controllerrevisions"}

// runArgs are readyspan run's flags in the test bed: the watcher user's kubeconfig, its metrics
// address, OTLP to the receiver (or the collector in front of it).
func runArgs(kubeconfig, metricsAddr, exportTo string) []string {
	return []string{"run", "--kubeconfig", kubeconfig, "--metrics-addr", metricsAddr, "--otlp-endpoint", exportTo, "--otlp-insecure"}
}

func startProcess(logPath, bin string, args ...string) (*exec.Cmd, error) {
	return startProcessEnv(logPath, nil, bin, args...)
}

// startProcessEnv starts bin with scalerun's environment and env (KEY=VALUE) added.
func startProcessEnv(logPath string, env []string, bin string, args ...string) (*exec.Cmd, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", logPath, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	return cmd, nil
}

func stopProcess(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

func waitHTTP(ctx context.Context, url string, timeout time.Duration) error {
	return waitHTTPEvery(ctx, url, timeout, 250*time.Millisecond)
}

// waitHTTPEvery asks url every interval until it answers 200 OK or timeout passes.
func waitHTTPEvery(ctx context.Context, url string, timeout, interval time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if _, err := get(ctx, url); err == nil {
			return nil
		} else if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s: %w", url, timeout, err)
		}
		time.Sleep(interval)
	}
}

func get(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var sb []byte
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		sb = append(sb, sc.Bytes()...)
		sb = append(sb, '\n')
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("get %s: %s", url, resp.Status)
	}
	return string(sb), sc.Err()
}

// sampler reads the processes from /proc every second (or every).
type sampler struct {
	every      time.Duration
	pids       []int
	mu         sync.Mutex
	samples    [][]procstat.Sample
	done, quit chan struct{}
}

func newSampler(pids ...int) *sampler { return newSamplerEvery(time.Second, pids...) }

func newSamplerEvery(every time.Duration, pids ...int) *sampler {
	return &sampler{every: every, pids: pids, samples: make([][]procstat.Sample, len(pids)), done: make(chan struct{}), quit: make(chan struct{})}
}

func (s *sampler) run(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		for i, pid := range s.pids {
			sm, err := procstat.Read(pid)
			if err != nil && !sm.Finished {
				continue
			}
			s.mu.Lock()
			s.samples[i] = append(s.samples[i], sm)
			s.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-s.quit:
			return
		case <-t.C:
		}
	}
}

// stop ends the sampling and returns the samples of each process, in newSampler's order.
func (s *sampler) stop() [][]procstat.Sample {
	close(s.quit)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// writePods writes, per Pod, the driver's times and the trace's receive time: the raw data of
// the lag figures.
func writePods(path string, pods []report.PodTimes, received map[string]time.Time) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	enc := json.NewEncoder(f)
	for _, p := range pods {
		line := struct {
			report.PodTimes
			Received time.Time `json:"received,omitzero"`
		}{p, received[report.TraceID(p.UID)]}
		if err := enc.Encode(line); err != nil {
			return err
		}
	}
	return nil
}

// writeSamples writes both processes' /proc samples, one line per second: the raw data of the
// CPU and memory figures, and of growth curves within one run.
func writeSamples(path string, readyspan, baseline []procstat.Sample) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	enc := json.NewEncoder(f)
	for name, samples := range map[string][]procstat.Sample{"readyspan": readyspan, "baseline": baseline} {
		for _, s := range samples {
			line := struct {
				Process string    `json:"process"`
				At      time.Time `json:"at"`
				CPUs    float64   `json:"cpu_seconds"`
				RSS     int64     `json:"rss_bytes"`
			}{name, s.At, s.CPU.Seconds(), s.RSS}
			if err := enc.Encode(line); err != nil {
				return err
			}
		}
	}
	return nil
}
