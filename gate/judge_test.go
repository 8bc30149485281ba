package gate_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/readyspan/readyspan/gate"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/pipeline"
	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/rollout/tracker"
	"github.com/readyspan/readyspan/tracer"
)

// replayed is a real capture's traces as `readyspan gate --recording` judges them: the
// recording through package pipeline, as replay does.
func replayed(t *testing.T, capture string) gate.Input {
	t.Helper()
	deltas, err := tracer.Kinds.LoadRecording(filepath.Join("..", "tracer", "testdata", "real-node", capture))
	if err != nil {
		t.Fatal(err)
	}
	var in gate.Input
	pipeline.Replay(pipeline.Options{Trace: tracer.Config{StuckAfter: tracer.DefaultStuckAfter, FailAfter: tracer.DefaultFailAfter}}, deltas, pipeline.Sinks{
		Pods:     tracer.SinkFunc(func(tr *phases.Trace) { in.Pods = append(in.Pods, tr) }),
		Rollouts: tracker.SinkFunc(func(tr *rollout.Trace) { in.Rollouts = append(in.Rollouts, tr) }),
	})
	if len(in.Pods) == 0 {
		t.Fatalf("%s: no Pod traces", capture)
	}
	return in
}

func slo(t *testing.T, text string) *gate.File {
	t.Helper()
	f, err := gate.Parse(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	return f
}

func result(t *testing.T, v gate.Verdict, objective string) gate.Result {
	t.Helper()
	for _, r := range v.Results {
		if r.Objective == objective {
			return r
		}
	}
	t.Fatalf("no objective %q in %+v", objective, v.Results)
	return gate.Result{}
}

// kubeletEvents are a capture's core/v1 Events with a reason, read straight from the JSON the
// apiserver served: the evidence the judging is checked against, not readyspan's reading of it.
func kubeletEvents(t *testing.T, capture, reason string) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "tracer", "testdata", "real-node", capture, "events.core.v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Items []struct {
			Reason         string `json:"reason"`
			Message        string `json:"message"`
			InvolvedObject struct {
				Name string `json:"name"`
			} `json:"involvedObject"`
		} `json:"items"`
	}
	if err := json.Unmarshal(data, &list); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, e := range list.Items {
		if e.Reason == reason {
			out[e.InvolvedObject.Name] = append(out[e.InvolvedObject.Name], e.Message)
		}
	}
	return out
}

// pulledIn is the kubelet's "Successfully pulled image … in 198ms (198ms including waiting)".
var pulledIn = regexp.MustCompile(`\((\d+)ms including waiting\)`)

// TestColdPullThreshold: run3-always-pull's two cold pulls, an objective on
// container.image_pull p99 just below the longest pull the kubelet's own Pulled message states
// breaks and names that Pod; just above, it is met.
func TestColdPullThreshold(t *testing.T) {
	in := replayed(t, "run3-always-pull")
	var slowest string
	var longest time.Duration
	for pod, msgs := range kubeletEvents(t, "run3-always-pull", "Pulled") {
		for _, m := range msgs {
			if g := pulledIn.FindStringSubmatch(m); g != nil {
				ms, _ := strconv.Atoi(g[1])
				if d := time.Duration(ms) * time.Millisecond; d > longest {
					slowest, longest = pod, d
				}
			}
		}
	}
	if longest == 0 {
		t.Fatal("no cold pull stated in the capture's Pulled events")
	}
	// The span runs from the Pulling Event to the Pulled one: a few ms around the kubelet's own
	// figure, which starts and ends inside it.
	const margin = 5 * time.Millisecond
	below := slo(t, "version: 1\nspans:\n  container.image_pull: {p99: "+(longest-margin).String()+"}\n")
	v := gate.Judge(below, in)
	r := result(t, v, "container.image_pull p99")
	if v.Exit != gate.ExitBroken || r.Status != gate.StatusBroken {
		t.Fatalf("p99 %s, the kubelet's longest pull %s: exit %d, %s: %s", longest-margin, longest, v.Exit, r.Status, r.Message)
	}
	if len(r.Culprits) != 1 || r.Culprits[0].Name != slowest || r.Culprits[0].Container != "sleep" {
		t.Errorf("culprits %+v, want %s (container sleep) alone", r.Culprits, slowest)
	}
	if c := r.Culprits[0]; c.TraceID == "" || c.Seconds < (longest-margin).Seconds() {
		t.Errorf("culprit %+v: no trace ID, or a value below the limit", c)
	}
	above := slo(t, "version: 1\nspans:\n  container.image_pull: {p99: "+(longest+margin).String()+"}\n")
	v = gate.Judge(above, in)
	if r := result(t, v, "container.image_pull p99"); v.Exit != gate.ExitPass || r.Status != gate.StatusMet {
		t.Fatalf("p99 %s: exit %d, %s: %s", longest+margin, v.Exit, r.Status, r.Message)
	}
}

