package tracer

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	promexp "github.com/readyspan/readyspan/exporters/prometheus"
	"github.com/readyspan/readyspan/exporters/terminal"
	"github.com/readyspan/readyspan/internal/captures"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/watch"
)

// replayDir rebuilds the traces of a recording as `readyspan replay` does.
func replayDir(t *testing.T, dir string) []*phases.Trace {
	t.Helper()
	return replayDirWith(t, dir, Config{Backfill: true})
}

// replayDirWith is replayDir with the correlator's settings given (--fail-after, …).
func replayDirWith(t *testing.T, dir string, cfg Config) []*phases.Trace {
	t.Helper()
	deltas, err := Kinds.LoadRecording(dir)
	if err != nil {
		t.Fatal(err)
	}
	var traces []*phases.Trace
	c := New(cfg, SinkFunc(func(tr *phases.Trace) { traces = append(traces, tr) }), nil, nil)
	for _, w := range Replay(c, deltas) {
		t.Errorf("a real capture's timestamps are consistent, yet replay warned: %s", w)
	}
	return traces
}

// realNodeDirs lists the capture directories in testdata/real-node.
func realNodeDirs(t *testing.T) []string {
	t.Helper()
	matches, _ := filepath.Glob(filepath.Join("testdata", "real-node", "run*"))
	var dirs []string
	for _, m := range matches {
		if fi, err := os.Stat(m); err == nil && fi.IsDir() {
			dirs = append(dirs, m)
		}
	}
	if len(dirs) == 0 {
		t.Fatal("no captures in testdata/real-node")
	}
	return dirs
}

// TestRealNode replays the captures from a real v1.37.2 control plane and kubelet
// (testdata/real-node: the objects, events and, for run8, watch streams as the API served them)
// and compares with golden output.
func TestRealNode(t *testing.T) {
	for _, dir := range realNodeDirs(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			traces := replayDir(t, dir)
			if len(traces) == 0 {
				t.Fatal("no traces")
			}
			for _, tr := range traces {
				checkShape(t, tr)
			}
			spans, waterfall := render(t, traces)
			again, _ := render(t, replayDir(t, dir))
			if !bytes.Equal(spans, again) {
				t.Fatal("replay is not deterministic")
			}
			golden(t, filepath.Join("testdata", "real-node", filepath.Base(dir)+".txtar"), spans, waterfall)
		})
	}
}

// TestRealNodeSlowPull checks the reconstruction against what the kubelet itself stated in
// run8's Pulled messages: "in 4.778s (4.779s including waiting)" and "in 26ms (4.471s
// including waiting)" (two Pods pulling one image; the second waited behind the first).
func TestRealNodeSlowPull(t *testing.T) {
	traces := replayDir(t, filepath.Join("testdata", "real-node", "run8-slow-pull-watch"))
	want := map[string][2]time.Duration{
		"sleeper-6b9c87548b-swlx4": {4779 * time.Millisecond, 4778 * time.Millisecond},
		"sleeper-6b9c87548b-ghwzl": {4471 * time.Millisecond, 26 * time.Millisecond},
	}
	for _, tr := range traces {
		w, ok := want[tr.Pod.Name]
		if !ok {
			continue
		}
		delete(want, tr.Pod.Name)
		pull := tr.Find("container/sleep/image_pull")
		transfer := tr.Find("container/sleep/image_pull/transfer")
		if pull == nil || transfer == nil {
			t.Fatalf("%s: missing pull spans", tr.Pod.Name)
		}
		// Pulling → Pulled from the events' nanosecond names brackets the kubelet's own
		// "including waiting" figure (same clock): never shorter, longer by less than the
		// figure's truncation plus the events' stamping (evidence_test.go states both).
		if over := pull.Duration() - w[0]; over < 0 || over >= pulledTruncation+pulledStampSlack {
			t.Errorf("%s: pull %v, kubelet said %v", tr.Pod.Name, pull.Duration(), w[0])
		}
		if transfer.Duration() != w[1] || !transfer.End.Equal(pull.End) {
			t.Errorf("%s: transfer %v ending %v, want %v ending at Pulled %v", tr.Pod.Name, transfer.Duration(), transfer.End, w[1], pull.End)
		}
		if pull.Attr(phases.AttrImageCache) != "cold" || pull.Attr(phases.AttrImageSize) != int64(34704198) {
			t.Errorf("%s: pull attrs %v", tr.Pod.Name, pull.Attrs)
		}
		if tr.Summary.Outcome != phases.OutcomeReady {
			t.Errorf("%s: outcome %s", tr.Pod.Name, tr.Summary.Outcome)
		}
	}
	if len(want) > 0 {
		t.Fatalf("no trace for %v", want)
	}
}

