package rollout

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/readyspan/readyspan/phases"
)

// fixtures are the hand-checked rollouts of critical_test.go, made afresh on each call.
var fixtures = []struct {
	name string
	make func() *Rollout
}{
	{"six waves of one", sixWaves},
	{"minReadySeconds", minReady},
	{"scale down only", scaleDown},
	{"no Pods", noPods},
	{"failed", failed},
	{"StatefulSet", statefulSet},
	{"early hand-off", earlyHandoff},
}

// TestBuildSpanTree: one root; every other span's parent is in the trace; a step's Pods hang
// under the step; a rollout.pod has the six phase spans of the Pod's own trace under it and a
// link to that trace's root.
func TestBuildSpanTree(t *testing.T) {
	for _, f := range fixtures {
		t.Run(f.name, func(t *testing.T) {
			r := f.make()
			tr := Build(r)
			root := tr.Root()
			if root.Name != RootSpanName || !root.ParentSpanID.IsZero() {
				t.Fatalf("first span %s with parent %s, want the root %s", root.Name, root.ParentSpanID, RootSpanName)
			}
			byID := map[phases.SpanID]*phases.Span{}
			children := map[phases.SpanID][]*phases.Span{}
			count := map[string]int{}
			for i := range tr.Spans {
				sp := &tr.Spans[i]
				count[sp.Name]++
				if byID[sp.SpanID] != nil {
					t.Errorf("%s and %s share span ID %s", byID[sp.SpanID].Path, sp.Path, sp.SpanID)
				}
				byID[sp.SpanID] = sp
				if sp.End.Before(sp.Start) {
					t.Errorf("%s ends before it starts", sp.Path)
				}
				if i > 0 {
					children[sp.ParentSpanID] = append(children[sp.ParentSpanID], sp)
				}
			}
			for i := 1; i < len(tr.Spans); i++ {
				if sp := &tr.Spans[i]; byID[sp.ParentSpanID] == nil || sp.ParentSpanID.IsZero() {
					t.Errorf("%s: parent %s is not in the trace", sp.Path, sp.ParentSpanID)
				}
			}
			if count[RootSpanName] != 1 || count[StepSpanName] != len(r.Steps) || count[PodSpanName] != len(r.NewPods) || count[TerminateSpanName] != len(r.OldPods) {
				t.Errorf("spans by name %v, want 1 root, %d steps, %d new and %d old Pods", count, len(r.Steps), len(r.NewPods), len(r.OldPods))
			}

			stepOf := map[string]int{}
			for i, s := range r.Steps {
				for _, u := range s.Pods {
					stepOf[u] = i
				}
			}
			parentPath := func(u string) string {
				if i, ok := stepOf[u]; ok {
					return fmt.Sprintf("step/%d", i)
				}
				return RootSpanName
			}
			for i := range r.NewPods {
				p := &r.NewPods[i]
				sp := find(t, tr, "pod/"+p.UID)
				if got := byID[sp.ParentSpanID].Path; got != parentPath(p.UID) {
					t.Errorf("%s hangs under %s, want %s", sp.Path, got, parentPath(p.UID))
				}
				if len(sp.Links()) != 1 || sp.Links()[0].TraceID != phases.TraceIDFor(p.UID) || sp.Links()[0].SpanID != phases.SpanIDFor(p.UID, phases.RootSpanName) {
					t.Errorf("%s links %+v, want the Pod trace %s's root", sp.Path, sp.Links(), phases.TraceIDFor(p.UID))
				}
				var names []string
				for _, c := range children[sp.SpanID] {
					names = append(names, c.Name)
				}
				if p.Trace == nil {
					if len(names) != 0 {
						t.Errorf("%s without a Pod trace has children %v", sp.Path, names)
					}
					continue
				}
				// The link points at the root of the trace the Pod actually has.
				if sp.Links()[0].TraceID != p.Trace.TraceID || sp.Links()[0].SpanID != p.Trace.Root().SpanID {
					t.Errorf("%s links %s/%s, the Pod's trace root is %s/%s", sp.Path, sp.Links()[0].TraceID, sp.Links()[0].SpanID, p.Trace.TraceID, p.Trace.Root().SpanID)
				}
				if fmt.Sprint(names) != fmt.Sprint(phases.Phases) {
					t.Errorf("%s has children %v, want the six phases %v", sp.Path, names, phases.Phases)
				}
				for _, c := range children[sp.SpanID] {
					own := p.Trace.Phase(c.Name)
					if !c.Start.Equal(own.Start) || !c.End.Equal(own.End) || c.Service != own.Service {
						t.Errorf("%s/%s = [%v, %v] %s, the Pod's trace has [%v, %v] %s", sp.Path, c.Name, c.Start, c.End, c.Service, own.Start, own.End, own.Service)
					}
				}
			}
			for i := range r.OldPods {
				o := &r.OldPods[i]
				sp := find(t, tr, "terminate/"+o.UID)
				if got := byID[sp.ParentSpanID].Path; got != parentPath(o.UID) {
					t.Errorf("%s hangs under %s, want %s", sp.Path, got, parentPath(o.UID))
				}
				d, _ := o.Deleted.Resolve()
				g, _ := o.Gone.Resolve()
				if !sp.Start.Equal(d.Time()) || !sp.End.Equal(g.Time()) {
					t.Errorf("%s = [%v, %v], want deleted → gone [%v, %v]", sp.Path, sp.Start, sp.End, d.Time(), g.Time())
				}
			}
			// The critical attribute says what the summary says.
			for i := range tr.Spans {
				sp := &tr.Spans[i]
				var want bool
				switch sp.Name {
				case StepSpanName:
					var n int
					fmt.Sscanf(sp.Path, "step/%d", &n)
					want = tr.Summary.CriticalSteps[n]
				case PodSpanName, TerminateSpanName:
					want = tr.Summary.CriticalPods[sp.Attr(phases.AttrPodUID).(string)]
				default:
					continue
				}
				if sp.Attr(AttrCritical) != want {
					t.Errorf("%s: %s = %v, want %v", sp.Path, AttrCritical, sp.Attr(AttrCritical), want)
				}
			}
		})
	}
}

