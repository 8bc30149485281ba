package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/readyspan/readyspan/test/scale/fakeapi"
	"github.com/readyspan/readyspan/test/scale/otlpsink"
	"github.com/readyspan/readyspan/test/scale/procstat"
	"github.com/readyspan/readyspan/test/scale/report"
)

type options struct {
	recording, unit, readyspan, baseline, out string
	rates                                     []float64
	encodings                                 []string
	duration, settle, drain                   time.Duration
	limit                                     time.Duration
	readyspanArgs, readyspanEnv               []string
	profile                                   bool
}

func parseRun(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.StringVar(&o.recording, "recording", "test/scale/fakeapi/testdata/kwok-25.tar.gz", "recording (a directory, or a .tar.gz of one) of whole objects, as ceiling record writes")
	fs.StringVar(&o.unit, "unit", "", "the recorded Deployment to repeat (default: the middle one)")
	fs.StringVar(&o.readyspan, "readyspan", "bin/readyspan", "readyspan binary")
	fs.StringVar(&o.baseline, "baseline", "bin/scale-baseline", "the baseline binary (test/scale/baseline)")
	fs.StringVar(&o.out, "out", ".local/ceiling", "directory for the report and the processes' logs")
	rates := fs.String("rates", "100,300,1000", "Pod startups per second, comma-separated, each run in turn")
	encodings := fs.String("encodings", "json,protobuf", "encodings to serve, comma-separated: json, protobuf")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "how long copies of the template keep starting at each rate")
	fs.DurationVar(&o.settle, "settle", 2*time.Second, "readyspan's settle time, taken off the export lag (tracer.Config.Settle as readyspan run sets it)")
	fs.DurationVar(&o.drain, "drain", 30*time.Second, "how long to wait for the last traces after the stream ends")
	fs.DurationVar(&o.limit, "limit", time.Second, "the lag p99 beyond which a watcher has not kept up")
	rsArgs := fs.String("readyspan-args", "", "more flags for readyspan run, space-separated")
	rsEnv := fs.String("readyspan-env", "", "more environment for readyspan run, space-separated KEY=VALUE (e.g. GOGC=200)")
	fs.BoolVar(&o.profile, "profile", false, "run readyspan with --pprof and keep a CPU profile of each stream and its allocations in --out (readyspan-<encoding>-<rate>.pprof, .allocs.pprof)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	for _, r := range strings.Split(*rates, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(r), 64)
		if err != nil || v <= 0 {
			return o, fmt.Errorf("--rates: %q is not a positive number", r)
		}
		o.rates = append(o.rates, v)
	}
	for _, e := range strings.Split(*encodings, ",") {
		e = strings.TrimSpace(e)
		if e != "json" && e != "protobuf" {
			return o, fmt.Errorf("--encodings: %q is neither json nor protobuf", e)
		}
		o.encodings = append(o.encodings, e)
	}
	o.readyspanArgs, o.readyspanEnv = strings.Fields(*rsArgs), strings.Fields(*rsEnv)
	return o, nil
}

func run(ctx context.Context, args []string) error {
	o, err := parseRun(args)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	dir := o.recording
	if strings.HasSuffix(dir, ".tar.gz") {
		tmp, err := os.MkdirTemp("", "ceiling-recording-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		if dir, err = fakeapi.Unpack(o.recording, tmp); err != nil {
			return fmt.Errorf("unpack %s: %w", o.recording, err)
		}
	}
	tmpl, err := fakeapi.LoadTemplate(dir, o.unit)
	if err != nil {
		return err
	}
	step("template: Deployment %s, %d Pods, %d watch events over %s", tmpl.Unit, tmpl.Pods, tmpl.Events(), tmpl.Span.Round(time.Millisecond))
	rep := &report.CeilingReport{Machine: machine(), Recording: o.recording, Template: tmpl.Unit, LimitMs: float64(o.limit) / 1e6, Settle: o.settle.String()}
	id := uint32(time.Now().Unix())
	for _, enc := range o.encodings {
		for _, rate := range o.rates {
			id++
			step("%s, %g startups/s: generating %s of copies", enc, rate, o.duration)
			st, err := fakeapi.Generate(tmpl, fakeapi.Options{Rate: rate, Duration: o.duration, Protobuf: enc == "protobuf", Base: time.Now(), ID: id})
			if err != nil {
				return err
			}
			// readyspan first: its traces need the objects' times to be new; the baseline reads
			// none of them.
			for _, watcher := range []string{"readyspan", "baseline"} {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				r, err := measure(ctx, o, st, enc, rate, watcher)
				if err != nil {
					return fmt.Errorf("%s, %s at %g/s: %w", watcher, enc, rate, err)
				}
				step("  %s: lag p99 %s, delivery p99 %s, no trace %d, CPU %.3f s per 1,000 startups, RSS steady %.1f MiB", watcher,
					time.Duration(r.Lag.P99ms*1e6).Round(time.Millisecond), time.Duration(r.Delivery.P99ms*1e6).Round(time.Millisecond), r.NoTrace, r.Process.CPUPer1000Pods, r.Process.RSSSteadyMiB)
				rep.Runs = append(rep.Runs, r)
			}
			st = nil
			runtime.GC()
		}
	}
	rep.Ceilings = report.Ceilings(rep.Runs, rep.LimitMs)
	rep.Ratios = report.CeilingRatios(rep.Runs, rep.Ceilings, rep.LimitMs)
	rep.Notes = append(rep.Notes, "readyspan and the baseline ran one after the other on the same stream at each rate: compare them within a run; other work on the machine moves both")
	b, _ := json.MarshalIndent(rep, "", "  ")
	if err := os.WriteFile(filepath.Join(o.out, "ceiling.json"), b, 0o644); err != nil {
		return err
	}
	fmt.Println()
	return rep.Table(os.Stdout)
}