// TestLoadRecordingBadLines: a malformed line is reported with its place and the rest loads.
func TestLoadRecordingBadLines(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join("testdata", "real-node", "run8-slow-pull-watch", "watch.pods.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	bad := append([]byte("{not json\n{\"type\":\"SURPRISE\",\"object\":{}}\n"), src...)
	if err := os.WriteFile(filepath.Join(dir, "watch.pods.jsonl"), bad, 0o644); err != nil {
		t.Fatal(err)
	}
	deltas, err := Kinds.LoadRecording(dir)
	le, ok := err.(*watch.LoadError)
	if !ok || len(le.Problems) != 2 {
		t.Fatalf("want a watch.LoadError with 2 problems, got %v", err)
	}
	if len(deltas) != bytes.Count(src, []byte("\n")) {
		t.Fatalf("loaded %d deltas, want every good line (%d)", len(deltas), bytes.Count(src, []byte("\n")))
	}
	if _, err := Kinds.LoadRecording(t.TempDir()); err == nil {
		t.Fatal("an empty directory must be an error")
	}
}

// TestReplayWarnsOfImpossibleTimes replays run2 with one Pod's Ready transition moved 30 years
// back, before its creation: the replay must say so, and the trace must carry it, instead of
// drawing a Ready that took no time.
func TestReplayWarnsOfImpossibleTimes(t *testing.T) {
	const pod = "sleeper-7b67f9b4dd-hfswn"
	dir := captures.Copy(t, "run2-ifnotpresent", map[string]func([]byte) []byte{
		"pods.json": func(b []byte) []byte { return moveReadyBack(t, b, pod, 30) },
	})
	deltas, err := Kinds.LoadRecording(dir)
	if err != nil {
		t.Fatal(err)
	}
	var traces []*phases.Trace
	warnings := Replay(New(Config{Backfill: true}, SinkFunc(func(tr *phases.Trace) { traces = append(traces, tr) }), nil, nil), deltas)
	if len(warnings) != 1 || !strings.Contains(warnings[0], "pod run2-ifnotpresent/"+pod+" ") || !strings.Contains(warnings[0], "ready (status 1996-") || !strings.Contains(warnings[0], "before containers ready") {
		t.Fatalf("want one warning about %s's Ready before its containers were ready, got %q", pod, warnings)
	}
	t.Logf("replay warned: %s", warnings[0])
	seen := 0
	for _, tr := range traces {
		root := tr.Root()
		bad := tr.Pod.Name == pod
		if got, _ := root.Attr(phases.AttrInconsistent).(bool); got != bad {
			t.Errorf("%s: %s = %v, want %v", tr.Pod.Name, phases.AttrInconsistent, root.Attr(phases.AttrInconsistent), bad)
		}
		if !bad {
			continue
		}
		seen++
		if why, _ := root.Attr(phases.AttrInconsistency).(string); !strings.Contains(why, "ready (status 1996-") {
			t.Errorf("%s: %s = %q, want the Ready stamp named", pod, phases.AttrInconsistency, why)
		}
		if s := tr.Summary; s.PhaseObserved != [6]bool{} || s.Startup != 0 || s.SLIEligible {
			t.Errorf("%s: an inconsistent trace must feed no histogram: %+v", pod, s)
		}
		var wf bytes.Buffer
		if err := terminal.Waterfall(&wf, tr); err != nil || !strings.Contains(wf.String(), "warning: timestamps out of order") {
			t.Errorf("the waterfall must say the timestamps are out of order:\n%s", wf.String())
		}
		t.Logf("%s", wf.String())
	}
	if seen != 1 {
		t.Fatalf("%d traces of %s", seen, pod)
	}
}

// moveReadyBack rewrites a pods.json List: the named Pod's Ready lastTransitionTime moved the
// given number of years back.
func moveReadyBack(t *testing.T, list []byte, pod string, years int) []byte {
	t.Helper()
	var l map[string]any
	if err := json.Unmarshal(list, &l); err != nil {
		t.Fatal(err)
	}
	moved := false
	for _, it := range l["items"].([]any) {
		p := it.(map[string]any)
		if p["metadata"].(map[string]any)["name"] != pod {
			continue
		}
		for _, c := range p["status"].(map[string]any)["conditions"].([]any) {
			cond := c.(map[string]any)
			if cond["type"] != "Ready" {
				continue
			}
			at, err := time.Parse(time.RFC3339, cond["lastTransitionTime"].(string))
			if err != nil {
				t.Fatal(err)
			}
			cond["lastTransitionTime"] = at.AddDate(-years, 0, 0).Format(time.RFC3339)
			moved = true
		}
	}
	if !moved {
		t.Fatalf("no Ready condition of %s in the capture", pod)
	}
	out, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRealNodeFailedPulls checks readyspan_image_pulls_total{result="failed"} on the failure
// captures against what the capture itself says, read here from its Events: per container of a
// captured Pod, the kubelet's "Pulling" attempts (their Event counts) that never led to
// "Successfully pulled", which must agree with the count of its "Error: ErrImagePull" Events.
func TestRealNodeFailedPulls(t *testing.T) {
	for _, run := range []string{"run4-failures", "run10-containerd2-failures"} {
		t.Run(run, func(t *testing.T) {
			dir := filepath.Join("testdata", "real-node", run)
			want := failedPullsInCapture(t, dir)
			total := 0
			for _, n := range want {
				total += n
			}
			if total == 0 {
				t.Fatal("the capture shows no failed pull; the test would prove nothing")
			}

			reg := prometheus.NewRegistry()
			m := promexp.New(reg, "test", Kinds.RolloutKinds(), promexp.Options{})
			got := map[string]int{}
			for _, tr := range replayDir(t, dir) {
				m.Export(tr)
				if tr.Summary.PullsFailed > 0 {
					got[tr.Pod.UID] = tr.Summary.PullsFailed
				}
			}
			if !maps.Equal(got, want) {
				t.Errorf("failed pulls per Pod UID: got %v, the capture shows %v", got, want)
			}
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			var metric float64
			for _, mf := range mfs {
				if mf.GetName() != "readyspan_image_pulls_total" {
					continue
				}
				for _, s := range mf.GetMetric() {
					for _, l := range s.GetLabel() {
						if l.GetName() == "result" && l.GetValue() == "failed" {
							metric = s.GetCounter().GetValue()
						}
					}
				}
			}
			if metric != float64(total) {
				t.Errorf(`readyspan_image_pulls_total{result="failed"} = %v, the capture shows %d failed attempts`, metric, total)
			}
		})
	}
}

// failedPullsInCapture reads a capture's core/v1 Events and Pods and returns, per Pod UID, its
// failed pull attempts.
func failedPullsInCapture(t *testing.T, dir string) map[string]int {
	t.Helper()
	var events struct {
		Items []corev1.Event `json:"items"`
	}
	var pods struct {
		Items []corev1.Pod `json:"items"`
	}
	for file, into := range map[string]any{"events.core.v1.json": &events, "pods.json": &pods} {
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, into); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	captured := map[string]bool{}
	for _, p := range pods.Items {
		captured[string(p.UID)] = true
	}
	type key struct{ uid, fieldPath string }
	pulling, pulled, errImagePull := map[key]int{}, map[key]int{}, map[key]int{}
	for _, e := range events.Items {
		k := key{string(e.InvolvedObject.UID), e.InvolvedObject.FieldPath}
		if e.InvolvedObject.Kind != "Pod" || !captured[k.uid] || e.Source.Component != "kubelet" {
			continue
		}
		switch {
		case e.Reason == "Pulling":
			pulling[k] += int(e.Count)
		case e.Reason == "Pulled" && strings.HasPrefix(e.Message, "Successfully pulled image "):
			pulled[k] += int(e.Count)
		case e.Reason == "Failed" && e.Message == "Error: ErrImagePull":
			errImagePull[k] += int(e.Count)
		}
	}
	out := map[string]int{}
	for k, n := range pulling {
		failed := n - pulled[k]
		if failed != errImagePull[k] {
			t.Fatalf("%s %s: %d Pulling, %d successful, but %d ErrImagePull: the capture disagrees with itself", k.uid, k.fieldPath, n, pulled[k], errImagePull[k])
		}
		if failed > 0 {
			out[k.uid] += failed
		}
	}
	return out
}

// TestRealNodeNodeInfo: each Pod's root carries what its Node said of itself in the capture's
// own list of Nodes (nodes.json): the kubelet's version and the runtime's name and version,
// which comparisons of startups split by; and the scheduler the Pod asked for.
func TestRealNodeNodeInfo(t *testing.T) {
	checked := 0
	for _, dir := range realNodeDirs(t) {
		var nodes struct{ Items []corev1.Node }
		if _, err := os.Stat(filepath.Join(dir, "nodes.json")); err != nil {
			continue
		}
		readJSON(t, filepath.Join(dir, "nodes.json"), &nodes)
		info := map[string]corev1.NodeSystemInfo{}
		for _, n := range nodes.Items {
			info[n.Name] = n.Status.NodeInfo
		}
		for _, tr := range replayDir(t, dir) {
			want, ok := info[tr.Pod.Node]
			if !ok {
				continue
			}
			root := tr.Root()
			rt := root.Attr(phases.AttrRuntimeName).(string) + "://" + root.Attr(phases.AttrRuntimeVersion).(string)
			if root.Attr(phases.AttrKubeletVersion) != want.KubeletVersion || rt != want.ContainerRuntimeVersion {
				t.Errorf("%s/%s: kubelet %v, runtime %s; the Node says %s, %s", filepath.Base(dir), tr.Pod.Name,
					root.Attr(phases.AttrKubeletVersion), rt, want.KubeletVersion, want.ContainerRuntimeVersion)
			}
			if root.Attr(phases.AttrSchedulerName) != "default-scheduler" {
				t.Errorf("%s/%s: scheduler %v", filepath.Base(dir), tr.Pod.Name, root.Attr(phases.AttrSchedulerName))
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no Pod of the captures ran on a Node the capture lists")
	}
}

// TestNodePoolOf: the pool is read from the first known pool label, bounded; a Node without
// one has none.
func TestNodePoolOf(t *testing.T) {
	n := &corev1.Node{}
	n.Labels = map[string]string{"cloud.google.com/gke-nodepool": "pool-a", "eks.amazonaws.com/nodegroup": "ng",
		"other": "x"}
	n.Status.NodeInfo = corev1.NodeSystemInfo{KubeletVersion: "v1.33.1-gke.1", ContainerRuntimeVersion: "cri-o://" + strings.Repeat("9", 500)}
	slimNode(n)
	got := infoOf(n)
	if got.Pool != "pool-a" || got.RuntimeName != "cri-o" || len(got.RuntimeVersion) != maxNodeInfo || got.KubeletVersion != "v1.33.1-gke.1" {
		t.Fatalf("%+v", got)
	}
	if len(n.Labels) != 1 {
		t.Fatalf("slimNode kept labels %v", n.Labels)
	}
	if got := infoOf(&corev1.Node{}); got != (phases.NodeInfo{}) {
		t.Fatalf("a Node saying nothing: %+v", got)
	}
}