func find(t *testing.T, tr *Trace, path string) *phases.Span {
	t.Helper()
	for i := range tr.Spans {
		if tr.Spans[i].Path == path {
			return &tr.Spans[i]
		}
	}
	t.Fatalf("no span %s", path)
	return nil
}

// TestBuildSpans checks the spans of the six-wave rollout against its comment in
// critical_test.go.
func TestBuildSpans(t *testing.T) {
	tr := Build(sixWaves())
	tests := []struct {
		path       string
		start, end int
		attrs      map[string]any
	}{
		{RootSpanName, 0, 19460, map[string]any{
			"k8s.deployment.name": "web", "k8s.deployment.uid": uid("workload", 1), phases.AttrNamespace: "prod",
			AttrWorkloadKind: Deployment, AttrKind: "update", AttrOutcome: "complete", AttrGeneration: int64(7),
			AttrRevision: "7", AttrReplicas: int64(6), AttrStrategy: "RollingUpdate", AttrMaxSurge: "1",
			AttrMaxUnavailable: "0", AttrMinReady: int64(0), AttrDeadline: int64(600), AttrSteps: int64(12),
			AttrWaves: int64(6), AttrPartition: nil, AttrPodManagement: nil, AttrReason: nil,
			phases.AttrSourceStart: "audit", phases.AttrSourceEnd: "watch",
			"readyspan.rollout.critical.controllers_ms": int64(460), "readyspan.rollout.critical.scheduling_ms": int64(600),
			"readyspan.rollout.critical.image_pull_ms": int64(6000), "readyspan.rollout.critical.readiness_ms": int64(8400),
			"readyspan.rollout.critical.kubelet_other_ms": int64(2400), "readyspan.rollout.critical.status_ms": int64(600),
			"readyspan.rollout.critical.min_ready_ms": int64(0), "readyspan.rollout.critical.termination_ms": int64(1000),
			"readyspan.rollout.critical.untraced_ms": int64(0),
		}},
		// The first scale up: from the step to its Pod available.
		{"step/0", 20, 3070, map[string]any{AttrStepDirection: "up", AttrStepTarget: "web-new", AttrStepFrom: int64(0),
			AttrStepTo: int64(1), AttrStepMessage: "Scaled up replica set web-new from 0 to 1", AttrCritical: true,
			phases.AttrSourceStart: "event-name"}},
		// A scale down off the path, and the last one on it: to the old Pod gone.
		{"step/1", 3080, 4080, map[string]any{AttrStepDirection: "down", AttrStepFrom: int64(6), AttrStepTo: int64(5), AttrCritical: false}},
		{"step/11", 18430, 19430, map[string]any{AttrStepDirection: "down", AttrCritical: true}},
		{"pod/" + uid("new", 6), 15420, 18420, map[string]any{phases.AttrPodName: "web-new-6", phases.AttrNodeName: "node-1",
			AttrCritical: true, AttrPodOutcome: "ready", phases.AttrObserved: nil}},
		{"pod/" + uid("new", 6) + "/kubelet", 15520, 18320, nil},
		{"terminate/" + uid("old", 1), 3080, 4080, map[string]any{phases.AttrPodName: "web-old-1", AttrGracePeriod: int64(30),
			AttrPreStop: false, AttrKilled: false, AttrCritical: false}},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			sp := find(t, tr, tt.path)
			if !sp.Start.Equal(ms(tt.start)) || !sp.End.Equal(ms(tt.end)) {
				t.Errorf("[%v, %v], want [%d, %d] ms", sp.Start.Sub(t0), sp.End.Sub(t0), tt.start, tt.end)
			}
			for k, want := range tt.attrs {
				if got := sp.Attr(k); got != want {
					t.Errorf("%s = %#v, want %#v", k, got, want)
				}
			}
		})
	}
}