// TestFailuresByReason: run4-failures' three Pods that never became Ready, each counted under
// the reason the cluster showed: ImagePullBackOff in the Pod's status, CrashLoopBackOff from
// the kubelet's BackOff Events, and the unready one (running, no reason) as stuck.
func TestFailuresByReason(t *testing.T) {
	in := replayed(t, "run4-failures")
	backoff := kubeletEvents(t, "run4-failures", "BackOff")
	var crasher string
	for pod, msgs := range backoff {
		if strings.Contains(msgs[0], "restarting failed container") {
			crasher = pod
		}
	}
	if crasher == "" {
		t.Fatal("no Back-off restarting Event in the capture")
	}
	allowed := slo(t, "version: 1\nfailures:\n  ImagePullBackOff: 1\n  CrashLoopBackOff: 1\n  stuck: 1\n")
	v := gate.Judge(allowed, in)
	if v.Exit != gate.ExitPass {
		t.Fatalf("every failure allowed: exit %d\n%+v", v.Exit, v.Results)
	}
	for _, k := range []string{"ImagePullBackOff", "CrashLoopBackOff", "stuck"} {
		if r := result(t, v, "failures "+k); r.Measured != 1 {
			t.Errorf("failures %s: %v Pods, want 1", k, r.Measured)
		}
	}
	tight := slo(t, "version: 1\nfailures:\n  ImagePullBackOff: 1\n  CrashLoopBackOff: 0\n")
	v = gate.Judge(tight, in)
	r := result(t, v, "failures CrashLoopBackOff")
	if v.Exit != gate.ExitBroken || r.Status != gate.StatusBroken || len(r.Culprits) != 1 || r.Culprits[0].Name != crasher {
		t.Fatalf("CrashLoopBackOff: 0 allowed: exit %d, %s, culprits %+v, want %s", v.Exit, r.Status, r.Culprits, crasher)
	}
	// The unready Pod has no reason and stuck is not listed: it is other's, which allows none.
	if o := result(t, v, "failures other"); o.Status != gate.StatusBroken || o.Measured != 1 || !strings.HasPrefix(o.Culprits[0].Name, "unready-") {
		t.Errorf("other: %s, %v Pods, culprits %+v", o.Status, o.Measured, o.Culprits)
	}
}

// TestMinPods: a percentile on fewer Pods than min_pods is not judged and says so, in its
// message and the headline; a gate with no traces has no verdict (exit 2), never a pass.
func TestMinPods(t *testing.T) {
	in := replayed(t, "run3-always-pull") // two Pods
	v := gate.Judge(slo(t, "version: 1\nmin_pods: 3\nspans:\n  pod.startup: {p99: 1ms}\nfailures: {other: 5}\n"), in)
	r := result(t, v, "pod.startup p99")
	if r.Status != gate.StatusNotJudged || !strings.Contains(r.Message, "fewer than min_pods 3") {
		t.Fatalf("%s: %s", r.Status, r.Message)
	}
	if v.Exit != gate.ExitPass {
		t.Errorf("exit %d: the failures were judged and met", v.Exit)
	}
	if !strings.Contains(v.Headline(), "1 not judged") {
		t.Errorf("headline %q hides the objective not judged", v.Headline())
	}
	if v := gate.Judge(slo(t, "version: 1\nspans:\n  pod.startup: {max: 1h}\n"), gate.Input{}); v.Exit != gate.ExitNoJudge {
		t.Errorf("no traces: exit %d, want %d", v.Exit, gate.ExitNoJudge)
	}
}

// TestPercentiles checks the nearest-rank percentile against the rolling-update capture's
// pod.startup lengths, sorted here independently.
func TestPercentiles(t *testing.T) {
	in := replayed(t, "rolling-update-waves")
	var ds []time.Duration
	for _, tr := range in.Pods {
		if tr.Summary.Outcome == phases.OutcomeReady {
			ds = append(ds, tr.Root().Duration())
		}
	}
	if len(ds) < 20 {
		t.Fatalf("%d ready Pods", len(ds))
	}
	sortDurations(ds)
	for _, p := range []struct {
		key  string
		rank int // 1-based nearest rank: ceil(p/100 × n)
	}{{"p50", (50*len(ds) + 99) / 100}, {"p90", (90*len(ds) + 99) / 100}, {"p99", (99*len(ds) + 99) / 100}} {
		want := ds[p.rank-1]
		at := slo(t, "version: 1\nspans:\n  pod.startup: {"+p.key+": "+want.String()+"}\n")
		if r := result(t, gate.Judge(at, in), "pod.startup "+p.key); r.Status != gate.StatusMet || r.Measured != want.Seconds() {
			t.Errorf("%s at its value %s: %s, measured %v", p.key, want, r.Status, r.Measured)
		}
		below := slo(t, "version: 1\nspans:\n  pod.startup: {"+p.key+": "+(want-time.Microsecond).String()+"}\n")
		if r := result(t, gate.Judge(below, in), "pod.startup "+p.key); r.Status != gate.StatusBroken {
			t.Errorf("%s just below its value: %s", p.key, r.Status)
		}
	}
}

func sortDurations(ds []time.Duration) {
	for i := 1; i < len(ds); i++ {
		for j := i; j > 0 && ds[j] < ds[j-1]; j-- {
			ds[j], ds[j-1] = ds[j-1], ds[j]
		}
	}
}
