package remote

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/readyspan/readyspan/gate"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/pipeline"
	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/rollout/tracker"
	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/web"
	"github.com/readyspan/readyspan/web/apiclient"
)

// replayed is a real capture's traces as `readyspan replay` builds them: a Pod's latest trace
// (the ring keeps one per Pod), every rollout.
func replayed(t *testing.T, capture string) gate.Input {
	t.Helper()
	deltas, err := tracer.Kinds.LoadRecording(filepath.Join("..", "..", "tracer", "testdata", "real-node", capture))
	if err != nil {
		t.Fatal(err)
	}
	var in gate.Input
	byUID := map[string]int{}
	pipeline.Replay(pipeline.Options{Trace: tracer.Config{StuckAfter: tracer.DefaultStuckAfter, FailAfter: tracer.DefaultFailAfter}}, deltas, pipeline.Sinks{
		Pods: tracer.SinkFunc(func(tr *phases.Trace) {
			if i, ok := byUID[tr.Pod.UID]; ok {
				in.Pods[i] = tr
				return
			}
			byUID[tr.Pod.UID] = len(in.Pods)
			in.Pods = append(in.Pods, tr)
		}),
		Rollouts: tracker.SinkFunc(func(tr *rollout.Trace) { in.Rollouts = append(in.Rollouts, tr) }),
	})
	if len(in.Pods) == 0 {
		t.Fatalf("%s: no Pod traces", capture)
	}
	return in
}