// TestBuildDeterministic: the same rollout gives the same trace, byte for byte; another
// generation of the same workload another trace.
func TestBuildDeterministic(t *testing.T) {
	for _, f := range fixtures {
		t.Run(f.name, func(t *testing.T) {
			a, b := Build(f.make()), Build(f.make())
			if !reflect.DeepEqual(a.Spans, b.Spans) || !reflect.DeepEqual(a.Summary, b.Summary) || a.TraceID != b.TraceID {
				t.Fatal("two builds of the same rollout differ")
			}
			r := f.make()
			if a.TraceID != TraceIDFor(r.Workload.UID, r.Generation) || a.Root().SpanID != RootSpanIDFor(r.Workload.UID, r.Generation, 0) {
				t.Errorf("trace %s root %s, want TraceIDFor and RootSpanIDFor of the workload and generation", a.TraceID, a.Root().SpanID)
			}
			r.Generation++
			c := Build(r)
			if c.TraceID == a.TraceID || c.Root().SpanID == a.Root().SpanID {
				t.Errorf("generation %d has the same trace or root span ID as %d", r.Generation, r.Generation-1)
			}
			// The Pod spans of the other generation are other spans, not the first trace's.
			if len(a.Spans) > 1 && c.Spans[1].SpanID == a.Spans[1].SpanID {
				t.Errorf("%s has the same span ID in both generations", a.Spans[1].Path)
			}
		})
	}
	// Another workload with the same generation, too.
	r := sixWaves()
	r.Workload.UID = uid("workload", 9)
	if Build(r).TraceID == Build(sixWaves()).TraceID {
		t.Error("two workloads' rollouts of the same generation share a trace ID")
	}
}

// TestBuildDoesNotModifyInput: Build says it does not modify r. The critical path clamps the
// times of its own items; nothing of that may reach the rollout.
func TestBuildDoesNotModifyInput(t *testing.T) {
	for _, f := range fixtures {
		t.Run(f.name, func(t *testing.T) {
			r, want := f.make(), f.make()
			if !reflect.DeepEqual(r, want) {
				t.Fatal("the fixture is not deterministic")
			}
			tr := Build(r)
			if !reflect.DeepEqual(r, want) {
				t.Fatalf("Build modified its input:\n got %+v\nwant %+v", r, want)
			}
			if tr.Rollout != r {
				t.Error("the trace does not point at the rollout it was built from")
			}
			// Nor may the trace share memory with it: changing the trace's spans leaves the Pod
			// traces as they were.
			for i := range tr.Spans {
				for j := range tr.Spans[i].Attrs {
					tr.Spans[i].Attrs[j].Value = "changed"
				}
				tr.Spans[i].Start = time.Time{}
			}
			if !reflect.DeepEqual(r, want) {
				t.Fatal("the trace's spans share memory with the input")
			}
		})
	}
}

