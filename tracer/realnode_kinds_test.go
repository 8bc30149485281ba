package tracer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	promexp "github.com/readyspan/readyspan/exporters/prometheus"
	"github.com/readyspan/readyspan/internal/captures"
	"github.com/readyspan/readyspan/objects"
	"github.com/readyspan/readyspan/phases"
)

// The captures in testdata/real-node/kinds-* were recorded with `readyspan record` on the local
// cluster (v1.37.2 control plane, kubelet, containerd): a StatefulSet of 3 (OrderedReady) with one
// Pod deleted and recreated, a DaemonSet whose Pod was deleted and replaced, a Job of two
// completions whose first Pod failed once, and a CronJob "* * * * *" for one run. The tests below
// hold each workload controller's step against what the capture's raw JSON states, read here
// without the tracer's parsing: the controllers' Events' name hex (their nanosecond clock, taken
// after the create returned), objects' creationTimestamps and deletion requests, the Pods'
// Ready lastTransitionTime, the Job's cronjob-scheduled-timestamp annotation.

// kindsDir is a capture of this file's.
func kindsDir(name string) string { return filepath.Join("testdata", "real-node", "kinds-"+name) }

// TestRealNodeKinds replays the captures and compares with golden output.
func TestRealNodeKinds(t *testing.T) {
	for _, name := range []string{"statefulset", "daemonset", "job", "cronjob", "rollout"} {
		t.Run(name, func(t *testing.T) {
			traces := replayDir(t, kindsDir(name))
			if len(traces) == 0 {
				t.Fatal("no traces")
			}
			for _, tr := range traces {
				checkShape(t, tr)
			}
			spans, waterfall := render(t, traces)
			golden(t, kindsDir(name)+".txtar", spans, waterfall)
		})
	}
}

// rawObject is what the tests read of an object in a watch stream.
type rawObject struct {
	Metadata struct {
		Name                       string            `json:"name"`
		UID                        string            `json:"uid"`
		CreationTimestamp          time.Time         `json:"creationTimestamp"`
		DeletionTimestamp          *time.Time        `json:"deletionTimestamp"`
		DeletionGracePeriodSeconds *int64            `json:"deletionGracePeriodSeconds"`
		Annotations                map[string]string `json:"annotations"`
		ManagedFields              []struct {
			Manager string    `json:"manager"`
			Time    time.Time `json:"time"`
		} `json:"managedFields"`
	} `json:"metadata"`
	Status struct {
		Phase      string `json:"phase"`
		Conditions []struct {
			Type               string    `json:"type"`
			Status             string    `json:"status"`
			LastTransitionTime time.Time `json:"lastTransitionTime"`
		} `json:"conditions"`
		ContainerStatuses []struct {
			State struct {
				Terminated *struct {
					FinishedAt time.Time `json:"finishedAt"`
				} `json:"terminated"`
			} `json:"state"`
		} `json:"containerStatuses"`
	} `json:"status"`
	// Events.
	Reason         string `json:"reason"`
	Message        string `json:"message"`
	Count          int    `json:"count"`
	LastTimestamp  time.Time
	InvolvedObject struct {
		Kind, Name string
	} `json:"involvedObject"`
}

type rawDelta struct {
	Type   string    `json:"type"`
	Recv   time.Time `json:"recv"`
	Object rawObject `json:"object"`
}