// measure serves one stream to one watcher and reads what it cost.
func measure(ctx context.Context, o options, st *fakeapi.Stream, enc string, rate float64, watcher string) (report.CeilingRun, error) {
	res := report.CeilingRun{Encoding: enc, Watcher: watcher, Rate: rate, Startups: st.Startups, Events: st.Len()}
	api := fakeapi.NewServer(st)
	srv := httptest.NewUnstartedServer(api)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	name := fmt.Sprintf("%s-%s-%g", watcher, enc, rate)
	kubeconfig := filepath.Join(o.out, name+".kubeconfig")
	if err := writeKubeconfig(kubeconfig, srv); err != nil {
		return res, err
	}
	readyAddr, err := freeAddr()
	if err != nil {
		return res, err
	}
	var sink *otlpsink.Sink
	var cmd *exec.Cmd
	logPath := filepath.Join(o.out, name+".log")
	switch watcher {
	case "readyspan":
		sink = otlpsink.New()
		if err := sink.Start("127.0.0.1:0"); err != nil {
			return res, err
		}
		defer sink.Shutdown()
		args := append([]string{"run", "--kubeconfig", kubeconfig, "--metrics-addr", readyAddr, "--otlp-endpoint", sink.Addr(), "--otlp-insecure",
			"--watch-encoding", enc}, o.readyspanArgs...)
		if o.profile {
			args = append(args, "--pprof")
		}
		cmd, err = start(logPath, o.readyspanEnv, o.readyspan, args...)
	default:
		args := []string{"--kubeconfig", kubeconfig, "--ready-addr", readyAddr, "--encoding", enc}
		cmd, err = start(logPath, nil, o.baseline, args...)
	}
	if err != nil {
		return res, err
	}
	defer stop(cmd)
	if err := waitHTTP(ctx, "http://"+readyAddr+"/readyz", 60*time.Second); err != nil {
		return res, fmt.Errorf("%s did not become ready (its log: %s): %w", watcher, logPath, err)
	}
	smp := newSampler(cmd.Process.Pid, 250*time.Millisecond)
	go smp.run()
	time.Sleep(time.Second) // idle samples
	loadStart := time.Now()
	api.Start(ctx)
	profiled := make(chan error, 1)
	if o.profile && watcher == "readyspan" {
		go func() {
			secs := int(st.Duration.Seconds())
			profiled <- fetch(ctx, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", readyAddr, max(secs, 1)), filepath.Join(o.out, name+".pprof"))
		}()
	} else {
		profiled <- nil
	}
	select {
	case <-api.Done():
	case <-ctx.Done():
		return res, ctx.Err()
	}
	res.BehindMs = float64(api.Behind()) / 1e6
	pods := make([]report.PodTimes, 0, len(st.Pods))
	for _, p := range st.Pods {
		pt := report.PodTimes{UID: p.UID, Ready: api.SentAt(p.Ready)}
		if p.Serving >= 0 {
			pt.Serving = api.SentAt(p.Serving)
		}
		pods = append(pods, pt)
	}
	if sink != nil { // every trace in, or the drain time out
		deadline := time.Now().Add(o.settle + o.drain)
		for time.Now().Before(deadline) && ctx.Err() == nil {
			n := 0
			for _, p := range pods {
				if sink.Has(report.TraceID(p.UID)) {
					n++
				}
			}
			if n == len(pods) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	} else { // every event written to its watches, and a second to decode what is buffered
		deadline := time.Now().Add(o.drain)
		for !api.Delivered() && time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(time.Second)
	}
	loadEnd := time.Now()
	if err := <-profiled; err != nil {
		step("  CPU profile of %s: %v", name, err)
	}
	if o.profile && watcher == "readyspan" { // what was allocated since the start: the GC's work
		if err := fetch(ctx, "http://"+readyAddr+"/debug/pprof/allocs", filepath.Join(o.out, name+".allocs.pprof")); err != nil {
			step("  allocation profile of %s: %v", name, err)
		}
	}
	time.Sleep(3 * time.Second) // steady state
	end := time.Now()
	samples := smp.stop()
	res.Process = report.Cost(samples, report.Window{LoadStart: loadStart, LoadEnd: loadEnd, End: end}, st.Startups, st.Startups)
	if res.Process.CPUPer1000Pods > 0 {
		res.StartupsPS = 1000 / res.Process.CPUPer1000Pods
	}
	res.Delivery = report.Summarize(api.Delivery())
	if sink != nil {
		if err := writePods(filepath.Join(o.out, name+"-pods.jsonl"), pods, sink.Received()); err != nil {
			return res, err
		}
		lags, missing := report.Lag(pods, sink.Received(), o.settle, true)
		res.Lag, res.NoTrace = report.Summarize(lags), len(missing)
		res.Traces, _, _, _ = sink.Counts()
	} else {
		res.Lag = res.Delivery
	}
	rq := api.Requests()
	res.Protobuf = rq.Protobuf
	if len(rq.Unknown) > 0 {
		step("  %s asked for paths the server does not serve: %v", watcher, rq.Unknown)
	}
	return res, nil
}

// writePods writes each Pod's times, as make scale's -pods.jsonl: when the server sent its Ready
// and its address's ready, and when its trace was received.
func writePods(path string, pods []report.PodTimes, received map[string]time.Time) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, p := range pods {
		line := struct {
			report.PodTimes
			Received time.Time `json:"received,omitzero"`
		}{p, received[report.TraceID(p.UID)]}
		if err := enc.Encode(line); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// fetch writes what url answers to path.
func fetch(ctx context.Context, url, path string) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

func writeKubeconfig(path string, srv *httptest.Server) error {
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: fakeapi
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: watcher
  user:
    token: fakeapi
contexts:
- name: fakeapi
  context: {cluster: fakeapi, user: watcher}
current-context: fakeapi
`, srv.URL, b64(ca))
	return os.WriteFile(path, []byte(cfg), 0o600)
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// start runs bin with the environment and env (KEY=VALUE) added, its output to logPath.
func start(logPath string, env []string, bin string, args ...string) (*exec.Cmd, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() { _ = cmd.Wait(); f.Close() }()
	return cmd, nil
}

func stop(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	for i := 0; i < 150; i++ {
		if cmd.Process.Signal(syscall.Signal(0)) != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
}

func waitHTTP(ctx context.Context, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = errors.New(resp.Status)
		}
		last = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return last
}

// sampler reads one process from /proc at a fixed interval.
type sampler struct {
	pid     int
	every   time.Duration
	mu      sync.Mutex
	samples []procstat.Sample
	quit    chan struct{}
	done    chan struct{}
}

func newSampler(pid int, every time.Duration) *sampler {
	return &sampler{pid: pid, every: every, quit: make(chan struct{}), done: make(chan struct{})}
}

func (s *sampler) run() {
	defer close(s.done)
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		if sm, err := procstat.Read(s.pid); err == nil || sm.Finished {
			s.mu.Lock()
			s.samples = append(s.samples, sm)
			s.mu.Unlock()
		}
		select {
		case <-s.quit:
			return
		case <-t.C:
		}
	}
}

func (s *sampler) stop() []procstat.Sample {
	close(s.quit)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples
}

func step(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func machine() string {
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 1 {
			if kb, err := strconv.ParseFloat(f[1], 64); err == nil {
				mem = fmt.Sprintf(", %.0f GiB", kb/(1<<20))
			}
		}
	}
	return fmt.Sprintf("%d cores%s", runtime.NumCPU(), mem)
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