// TestBuildOutcome: the root's status says how the rollout ended; a superseded rollout links
// to its successor; a killed old Pod's span is an error; an open Pod says its end was not
// observed.
func TestBuildOutcome(t *testing.T) {
	next := TraceIDFor(uid("workload", 1), 8)
	tests := []struct {
		name    string
		outcome Outcome
		reason  string
		status  phases.StatusCode
		message string
		links   []phases.Link
	}{
		{"complete", OutcomeComplete, "", phases.StatusOK, "", nil},
		{"failed", OutcomeFailed, "ProgressDeadlineExceeded", phases.StatusError, "ProgressDeadlineExceeded", nil},
		{"superseded", OutcomeSuperseded, "", phases.StatusUnset, "",
			[]phases.Link{{TraceID: next, Attrs: []phases.Attr{{Key: AttrLinkRelation, Value: "superseded_by"}}}}},
		{"paused", OutcomePaused, "DeploymentPaused", phases.StatusUnset, "", nil},
		{"in progress", OutcomeInProgress, "", phases.StatusUnset, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := minReady()
			r.Outcome, r.Reason = tt.outcome, tt.reason
			if tt.outcome == OutcomeSuperseded {
				r.SupersededBy = next
			}
			root := Build(r).Root()
			if root.Status != tt.status || root.StatusMessage != tt.message {
				t.Errorf("status %v %q, want %v %q", root.Status, root.StatusMessage, tt.status, tt.message)
			}
			if !reflect.DeepEqual(root.Links(), tt.links) {
				t.Errorf("links %+v, want %+v", root.Links(), tt.links)
			}
			if got := root.Attr(AttrOutcome); got != string(tt.outcome) {
				t.Errorf("%s = %v, want %s", AttrOutcome, got, tt.outcome)
			}
			if tt.reason != "" && root.Attr(AttrReason) != tt.reason {
				t.Errorf("%s = %v, want %s", AttrReason, root.Attr(AttrReason), tt.reason)
			}
		})
	}

	t.Run("killed old Pod", func(t *testing.T) {
		tr := Build(scaleDown())
		killed, clean := find(t, tr, "terminate/"+uid("old", 2)), find(t, tr, "terminate/"+uid("old", 1))
		if killed.Status != phases.StatusError || killed.StatusMessage != "killed after the grace period of 5 s" || killed.Attr(AttrKilled) != true {
			t.Errorf("killed Pod: status %v %q, %s = %v", killed.Status, killed.StatusMessage, AttrKilled, killed.Attr(AttrKilled))
		}
		if clean.Status != phases.StatusUnset {
			t.Errorf("an old Pod gone within its grace period has status %v", clean.Status)
		}
	})

	t.Run("open new Pod", func(t *testing.T) {
		tr := Build(failed())
		open, done := find(t, tr, "pod/"+uid("new", 2)), find(t, tr, "pod/"+uid("new", 1))
		if !open.End.Equal(ms(33100)) || open.Attr(phases.AttrObserved) != false || open.Attr(AttrPodOutcome) != "in-progress" {
			t.Errorf("open Pod ends %v, %s = %v, %s = %v; want the rollout's end, not observed, in-progress",
				open.End.Sub(t0), phases.AttrObserved, open.Attr(phases.AttrObserved), AttrPodOutcome, open.Attr(AttrPodOutcome))
		}
		if done.Attr(phases.AttrObserved) != nil {
			t.Errorf("a Pod seen Ready says %s = %v", phases.AttrObserved, done.Attr(phases.AttrObserved))
		}
		// Its step lasts until the rollout ended, like the Pod.
		if st := find(t, tr, "step/2"); !st.End.Equal(ms(33100)) {
			t.Errorf("the open Pod's step ends at %v, want 33100ms", st.End.Sub(t0))
		}
	})
}

// TestBuildWithoutVerdict: with no verdict observed (explain, the end of a replay) the
// rollout ends at the last thing seen; with no start, at the first.
func TestBuildWithoutVerdict(t *testing.T) {
	r := sixWaves()
	r.Complete, r.Outcome = nil, OutcomeInProgress
	tr := Build(r)
	root := tr.Root()
	if !root.End.Equal(ms(19430)) || root.Attr(phases.AttrSourceEnd) != phases.SourceDerived.String() {
		t.Errorf("end %v from %v, want the last old Pod gone (19430ms), derived", root.End.Sub(t0), root.Attr(phases.AttrSourceEnd))
	}
	r = sixWaves()
	r.Start = nil
	root = Build(r).Root()
	if !root.Start.Equal(ms(20)) || root.Attr(phases.AttrSourceStart) != phases.SourceDerived.String() {
		t.Errorf("start %v from %v, want the first step (20ms), derived", root.Start.Sub(t0), root.Attr(phases.AttrSourceStart))
	}
}