// rawWatch reads a capture's watch stream.
func rawWatch(t *testing.T, dir, stream string) []rawDelta {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "watch."+stream+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []rawDelta
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var d rawDelta
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// created is the nanosecond the controller's SuccessfulCreate Event names, for the Event whose
// message is msg: its first occurrence (an Event's name is stamped when it is first written).
func created(t *testing.T, events []rawDelta, msg string) time.Time {
	t.Helper()
	for _, d := range events {
		if d.Object.Reason == "SuccessfulCreate" && d.Object.Message == msg {
			name := d.Object.Metadata.Name
			ns, err := strconv.ParseInt(name[strings.LastIndexByte(name, '.')+1:], 16, 64)
			if err != nil {
				t.Fatalf("event %s: %v", name, err)
			}
			return time.Unix(0, ns)
		}
	}
	t.Fatalf("no SuccessfulCreate %q in the capture", msg)
	return time.Time{}
}

// podsInOrder are the capture's Pods by UID, in the order the watch first showed them, each with
// its versions.
func podsInOrder(deltas []rawDelta) (uids []string, versions map[string][]rawDelta) {
	versions = map[string][]rawDelta{}
	for _, d := range deltas {
		uid := d.Object.Metadata.UID
		if versions[uid] == nil {
			uids = append(uids, uid)
		}
		versions[uid] = append(versions[uid], d)
	}
	return uids, versions
}

func byUID(t *testing.T, traces []*phases.Trace, uid string) *phases.Trace {
	t.Helper()
	for _, tr := range traces {
		if tr.Pod.UID == uid {
			return tr
		}
	}
	t.Fatalf("no trace of Pod %s", uid)
	return nil
}

func spanOf(t *testing.T, tr *phases.Trace, name string) *phases.Span {
	t.Helper()
	for i := range tr.Spans {
		if tr.Spans[i].Name == name {
			return &tr.Spans[i]
		}
	}
	t.Fatalf("%s: no span %s", tr.Pod.Name, name)
	return nil
}

// inSecond reports whether at lies in the whole second that starts at second, the window a
// whole-second stamp allows.
func inSecond(at, second time.Time) bool {
	return !at.Before(second) && at.Before(second.Add(time.Second))
}

// checkAttrs holds a span's attributes to want.
func checkAttrs(t *testing.T, who string, s *phases.Span, want map[string]any) {
	t.Helper()
	for k, v := range want {
		if got := s.Attr(k); got != v {
			t.Errorf("%s: %s %s = %v, want %v", who, s.Name, k, got, v)
		}
	}
}

// checkReplaces holds a replacement's root to the Pod it replaces: a link to its trace, its
// name and why it went.
func checkReplaces(t *testing.T, tr *phases.Trace, old, oldName, why string) {
	t.Helper()
	root := tr.Root()
	checkAttrs(t, tr.Pod.Name, root, map[string]any{phases.AttrReplacesPod: oldName, phases.AttrReplacesWhy: why})
	var ls []phases.Link
	for _, l := range root.Links() {
		if len(l.Attrs) > 0 && l.Attrs[0] == (phases.Attr{Key: phases.AttrLinkRelation, Value: "replaces"}) {
			ls = append(ls, l)
		}
	}
	if len(ls) != 1 || ls[0].TraceID != phases.TraceIDFor(old) || ls[0].SpanID != phases.SpanIDFor(old, phases.RootSpanName) {
		t.Errorf("%s: root links %v, want one that replaces the trace of %s (%s)", tr.Pod.Name, root.Links(), oldName, old)
	}
}

// deletionRequested is when a client asked to delete the Pod: its deletionTimestamp less the
// grace period (whole seconds, the apiserver's clock).
func deletionRequested(t *testing.T, versions []rawDelta) time.Time {
	t.Helper()
	for _, v := range versions {
		m := v.Object.Metadata
		if m.DeletionTimestamp != nil && m.DeletionGracePeriodSeconds != nil {
			return m.DeletionTimestamp.Add(-time.Duration(*m.DeletionGracePeriodSeconds) * time.Second)
		}
	}
	t.Fatal("the Pod was never deleted")
	return time.Time{}
}

// TestRealNodeStatefulSetOrdered: each Pod of an OrderedReady StatefulSet is created once the one
// before it is Ready. controllers.statefulset runs from that Ready (the kubelet's
// lastTransitionTime, whole seconds) to the statefulset controller's "Create Pod web-N in
// StatefulSet web successful" (its name's nanoseconds); web-0's from the StatefulSet's creation.
// The deleted web-1 is recreated under its name: the new one links to the old and says why.
func TestRealNodeStatefulSetOrdered(t *testing.T) {
	dir := kindsDir("statefulset")
	traces := replayDir(t, dir)
	events := rawWatch(t, dir, "events.core.v1")
	sts := rawWatch(t, dir, "statefulsets")[0].Object
	uids, versions := podsInOrder(rawWatch(t, dir, "pods"))
	if len(uids) != 4 {
		t.Fatalf("%d Pods in the capture, want web-0, web-1, web-2 and web-1 again", len(uids))
	}
	readyAt := func(uid string) time.Time {
		for _, v := range versions[uid] {
			for _, c := range v.Object.Status.Conditions {
				if c.Type == "Ready" && c.Status == "True" {
					return c.LastTransitionTime
				}
			}
		}
		t.Fatalf("Pod %s never Ready", uid)
		return time.Time{}
	}
	for i, uid := range uids[:3] {
		name := "web-" + strconv.Itoa(i)
		tr := byUID(t, traces, uid)
		if tr.Pod.Name != name {
			t.Fatalf("Pod %d is %s, want %s", i, tr.Pod.Name, name)
		}
		checkAttrs(t, name, tr.Root(), map[string]any{phases.AttrRoot: "statefulset", phases.AttrStatefulSetName: "web"})
		s := spanOf(t, tr, phases.SpanControllersStatefulSet)
		if want := created(t, events, "Create Pod "+name+" in StatefulSet web successful"); !s.End.Equal(want) {
			t.Errorf("%s: controllers.statefulset ends at %v, want the Event's %v", name, s.End, want)
		}
		if i == 0 {
			checkAttrs(t, name, s, map[string]any{phases.AttrCause: "change"})
			if !inSecond(s.Start, sts.Metadata.CreationTimestamp) {
				t.Errorf("%s: controllers.statefulset starts at %v, not in the StatefulSet's creation second %v", name, s.Start, sts.Metadata.CreationTimestamp)
			}
			continue
		}
		prev := "web-" + strconv.Itoa(i-1)
		checkAttrs(t, name, s, map[string]any{phases.AttrCause: "predecessor_ready", phases.AttrCausePod: prev})
		if r := readyAt(uids[i-1]); !inSecond(s.Start, r) {
			t.Errorf("%s: controllers.statefulset starts at %v, not in the second %s turned Ready (%v)", name, s.Start, prev, r)
		}
		if s.End.Sub(s.Start) > time.Second {
			t.Errorf("%s: the controller took %v after %s was Ready", name, s.End.Sub(s.Start), prev)
		}
	}
	// The second web-1: created once the first was gone; its SuccessfulCreate is the first's
	// Event counted again (count 2), whose name is the first's: its lastTimestamp dates it.
	tr := byUID(t, traces, uids[3])
	checkReplaces(t, tr, uids[1], "web-1", "deleted")
	s := spanOf(t, tr, phases.SpanControllersStatefulSet)
	checkAttrs(t, "web-1 again", s, map[string]any{phases.AttrCause: "replacement", phases.AttrCausePod: "web-1"})
	if req := deletionRequested(t, versions[uids[1]]); s.Start.Before(req) {
		t.Errorf("the new web-1's step starts at %v, before the old one's deletion was asked for (%v)", s.Start, req)
	}
	newCreated := versions[uids[3]][0].Object.Metadata.CreationTimestamp
	if !inSecond(s.End, newCreated) || s.Start.After(s.End) {
		t.Errorf("the new web-1's step %v → %v, want it to end in its creation second %v", s.Start, s.End, newCreated)
	}
}

// TestRealNodeDaemonSetReplacement: the DaemonSet's Pod is created after the DaemonSet (its
// creation second → "Created pod: NAME"'s nanoseconds); the Pod deleted is replaced, and the
// replacement links to it, its step starting no earlier than the deletion was asked for.
func TestRealNodeDaemonSetReplacement(t *testing.T) {
	dir := kindsDir("daemonset")
	traces := replayDir(t, dir)
	events := rawWatch(t, dir, "events.core.v1")
	ds := rawWatch(t, dir, "daemonsets")[0].Object
	uids, versions := podsInOrder(rawWatch(t, dir, "pods"))
	if len(uids) != 2 {
		t.Fatalf("%d Pods in the capture, want the first and its replacement", len(uids))
	}
	first, second := byUID(t, traces, uids[0]), byUID(t, traces, uids[1])
	for _, tr := range []*phases.Trace{first, second} {
		checkAttrs(t, tr.Pod.Name, tr.Root(), map[string]any{phases.AttrRoot: "daemonset", phases.AttrDaemonSetName: "agent"})
		s := spanOf(t, tr, phases.SpanControllersDaemonSet)
		if want := created(t, events, "Created pod: "+tr.Pod.Name); !s.End.Equal(want) {
			t.Errorf("%s: controllers.daemonset ends at %v, want the Event's %v", tr.Pod.Name, s.End, want)
		}
	}
	s := spanOf(t, first, phases.SpanControllersDaemonSet)
	checkAttrs(t, first.Pod.Name, s, map[string]any{phases.AttrCause: "change"})
	if !inSecond(s.Start, ds.Metadata.CreationTimestamp) {
		t.Errorf("controllers.daemonset starts at %v, not in the DaemonSet's creation second %v", s.Start, ds.Metadata.CreationTimestamp)
	}
	checkReplaces(t, second, uids[0], first.Pod.Name, "deleted")
	s = spanOf(t, second, phases.SpanControllersDaemonSet)
	checkAttrs(t, second.Pod.Name, s, map[string]any{phases.AttrCause: "replacement", phases.AttrCausePod: first.Pod.Name})
	// The DaemonSet replaces a Pod once it stops running (terminal, or gone): after its
	// deletion was asked for and its grace period ran.
	req := deletionRequested(t, versions[uids[0]])
	if s.Start.Before(req) || s.Start.After(s.End) {
		t.Errorf("the replacement's step %v → %v, want it to start after the deletion was asked for (%v)", s.Start, s.End, req)
	}
}

// TestRealNodeJobRetried: a Job of two completions, one at a time. Its first Pod fails; the job
// controller replaces it after its back-off, and creates the second completion once the
// replacement succeeded. controllers.job ends at each "Created pod: NAME" (nanoseconds); the
// first starts at the Job's creation, the others after the Pod before them finished (its
// containers' finishedAt, whole seconds).
func TestRealNodeJobRetried(t *testing.T) {
	dir := kindsDir("job")
	traces := replayDir(t, dir)
	events := rawWatch(t, dir, "events.core.v1")
	job := rawWatch(t, dir, "jobs")[0].Object
	uids, versions := podsInOrder(rawWatch(t, dir, "pods"))
	if len(uids) != 3 {
		t.Fatalf("%d Pods in the capture, want 3", len(uids))
	}
	finished := func(uid string) (time.Time, string) {
		var at time.Time
		var phase string
		for _, v := range versions[uid] {
			phase = v.Object.Status.Phase
			for _, c := range v.Object.Status.ContainerStatuses {
				if c.State.Terminated != nil {
					at = c.State.Terminated.FinishedAt
				}
			}
		}
		return at, phase
	}
	if _, phase := finished(uids[0]); phase != "Failed" {
		t.Fatalf("the first Pod ended %s, want Failed", phase)
	}
	for i, uid := range uids {
		tr := byUID(t, traces, uid)
		checkAttrs(t, tr.Pod.Name, tr.Root(), map[string]any{phases.AttrRoot: "job", phases.AttrJobName: "pi"})
		s := spanOf(t, tr, phases.SpanControllersJob)
		if want := created(t, events, "Created pod: "+tr.Pod.Name); !s.End.Equal(want) {
			t.Errorf("%s: controllers.job ends at %v, want the Event's %v", tr.Pod.Name, s.End, want)
		}
		if i == 0 {
			checkAttrs(t, tr.Pod.Name, s, map[string]any{phases.AttrCause: "change"})
			if !inSecond(s.Start, job.Metadata.CreationTimestamp) {
				t.Errorf("%s: controllers.job starts at %v, not in the Job's creation second %v", tr.Pod.Name, s.Start, job.Metadata.CreationTimestamp)
			}
			continue
		}
		prev := byUID(t, traces, uids[i-1]).Pod.Name
		if i == 1 {
			checkAttrs(t, tr.Pod.Name, s, map[string]any{phases.AttrCause: "replacement", phases.AttrCausePod: prev})
			checkReplaces(t, tr, uids[0], prev, "failed: Error (exit code 1)")
		} else {
			checkAttrs(t, tr.Pod.Name, s, map[string]any{phases.AttrCause: "next_completion", phases.AttrCausePod: prev})
			if r := tr.Root().Attr(phases.AttrReplacesPod); r != nil {
				t.Errorf("%s: a next completion replaces nothing, yet names %v", tr.Pod.Name, r)
			}
		}
		if done, _ := finished(uids[i-1]); s.Start.Before(done) || s.Start.After(s.End) {
			t.Errorf("%s: controllers.job %v → %v, want it to start after %s finished (%v)", tr.Pod.Name, s.Start, s.End, prev, done)
		}
	}
}

// TestRealNodeCronJob: a CronJob's Pod is rooted at the schedule time the cronjob controller
// wrote on its Job. controllers.cronjob runs from that time to "Created job NAME" (the
// controller's nanoseconds), controllers.job from there to "Created pod: NAME".
func TestRealNodeCronJob(t *testing.T) {
	dir := kindsDir("cronjob")
	traces := replayDir(t, dir)
	events := rawWatch(t, dir, "events.core.v1")
	job := rawWatch(t, dir, "jobs")[0].Object
	scheduled, err := time.Parse(time.RFC3339, job.Metadata.Annotations["batch.kubernetes.io/cronjob-scheduled-timestamp"])
	if err != nil {
		t.Fatal(err)
	}
	// The controller names a Job by its schedule time in minutes since the epoch
	// (cronjob/utils.go, getJobName): the annotation must agree.
	if want := "tick-" + strconv.FormatInt(scheduled.Unix()/60, 10); job.Metadata.Name != want {
		t.Fatalf("Job %s for a schedule time of %v, want %s", job.Metadata.Name, scheduled, want)
	}
	if len(traces) != 1 {
		t.Fatalf("%d traces, want the one Pod's", len(traces))
	}
	tr := traces[0]
	checkAttrs(t, tr.Pod.Name, tr.Root(), map[string]any{phases.AttrRoot: "cronjob", phases.AttrCronJobName: "tick", phases.AttrJobName: job.Metadata.Name})
	if !tr.Root().Start.Equal(scheduled) {
		t.Errorf("the trace starts at %v, want the schedule time %v", tr.Root().Start, scheduled)
	}
	cron := spanOf(t, tr, phases.SpanControllersCronJob)
	jobCreated := created(t, events, "Created job "+job.Metadata.Name)
	if !cron.Start.Equal(scheduled) || !cron.End.Equal(jobCreated) {
		t.Errorf("controllers.cronjob %v → %v, want the schedule time %v → the Event's %v", cron.Start, cron.End, scheduled, jobCreated)
	}
	s := spanOf(t, tr, phases.SpanControllersJob)
	if want := created(t, events, "Created pod: "+tr.Pod.Name); !s.Start.Equal(jobCreated) || !s.End.Equal(want) {
		t.Errorf("controllers.job %v → %v, want %v → the Event's %v", s.Start, s.End, jobCreated, want)
	}
	checkAttrs(t, tr.Pod.Name, s, map[string]any{phases.AttrCause: "schedule"})
}

// TestRealNodeJobPodCompleted: a Job's Pod whose Ready the watch never showed (the container
// exits before the kubelet reports it, or a relist skipped that version) runs to Succeeded.
// Its trace ends there as completed, with no error, and no metric counts it stuck or failed.
// The capture's Pod is made so by leaving out its versions that show Ready=True; every other
// version is as the API served it.
func TestRealNodeJobPodCompleted(t *testing.T) {
	dir := t.TempDir()
	src := kindsDir("cronjob")
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	var succeeded time.Time
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == "watch.pods.jsonl" {
			var kept [][]byte
			for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
				var d rawDelta
				if err := json.Unmarshal(line, &d); err != nil {
					t.Fatal(err)
				}
				ready := false
				for _, c := range d.Object.Status.Conditions {
					ready = ready || c.Type == "Ready" && c.Status == "True"
				}
				if ready {
					continue
				}
				if d.Object.Status.Phase == "Succeeded" && succeeded.IsZero() {
					succeeded = d.Recv
				}
				kept = append(kept, line)
			}
			b = append(bytes.Join(kept, []byte("\n")), '\n')
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if succeeded.IsZero() {
		t.Fatal("the capture's Pod never Succeeded")
	}
	traces := replayDir(t, dir)
	if len(traces) != 1 {
		t.Fatalf("%d traces, want 1", len(traces))
	}
	tr := traces[0]
	root := tr.Root()
	if tr.Summary.Outcome != phases.OutcomeCompleted || root.Status != phases.StatusOK {
		t.Errorf("outcome %s, status %v (%s), want completed and OK", tr.Summary.Outcome, root.Status, root.StatusMessage)
	}
	if !root.End.Equal(succeeded) {
		t.Errorf("the trace ends at %v, want Succeeded as seen (%v)", root.End, succeeded)
	}
	for _, s := range tr.Spans {
		if s.Status == phases.StatusError {
			t.Errorf("span %s is an error: %s", s.Name, s.StatusMessage)
		}
	}
	reg := prometheus.NewRegistry()
	m := promexp.New(reg, "test", Kinds.RolloutKinds(), promexp.Options{})
	m.Export(tr)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	// sum adds a counter's series, of one outcome label value ("" for all).
	sum := func(name, outcome string) float64 {
		var n float64
		for _, f := range families {
			if f.GetName() != name {
				continue
			}
			for _, m := range f.GetMetric() {
				match := outcome == ""
				for _, l := range m.GetLabel() {
					match = match || l.GetName() == "outcome" && l.GetValue() == outcome
				}
				if match {
					n += m.GetCounter().GetValue()
				}
			}
		}
		return n
	}
	if n := sum("readyspan_pods_stuck_total", "") + sum("readyspan_pod_startups_failed_total", ""); n != 0 {
		t.Errorf("a completed Pod counted %v times as stuck or failed", n)
	}
	if n := sum("readyspan_traces_total", "completed"); n != 1 {
		t.Errorf("readyspan_traces_total{outcome=\"completed\"} = %v, want 1", n)
	}
}

// eventNamed is the nanosecond an Event's name states, for the Event of reason whose message is
// msg: its first occurrence (client-go's recorder stamps the name when it first writes it).
func eventNamed(t *testing.T, events []rawDelta, reason, msg string) time.Time {
	t.Helper()
	for _, d := range events {
		if d.Object.Reason == reason && d.Object.Message == msg {
			name := d.Object.Metadata.Name
			ns, err := strconv.ParseInt(name[strings.LastIndexByte(name, '.')+1:], 16, 64)
			if err != nil {
				t.Fatalf("event %s: %v", name, err)
			}
			return time.Unix(0, ns)
		}
	}
	t.Fatalf("no %s %q in the capture", reason, msg)
	return time.Time{}
}

// TestRealNodeArgoRollout: Argo Rollouts' own controller (v1.10.2) made a Rollout of three Pods
// and, after a change of its template by kubectl patch, moved it to a new ReplicaSet through a
// canary of four steps, one Pod per scale-up. Each Pod's chain is the Rollout's: rooted at the
// client's change (the Rollout's creation second, then kubectl-patch's managedFields second),
// controllers.rollout ends at the nanosecond of the rollouts-controller's "Scaled up ReplicaSet
// NAME (revision N) from A to B" that made it, controllers.replicaset at the replicaset
// controller's "Created pod: NAME". The controller's own write of the new Rollout's spec (its
// generation 2, before any change) roots nothing.
func TestRealNodeArgoRollout(t *testing.T) {
	dir := kindsDir("rollout")
	traces := replayDir(t, dir)
	events := rawWatch(t, dir, "events.core.v1")
	rollouts := rawWatch(t, dir, "rollouts.argoproj.io")
	uids, versions := podsInOrder(rawWatch(t, dir, "pods"))
	if len(uids) != 6 || len(traces) != 6 {
		t.Fatalf("%d Pods and %d traces in the capture, want three of each revision", len(uids), len(traces))
	}
	// Each change as the Rollout's watch shows it: the second its managedFields (or its
	// creationTimestamp) state, and the receive time of the first version that shows it, which
	// bounds it from above.
	var patched, patchSeen time.Time
	for _, v := range rollouts {
		for _, f := range v.Object.Metadata.ManagedFields {
			if f.Manager == "kubectl-patch" && patched.IsZero() {
				patched, patchSeen = f.Time, v.Recv
			}
		}
	}
	created, createSeen := rollouts[0].Object.Metadata.CreationTimestamp, rollouts[0].Recv
	made := map[string]int{} // Pods of each ReplicaSet so far, in the order they were created
	for _, uid := range uids {
		tr := byUID(t, traces, uid)
		name := tr.Pod.Name
		rs := name[:strings.LastIndexByte(name, '-')]
		revision, client, from, seen := "1", "kubectl-client-side-apply", created, createSeen
		scaled := "Scaled up ReplicaSet " + rs + " (revision 1) from 0 to 3"
		if rs != "web-7b9c9b7bb6" {
			n := made[rs]
			revision, client, from, seen = "2", "kubectl-patch", patched, patchSeen
			scaled = fmt.Sprintf("Scaled up ReplicaSet %s (revision 2) from %d to %d", rs, n, n+1)
		}
		made[rs]++
		checkAttrs(t, name, tr.Root(), map[string]any{phases.AttrRoot: "rollout", phases.AttrClient: client,
			"k8s.rollout.name": "web", phases.AttrReplicaSetName: rs})
		step := spanOf(t, tr, "controllers.rollout")
		if want := eventNamed(t, events, "ScalingReplicaSet", scaled); !step.End.Equal(want) {
			t.Errorf("%s (revision %s): controllers.rollout ends at %v, want %q's %v", name, revision, step.End, scaled, want)
		}
		if !inSecond(step.Start, from) || step.Start.After(seen) {
			t.Errorf("%s (revision %s): controllers.rollout starts at %v, not in the second of %s's change (%v) by its first sight (%v)",
				name, revision, step.Start, client, from, seen)
		}
		rsStep := spanOf(t, tr, phases.SpanControllersReplicaSet)
		if want := eventNamed(t, events, "SuccessfulCreate", "Created pod: "+name); !rsStep.End.Equal(want) || !rsStep.Start.Equal(step.End) {
			t.Errorf("%s: controllers.replicaset %v → %v, want %v → the Event's %v", name, rsStep.Start, rsStep.End, step.End, want)
		}
		if len(versions[uid]) == 0 {
			t.Errorf("%s: no versions", name)
		}
	}
	if patched.IsZero() || made["web-7b9c9b7bb6"] != 3 || len(made) != 2 {
		t.Fatalf("the capture is not the scenario: patched %v, Pods per ReplicaSet %v", patched, made)
	}
}

// TestControllerWritesAreNoClients: the Rollout's managedFields as the capture shows them, with
// the rollouts-controller's own spec write a second after the client's (as when it stamps the
// revision after a slow patch): the change is the client's, at the client's time.
func TestControllerWritesAreNoClients(t *testing.T) {
	at := func(s int) *metav1.Time { return &metav1.Time{Time: time.Date(2026, 12, 5, 6, 20, s, 0, time.UTC)} }
	m := &metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{
		{Manager: "kubectl-client-side-apply", Operation: metav1.ManagedFieldsOperationUpdate, Time: at(36)},
		{Manager: "kubectl-patch", Operation: metav1.ManagedFieldsOperationUpdate, Time: at(44)},
		{Manager: "rollouts-controller", Operation: metav1.ManagedFieldsOperationUpdate, Time: at(45)},
		{Manager: "rollouts-controller", Operation: metav1.ManagedFieldsOperationUpdate, Time: at(49), Subresource: "status"},
	}}
	if who, when := objects.ClientChange(m); who != "kubectl-patch" || !when.Equal(at(44).Time) {
		t.Errorf("the change is %s's at %v, want kubectl-patch's at %v", who, when, at(44).Time)
	}
}