// serve puts the traces in a daemon's ring and serves its UI as readyspan run does.
func serve(t *testing.T, in gate.Input) (*Daemon, *web.Ring) {
	t.Helper()
	ring := web.NewRing(web.RingConfig{})
	for _, p := range in.Pods {
		ring.AddPod(p)
	}
	for _, r := range in.Rollouts {
		ring.AddRollout(r)
	}
	srv := httptest.NewServer(web.NewServer(ring, web.ServerConfig{}))
	t.Cleanup(srv.Close)
	base, err := apiclient.CheckBase(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return &Daemon{API: &apiclient.Client{Base: base}}, ring
}

// read is everything the daemon holds, read back through its API.
func read(t *testing.T, d *Daemon) gate.Input {
	t.Helper()
	ctx := context.Background()
	var in gate.Input
	pods, err := d.Pods(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range slices.Backward(pods) { // oldest first, as the pipeline finished them
		p, err := d.Pod(ctx, s.UID)
		if err != nil {
			t.Fatal(err)
		}
		in.Pods = append(in.Pods, p)
	}
	rollouts, err := d.Rollouts(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range slices.Backward(rollouts) {
		r, err := d.Rollout(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		in.Rollouts = append(in.Rollouts, r)
	}
	return in
}

func slo(t *testing.T, text string) *gate.File {
	t.Helper()
	f, err := gate.Parse(strings.NewReader(text))
	if err == nil {
		err = f.Validate()
	}
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// Objectives on every span kind the gate reads: the root, phases, container sub-steps, the
// endpoints, the rollout, failures; strict breaks most of them, lenient meets them.
const (
	strict = `version: 1
spans:
  pod.startup: {p50: 1ms, p99: 2ms, max: 3ms}
  scheduling: {p99: 1ms}
  kubelet: {p90: 1ms, max: 2ms}
  container.image_pull: {p99: 1ms}
  container.readiness: {max: 1ms}
  status.endpoints: {max: 1ms}
  kubelet.sandbox: {max: 1ms}
  workload.rollout: {max: 1ms}
failures:
  ErrImagePull: 0
  other: 0
rotation: {max_pods: 0, max_after_stop: 1s}
`
	lenient = `version: 1
spans:
  pod.startup: {p50: 1h, p99: 1h, max: 1h}
  scheduling: {p99: 1h}
  kubelet: {p90: 1h, max: 1h}
  container.image_pull: {p99: 1h}
  container.readiness: {max: 1h}
  status.endpoints: {max: 1h}
  kubelet.sandbox: {max: 1h}
  workload.rollout: {max: 1h}
failures:
  other: 100
rotation: {max_pods: 100, max_after_stop: 1h, when_not_observed: pass}
`
)

// TestJudgedAlike: each real capture's traces, served by the daemon's UI and read back through
// its API, get the verdict the traces themselves get, result for result: every value, every
// culprit (name, container, trace ID, seconds, failure reason), every status. The traces read
// are rebuilt from the views; the ones judged alongside are the pipeline's own.
func TestJudgedAlike(t *testing.T) {
	for _, capture := range []string{"rolling-update-waves", "run3-always-pull", "run10-containerd2-failures", "probes-hooks", "kubelet-1.37", "kinds-statefulset"} {
		t.Run(capture, func(t *testing.T) {
			want := replayed(t, capture)
			d, _ := serve(t, want)
			got := read(t, d)
			if len(got.Pods) != len(want.Pods) || len(got.Rollouts) != len(want.Rollouts) {
				t.Fatalf("read %d Pods, %d rollouts; the ring was given %d, %d", len(got.Pods), len(got.Rollouts), len(want.Pods), len(want.Rollouts))
			}
			broken := 0
			for _, f := range []string{strict, lenient} {
				w, g := gate.Judge(slo(t, f), want), gate.Judge(slo(t, f), got)
				for i := range w.Results {
					if w.Results[i].Status == gate.StatusBroken {
						broken++
					}
					if i >= len(g.Results) || !alike(w.Results[i], g.Results[i]) {
						t.Errorf("%s: through the daemon\n%+v\nwant\n%+v", w.Results[i].Objective, at(g.Results, i), w.Results[i])
					}
				}
				if w.Exit != g.Exit || !reflect.DeepEqual(w.Notes, g.Notes) {
					t.Errorf("exit %d, notes %q; want %d, %q", g.Exit, g.Notes, w.Exit, w.Notes)
				}
			}
			if broken == 0 {
				t.Errorf("only %d objectives broken by the strict file: the comparison proves little", broken)
			}
		})
	}
}

// alike: the same result, its times as the API states them, to the microsecond.
func alike(want, got gate.Result) bool {
	close := func(a, b *float64) {
		if math.Abs(*a-*b) <= 1e-6 {
			*a = *b
		}
	}
	close(&want.Measured, &got.Measured)
	if len(want.Culprits) == len(got.Culprits) {
		want.Culprits = slices.Clone(want.Culprits)
		for i := range want.Culprits {
			close(&want.Culprits[i].Seconds, &got.Culprits[i].Seconds)
		}
	}
	return reflect.DeepEqual(want, got)
}

func at(rs []gate.Result, i int) any {
	if i < len(rs) {
		return rs[i]
	}
	return "nothing"
}

// withRotation is the capture's rollouts with one old Pod's removal from two nodes' rules
// reported, the last after afterStop (no preStop hook: from its deletion); the rollout and the
// Pod's name.
func withRotation(t *testing.T, in gate.Input, afterStop time.Duration) (*rollout.Trace, string) {
	t.Helper()
	for i, tr := range in.Rollouts {
		j := slices.IndexFunc(tr.Rollout.OldPods, func(o rollout.OldPod) bool { _, ok := o.Deleted.Resolve(); return ok && !o.PreStop })
		if j < 0 {
			continue
		}
		r := *tr.Rollout
		r.OldPods = slices.Clone(r.OldPods)
		deleted, _ := r.OldPods[j].Deleted.Resolve()
		r.OldPods[j].Rotation = &phases.Programming{Wait: 10 * time.Second, Nodes: []phases.NodeProgramming{
			{Node: "node-a", At: deleted.Time().Add(afterStop / 5)},
			{Node: "node-b", At: deleted.Time().Add(afterStop)}}}
		in.Rollouts[i] = rollout.Build(&r)
		return in.Rollouts[i], r.OldPods[j].Name
	}
	t.Fatal("no old Pod stopped without a preStop hook in the capture")
	return nil, ""
}

// TestRotationThroughDaemon: the rotation objective is judged from the rotation spans the
// daemon serves: broken by an old Pod 1.5 s late, naming it and its rollout's trace; met when
// the file allows it; met when the removals came before the stop; not observed without reports.
func TestRotationThroughDaemon(t *testing.T) {
	in := replayed(t, "rolling-update-waves")
	d, _ := serve(t, in)
	if v := gate.Judge(slo(t, "version: 1\nrotation: {max_pods: 0}\n"), read(t, d)); v.Results[len(v.Results)-1].Status != gate.StatusNotObserved {
		t.Errorf("no node component reported: %+v", v.Results)
	}

	rt, victim := withRotation(t, in, 1500*time.Millisecond)
	d, _ = serve(t, in)
	got := read(t, d)
	v := gate.Judge(slo(t, "version: 1\nrotation: {max_pods: 0, max_after_stop: 1s}\n"), got)
	pods, after := v.Results[len(v.Results)-2], v.Results[len(v.Results)-1]
	if v.Exit != gate.ExitBroken || pods.Status != gate.StatusBroken || pods.Measured != 1 || len(pods.Culprits) != 1 || pods.Culprits[0].Name != victim {
		t.Errorf("max_pods: exit %d, %+v; want broken by %s", v.Exit, pods, victim)
	}
	if after.Status != gate.StatusBroken || after.Measured != 1.5 || len(after.Culprits) != 1 || after.Culprits[0].TraceID != rt.TraceID.String() {
		t.Errorf("max_after_stop: %+v; want 1.5 s in trace %s", after, rt.TraceID)
	}
	if v := gate.Judge(slo(t, "version: 1\nrotation: {max_pods: 1, max_after_stop: 2s}\n"), got); v.Exit != gate.ExitPass {
		t.Errorf("one old Pod 1.5 s late allowed: exit %d %+v", v.Exit, v.Results)
	}
}

// TestGarbage: an answer that is not the API's, or a trace that cannot be one, is an error
// naming it; nothing is read as an empty set.
func TestGarbage(t *testing.T) {
	view := func(mod func(string) string) string {
		return mod(`{"uid":"u1","traceId":"0123456789abcdef0123456789abcdef","namespace":"ns","name":"p","outcome":"ready","start":"2026-01-01T00:00:00Z","durationMs":5,` +
			`"spans":[{"name":"pod.startup","label":"pod.startup","service":"readyspan","depth":0,"cat":"root","startMs":0,"durMs":5},` +
			`{"name":"kubelet","label":"kubelet","service":"kubelet","depth":1,"cat":"kubelet","startMs":1,"durMs":4}]}`)
	}
	same := func(s string) string { return s }
	for _, tc := range []struct{ name, body, want string }{
		{"html", "<html>oops</html>", "not the API's JSON"},
		{"wrong shape", `[1,2]`, "not the API's JSON"},
		{"trace id", view(func(s string) string { return strings.Replace(s, "0123456789abcdef0123456789abcdef", "zz", 1) }), "trace ID"},
		{"outcome", view(func(s string) string { return strings.Replace(s, `"ready"`, `"great"`, 1) }), "unknown outcome"},
		{"negative", view(func(s string) string { return strings.Replace(s, `"durMs":4`, `"durMs":-4`, 1) }), "a time of -4 ms"},
		{"orphan", view(func(s string) string { return strings.Replace(s, `"depth":1`, `"depth":3`, 1) }), "at depth 3 under none"},
		{"no root", view(func(s string) string { return strings.Replace(s, `"name":"pod.startup"`, `"name":"kubelet"`, 1) }), "do not start with"},
		{"long name", view(func(s string) string {
			return strings.Replace(s, `"name":"p"`, `"name":"`+strings.Repeat("x", 2000)+`"`, 1)
		}), "a name of 2000 bytes"},
		{"good", view(same), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(tc.body)) }))
			defer srv.Close()
			base, _ := apiclient.CheckBase(srv.URL)
			_, err := (&Daemon{API: &apiclient.Client{Base: base}}).Pod(context.Background(), "u1")
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	base, _ := apiclient.CheckBase(srv.URL)
	d := &Daemon{API: &apiclient.Client{Base: base}}
	if _, err := d.Pod(context.Background(), "u1"); !errors.Is(err, apiclient.ErrNotHeld) {
		t.Errorf("a Pod not held: %v", err)
	}
	if _, err := d.Pod(context.Background(), "../metrics"); err == nil {
		t.Error("a UID with a slash was put in a path")
	}
	srv.Close()
	if _, err := d.Rollouts(context.Background(), "ns", "web"); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("the daemon down: %v", err)
	}
}