// TestScaleEventAfterItsPods: the deployment controller names its ScalingReplicaSet Event only
// after its write of the ReplicaSet returns, and under load the replicaset controller can make
// the step's Pods, and name their SuccessfulCreate Events, first. run8's capture with that
// Event's name moved 5 ms past the last Pod's creation (everything else as captured): every Pod
// is still rooted at the Deployment's creation by its client (curl, the Deployment's only
// client in managedFields), not at the ReplicaSet by the controller manager.
func TestScaleEventAfterItsPods(t *testing.T) {
	const scaling = "sleeper.18ecc6093dc162e0" // Scaled up replica set sleeper-6b9c87548b from 0 to 2
	const lastCreate = 0x18ecc60941814642      // Created pod: sleeper-6b9c87548b-ghwzl
	late := fmt.Sprintf("sleeper.%x", int64(lastCreate+5*time.Millisecond))
	move := func(b []byte) []byte { return bytes.ReplaceAll(b, []byte(scaling), []byte(late)) }
	dir := captures.Copy(t, "run8-slow-pull-watch", map[string]func([]byte) []byte{
		"events.core.v1.json": move, "events.events.k8s.io.v1.json": move,
		"watch.events.core.v1.jsonl": move, "watch.events.events.k8s.io.v1.jsonl": move,
	})
	traces := replayDir(t, dir)
	if len(traces) != 2 {
		t.Fatalf("%d traces, want the Deployment's 2 Pods", len(traces))
	}
	for _, tr := range traces {
		checkAttrs(t, tr.Pod.Name, tr.Root(), map[string]any{phases.AttrRoot: "deployment", phases.AttrClient: "curl"})
	}
}
