package tracer

import (
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/readyspan/readyspan/events"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/rollout/tracker"
	"github.com/readyspan/readyspan/watch"
)

// rollingSim is a Deployment web of two replicas rolled from ReplicaSet web-old to web-new by
// a template change at change ms, one Pod at a time (maxSurge 1, maxUnavailable 0), as the
// v1.37 controllers do it: each scale-up, its Pod created and Ready 2 s later, then a scale-down
// and an old Pod deleted (gone 1 s later); the Deployment's completed status at the end.
type rollingSim struct {
	*sim
	dep        *appsv1.Deployment
	oldRS      *appsv1.ReplicaSet
	newRS      *appsv1.ReplicaSet
	oldPods    []string
	doneMs     int // the completed status
	lastGoneMs int
}

func (s *sim) workloadEvent(d *appsv1.Deployment, msg string, ms int) {
	s.coreEvent(&corev1.ObjectReference{Kind: "Deployment", Namespace: s.ns, Name: d.Name, UID: d.UID, APIVersion: "apps/v1"},
		"deployment-controller", "", corev1.EventTypeNormal, "ScalingReplicaSet", msg, ms)
}

// deploymentOf creates a Deployment as s.deployment does, keeping the emitted object apart
// from the one later versions change.
func (s *sim) deploymentOf(name string, replicas int32, ms int) *appsv1.Deployment {
	d := s.deployment(name, replicas, ms)
	s.deltas[len(s.deltas)-1].Object = d.DeepCopy()
	return d
}

// deploymentAt emits a new version of the Deployment, changed by change.
func (s *sim) deploymentAt(d *appsv1.Deployment, ms int, change func(d *appsv1.Deployment)) {
	change(d)
	d.ResourceVersion = s.nextRV()
	s.emit(ResourceDeployments, watch.Modified, d.DeepCopy(), s.at(ms))
}

func completeStatus(d *appsv1.Deployment, now metav1.Time) {
	n := *d.Spec.Replicas
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", LastUpdateTime: now}}}
}

func newRollingSim(t *testing.T, change int) *rollingSim { return newRollingSimOf(t, change, 2) }

// newRollingSimOf is newRollingSim with n replicas.
func newRollingSimOf(t testing.TB, change int, n int) *rollingSim {
	s := &rollingSim{sim: newSim(t, "default")}
	s.dep = s.deploymentOf("web", int32(n), 0)
	s.dep.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType}
	s.dep.Spec.Template.Spec.Containers = []corev1.Container{{Name: "web", Image: "busybox:1"}}
	s.oldRS = s.replicaSet(s.dep, "old", 10)
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("web-old-%d", i)
		s.pod(name, s.oldRS, nil, []container{{name: "web", image: "busybox:1"}}, 20)
		s.bind(name, 30)
		s.kubeletStart(name, 40, 50)
		st := s.run(name, "web", false, false, 0, 60)
		s.running(name, "web", false, st, st+10, true)
		s.ready(name, st+20)
		s.oldPods = append(s.oldPods, name)
	}
	s.deploymentAt(s.dep, 1000, func(d *appsv1.Deployment) { completeStatus(d, secs(s.at(1000))) })

	// The change: a new image.
	s.deploymentAt(s.dep, change, func(d *appsv1.Deployment) {
		d.Generation = 2
		d.Spec.Template.Spec.Containers[0].Image = "busybox:2"
		d.ManagedFields = append(d.ManagedFields, metav1.ManagedFieldsEntry{Manager: "kubectl", Operation: "Update", Time: ptr.To(secs(s.at(change)))})
	})
	first := s.dep.DeepCopy()
	first.Spec.Replicas = ptr.To(int32(1))
	s.newRS = s.replicaSet(first, "new", change+5) // "Scaled up replica set web-new from 0 to 1"
	at := change + 20
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("web-new-%d", i)
		if i > 0 {
			s.workloadEvent(s.dep, fmt.Sprintf("Scaled up replica set web-new from %d to %d", i, i+1), at)
			at += 10
		}
		s.pod(name, s.newRS, nil, []container{{name: "web", image: "busybox:2"}}, at)
		s.bind(name, at+15)
		s.kubeletStart(name, at+30, at+300)
		st := s.run(name, "web", false, false, 0, at+320)
		s.running(name, "web", false, st, st+10, false)
		s.ready(name, at+2000)
		at += 2010
		s.workloadEvent(s.dep, fmt.Sprintf("Scaled down replica set web-old from %d to %d", n-i, n-1-i), at)
		old := s.oldPods[i]
		s.update(old, at+10, func(p *corev1.Pod, now metav1.Time) {
			p.DeletionTimestamp = ptr.To(metav1.NewTime(s.at(at + 10).Add(2 * time.Second).Truncate(time.Second)))
			p.DeletionGracePeriodSeconds = ptr.To(int64(2))
		})
		s.delete(old, at+1000)
		s.lastGoneMs = at + 1000
		at += 20
	}
	s.doneMs = at + 50
	s.deploymentAt(s.dep, s.doneMs, func(d *appsv1.Deployment) { completeStatus(d, secs(s.at(s.doneMs))) })
	return s
}

// rolloutsOf runs the deltas through a correlator (ticking at each receive time, and once more
// a minute after the last) and returns the rollouts it exported.
func rolloutsOf(t *testing.T, deltas []watch.Delta) ([]*rollout.Trace, []*phases.Trace) {
	t.Helper()
	var rs []*rollout.Trace
	var ps []*phases.Trace
	c := New(Config{Rollouts: tracker.SinkFunc(func(r *rollout.Trace) { rs = append(rs, r) })}, SinkFunc(func(p *phases.Trace) { ps = append(ps, p) }), nil, nil)
	last := feed(c, deltas)
	c.Tick(last.Add(time.Minute))
	c.Flush(phases.OutcomeInProgress) // what is still rolling out
	return rs, ps
}

// feed hands the deltas to c in order, ticking at each one's receive time first, as the loop
// does; it returns the last receive time.
func feed(c *Correlator, deltas []watch.Delta) time.Time {
	var last time.Time
	for _, d := range deltas {
		c.Tick(d.Recv)
		c.Handle(d)
		last = d.Recv
	}
	return last
}

// updateOf is the rollout of generation 2 among those exported (the last, if more were), or nil.
func updateOf(rs []*rollout.Trace) *rollout.Trace {
	var out *rollout.Trace
	for _, r := range rs {
		if r.Rollout.Generation == 2 {
			out = r
		}
	}
	return out
}

// TestRolloutWaitsForOldPods: a rollout whose verdict is in while its last old Pod is still
// terminating is not done until that Pod is gone (within podTraceWait), and ends then.
func TestRolloutWaitsForOldPods(t *testing.T) {
	s := newRollingSim(t, 5000)
	goneMs := s.doneMs + 3000 // after the completed status
	var deltas []watch.Delta
	var gone watch.Delta
	for _, d := range s.deltas {
		if p, ok := d.Object.(*corev1.Pod); ok && p.Name == s.oldPods[1] && d.Type == watch.Deleted {
			gone = d
			continue
		}
		deltas = append(deltas, d)
	}
	gone.Recv = s.at(goneMs)
	var rs []*rollout.Trace
	c := New(Config{Rollouts: tracker.SinkFunc(func(r *rollout.Trace) { rs = append(rs, r) })}, SinkFunc(func(*phases.Trace) {}), nil, nil)
	last := feed(c, deltas)
	c.Tick(last.Add(2 * time.Second)) // the Pods' own traces settle; the old Pod is not gone
	if u := updateOf(rs); u != nil {
		t.Fatalf("the update was exported (%s) while its last old Pod was terminating", u.Rollout.Outcome)
	}
	feed(c, []watch.Delta{gone})
	u := updateOf(rs)
	if u == nil {
		t.Fatal("the update was not exported once its last old Pod was gone")
	}
	if u.Rollout.Outcome != rollout.OutcomeComplete || !u.Root().End.Equal(gone.Recv) {
		t.Errorf("update %s ending %s, want complete, ending when the last old Pod was gone (%s)", u.Rollout.Outcome, u.Root().End, gone.Recv)
	}
}

func TestRolloutLive(t *testing.T) {
	s := newRollingSim(t, 5000)
	rs, pods := rolloutsOf(t, s.deltas)
	var update *rollout.Trace
	for _, r := range rs {
		if r.Rollout.Generation == 2 {
			if update != nil {
				t.Fatal("two rollouts of generation 2")
			}
			update = r
		}
	}
	if update == nil {
		t.Fatalf("no rollout of generation 2 among %d", len(rs))
	}
	r := update.Rollout
	if r.Kind != rollout.KindUpdate || r.Outcome != rollout.OutcomeComplete {
		t.Errorf("kind %s outcome %s, want update complete", r.Kind, r.Outcome)
	}
	root := update.Root()
	// Start: the watch receive time of generation 2; end: the last old Pod gone (after the
	// completed status).
	if want := s.at(5000).Add(s.watchLag); !root.Start.Equal(want) {
		t.Errorf("start %s, want the receive time of the change %s", root.Start, want)
	}
	if want := s.at(s.lastGoneMs).Add(s.watchLag); !root.End.Equal(want) {
		t.Errorf("end %s, want the last old Pod gone %s", root.End, want)
	}
	if len(r.Steps) != 4 {
		t.Fatalf("%d steps, want 2 scale-ups and 2 scale-downs", len(r.Steps))
	}
	for i, st := range r.Steps {
		if len(st.Pods) != 1 {
			t.Errorf("step %d (%s) matched %d Pods, want 1", i, st.Message, len(st.Pods))
		}
	}
	if len(r.NewPods) != 2 || len(r.OldPods) != 2 {
		t.Fatalf("%d new and %d old Pods, want 2 and 2", len(r.NewPods), len(r.OldPods))
	}
	for _, p := range r.NewPods {
		if p.Trace == nil {
			t.Errorf("new Pod %s without its trace", p.Name)
		}
	}
	for _, o := range r.OldPods {
		if o.GracePeriod != 2 || !o.Gone.Known() {
			t.Errorf("old Pod %s: grace %d, gone %v", o.Name, o.GracePeriod, o.Gone)
		}
	}
	// The Pods' own traces link back to the rollout, the old Pods' to none.
	for _, p := range pods {
		n := 0
		for _, l := range p.Root().Links() {
			if l.TraceID == update.TraceID {
				n++
			}
		}
		want := 0
		if controllerNamed(p.Pod, "ReplicaSet") == "web-new" {
			want = 1
		}
		if n != want {
			t.Errorf("Pod %s links to its rollout %d times, want %d", p.Pod.Name, n, want)
		}
	}
	if !update.Summary.CriticalSteps[len(r.Steps)-1] {
		t.Errorf("the last step is not on the critical path: %v", update.Summary.CriticalSteps)
	}
}

// A second change while the first rolls out supersedes it: the first links to the second, and
// no Pod is a new Pod of both.
func TestRolloutSuperseded(t *testing.T) {
	s := newRollingSim(t, 5000)
	// A scale to 3 in the middle of the update (after the first new Pod is created).
	mid := 5000 + 1000
	var deltas []watch.Delta
	inserted := false
	for _, d := range s.deltas {
		if !inserted && d.Recv.After(s.at(mid)) {
			dep := s.dep.DeepCopy()
			dep.Generation, dep.Spec.Replicas = 3, ptr.To(int32(3))
			dep.Status = appsv1.DeploymentStatus{ObservedGeneration: 2}
			deltas = append(deltas, watch.Delta{Resource: ResourceDeployments, Type: watch.Modified, Object: dep, Recv: s.at(mid)})
			inserted = true
		}
		deltas = append(deltas, d)
	}
	rs, _ := rolloutsOf(t, deltas)
	var first, second *rollout.Trace
	for _, r := range rs {
		switch r.Rollout.Generation {
		case 2:
			first = r
		case 3:
			second = r
		}
	}
	if first == nil || second == nil {
		t.Fatalf("rollouts %d: want generations 2 and 3", len(rs))
	}
	if first.Rollout.Outcome != rollout.OutcomeSuperseded || first.Rollout.SupersededBy != second.TraceID {
		t.Errorf("first: outcome %s superseded by %s, want superseded by %s", first.Rollout.Outcome, first.Rollout.SupersededBy, second.TraceID)
	}
	if l := first.Root().Links(); len(l) != 1 || l[0].TraceID != second.TraceID {
		t.Errorf("the superseded root links to %v", l)
	}
	if second.Rollout.Kind != rollout.KindScale {
		t.Errorf("second kind %s, want scale", second.Rollout.Kind)
	}
	if !first.Root().End.Equal(s.at(mid)) {
		t.Errorf("the superseded rollout ends at %s, want the newer change %s", first.Root().End, s.at(mid))
	}
	seen := map[string]int{}
	for _, r := range []*rollout.Trace{first, second} {
		for _, p := range r.Rollout.NewPods {
			seen[p.UID]++
		}
	}
	for uid, n := range seen {
		if n != 1 {
			t.Errorf("Pod %s is a new Pod of %d rollouts", uid, n)
		}
	}
	if len(seen) != 2 {
		t.Errorf("%d new Pods across both rollouts, want 2", len(seen))
	}
}

// The controller's own failure verdict ends a rollout failed, with its reason; pausing ends it
// paused; no verdict at all fails it after RolloutStuckAfter.
func TestRolloutVerdicts(t *testing.T) {
	tests := []struct {
		name    string
		status  func(d *appsv1.Deployment)
		outcome rollout.Outcome
		reason  string
	}{
		{"deadline", func(d *appsv1.Deployment) {
			d.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing,
				Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "web-new" has timed out progressing.`}}}
		}, rollout.OutcomeFailed, `ProgressDeadlineExceeded: ReplicaSet "web-new" has timed out progressing.`},
		{"paused", func(d *appsv1.Deployment) {
			d.Spec.Paused = true
			d.Status = appsv1.DeploymentStatus{ObservedGeneration: 2}
		}, rollout.OutcomePaused, "paused"},
		{"stuck", func(d *appsv1.Deployment) { d.Status = appsv1.DeploymentStatus{ObservedGeneration: 2} }, rollout.OutcomeFailed, "stuck: not rolled out after 30m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSim(t, "default")
			d := s.deploymentOf("web", 1, 0)
			d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "web", Image: "busybox:1"}}
			s.deploymentAt(d, 1000, func(d *appsv1.Deployment) { completeStatus(d, secs(s.at(1000))) })
			s.deploymentAt(d, 5000, func(d *appsv1.Deployment) {
				d.Generation = 2
				d.Spec.Template.Spec.Containers[0].Image = "busybox:2"
			})
			s.deploymentAt(d, 40000, tt.status)
			var rs []*rollout.Trace
			c := New(Config{Rollouts: tracker.SinkFunc(func(r *rollout.Trace) { rs = append(rs, r) })}, SinkFunc(func(*phases.Trace) {}), nil, nil)
			for _, d := range s.deltas {
				c.Handle(d)
			}
			c.Tick(s.at(40000 + 31*60*1000))
			got := updateOf(rs)
			if got == nil {
				t.Fatal("no rollout of generation 2")
			}
			if got.Rollout.Outcome != tt.outcome || got.Rollout.Reason != tt.reason {
				t.Errorf("outcome %s reason %q, want %s %q", got.Rollout.Outcome, got.Rollout.Reason, tt.outcome, tt.reason)
			}
		})
	}
}

func TestStepOf(t *testing.T) {
	tests := []struct {
		kind, reason, msg string
		ok, known, up     bool
		target            string
		from, to          int32
	}{
		{"Deployment", "ScalingReplicaSet", "Scaled up replica set web-7d4b9 from 1 to 2", true, true, true, "web-7d4b9", 1, 2},
		{"Deployment", "ScalingReplicaSet", "Scaled down replica set web-5c6f from 3 to 0", true, true, false, "web-5c6f", 3, 0},
		{"Deployment", "ScalingReplicaSet", "Scaled sideways replica set web", true, false, false, "", -1, -1},
		{"Deployment", "DeploymentRollback", "Rolled back", false, true, false, "", -1, -1},
		{"Deployment", "ScalingReplicaSet", "(combined from similar events): Scaled up replica set web-7d4b9 from 4 to 5", true, true, true, "web-7d4b9", 4, 5},
		{"StatefulSet", "SuccessfulCreate", "create Pod db-0 in StatefulSet db successful", true, true, true, "db-0", -1, -1},
		{"StatefulSet", "SuccessfulCreate", "Create Pod db-1 in StatefulSet db successful", true, true, true, "db-1", -1, -1},
		{"StatefulSet", "SuccessfulDelete", "delete Pod db-2 in StatefulSet db successful", true, true, false, "db-2", -1, -1},
		{"StatefulSet", "SuccessfulCreate", "create Claim data-db-0 Pod db-0 in StatefulSet db success", true, false, false, "", -1, -1},
		{"DaemonSet", "SuccessfulCreate", "Created pod: agent-x7k2p", true, true, true, "agent-x7k2p", -1, -1},
		{"DaemonSet", "SuccessfulDelete", "Deleted pod: agent-x7k2p", true, true, false, "agent-x7k2p", -1, -1},
		{"DaemonSet", "SuccessfulDelete", "Removed pod agent-x7k2p", true, false, false, "", -1, -1},
		// Argo Rollouts' rollouts-controller v1.8.5, as captured.
		{"Rollout", "ScalingReplicaSet", "Scaled up ReplicaSet web-7b9c9b7bb6 (revision 1) from 0 to 3", true, true, true, "web-7b9c9b7bb6", 0, 3},
		{"Rollout", "ScalingReplicaSet", "Scaled down ReplicaSet web-7b9c9b7bb6 (revision 1) from 3 to 2", true, true, false, "web-7b9c9b7bb6", 3, 2},
		{"Rollout", "ScalingReplicaSet", "Scaled up ReplicaSet web-7b9c9b7bb6 (rev 1) from 0 to 3", true, false, false, "", -1, -1},
		{"Rollout", "ScalingReplicaSet", "Scaled up replica set web-7b9c9b7bb6 from 0 to 3", true, false, false, "", -1, -1},
		{"Rollout", "RolloutStepCompleted", "Rollout step 1/4 completed (setWeight: 34)", false, true, false, "", -1, -1},
	}
	for _, tt := range tests {
		st, ok, known := stepOf(&events.Event{Regarding: events.Ref{Kind: tt.kind}, Reason: tt.reason, Message: tt.msg})
		if other, _, _ := stepOf(&events.Event{Regarding: events.Ref{APIVersion: "example.com/v1", Kind: tt.kind}, Reason: tt.reason, Message: tt.msg}); other.Target != "" {
			t.Errorf("%q about a %s of another group read as a step: %+v", tt.msg, tt.kind, other)
		}
		if ok != tt.ok || known != tt.known {
			t.Errorf("%q: ok %v known %v, want %v %v", tt.msg, ok, known, tt.ok, tt.known)
			continue
		}
		if !ok || !known {
			continue
		}
		if st.Up != tt.up || st.Target != tt.target || st.From != tt.from || st.To != tt.to {
			t.Errorf("%q: %+v", tt.msg, st)
		}
		if want := strings.TrimPrefix(tt.msg, events.CombinedPrefix); st.Message != want {
			t.Errorf("%q: message %q, want %q (the recorder's prefix dropped)", tt.msg, st.Message, want)
		}
	}
}

// What `readyspan record` writes, `readyspan replay` rebuilds into the same rollout traces as
// the live stream did: the recording keeps every stream rollouts read.
func TestRolloutRecordReplay(t *testing.T) {
	s := newRollingSim(t, 5000)
	live, _ := rolloutsOf(t, s.deltas)
	dir := t.TempDir()
	rec := watch.NewRecorder(Kinds, dir)
	for _, d := range s.deltas {
		obj, err := Kinds.Transform(d.Object.DeepCopyObject()) // as the informers hand them to the recorder
		if err != nil {
			t.Fatal(err)
		}
		d.Object = obj.(runtime.Object)
		rec.Write(d)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	loaded, err := Kinds.LoadRecording(dir)
	if err != nil {
		t.Fatal(err)
	}
	replayed, _ := rolloutsOf(t, loaded)
	if len(replayed) != len(live) || len(live) == 0 {
		t.Fatalf("%d rollouts replayed, %d live", len(replayed), len(live))
	}
	for i := range live {
		a, b := live[i], replayed[i]
		if a.TraceID != b.TraceID || len(a.Spans) != len(b.Spans) || a.Summary.Sentence != b.Summary.Sentence {
			t.Errorf("rollout %d: live %s %q (%d spans), replayed %s %q (%d spans)", i, a.TraceID, a.Summary.Sentence, len(a.Spans), b.TraceID, b.Summary.Sentence, len(b.Spans))
			continue
		}
		for j := range a.Spans {
			x, y := a.Spans[j], b.Spans[j]
			if x.SpanID != y.SpanID || !x.Start.Equal(y.Start) || !x.End.Equal(y.End) {
				t.Errorf("rollout %d span %s: live %s–%s, replayed %s %s–%s", i, x.Path, x.Start, x.End, y.Path, y.Start, y.End)
			}
		}
	}
}

// A ReplicaSet creating more than ten Pods has its SuccessfulCreate Events combined: the
// rewrites are a known format, and their name's time (the first occurrence's) dates no Pod.
func TestCombinedSuccessfulCreate(t *testing.T) {
	c := New(Config{}, SinkFunc(func(*phases.Trace) {}), nil, nil)
	e := &events.Event{UID: "e1", Namespace: "default", Regarding: events.Ref{Kind: "ReplicaSet", Name: "web-7d4b9"}, Reason: "SuccessfulCreate",
		Message: "(combined from similar events): Created pod: web-7d4b9-x2x9k", NameTime: events.WallOf(simAt(0)), Count: 4, Recv: events.WallOf(simAt(9000))}
	if !c.handleCreatedEvent(e) {
		t.Fatal("a combined SuccessfulCreate is a known format")
	}
	if len(c.createdBy) != 0 {
		t.Errorf("the combined Event's first-occurrence time was kept for %v", c.createdBy)
	}
}

// Once a rollout is exported its new Pods' traces are let go: the Pods stay tracked (a later
// rollout meets them as old Pods) but without their startup traces, which would otherwise stay
// in memory for as long as the Pods run.
func TestRolloutReleasesPodTraces(t *testing.T) {
	s := newRollingSim(t, 5000)
	var exported int
	c := New(Config{Rollouts: tracker.SinkFunc(func(*rollout.Trace) { exported++ })}, SinkFunc(func(*phases.Trace) {}), nil, nil)
	c.Tick(feed(c, s.deltas).Add(time.Minute))
	if exported < 2 {
		t.Fatalf("%d rollouts exported, want the creation and the update", exported)
	}
	h := c.rollouts.Held()
	if h.Pods == 0 {
		t.Fatal("no Pods tracked: nothing to check")
	}
	if h.PodTraces != 0 {
		t.Errorf("%d of %d Pods still hold their trace after their rollout was exported", h.PodTraces, h.Pods)
	}
}

// What a workload's history holds is bounded in time, not by the cluster's churn: Pods gone and
// steps taken tracker.HistoryRetention ago are forgotten once no rollout can claim them; a rollout still
// in progress keeps all of its own, however long it runs, and exports them in full.
func TestRolloutHistoryBounded(t *testing.T) {
	gonePods := func(c *Correlator) int { return c.rollouts.Held().Gone }

	t.Run("rolled out", func(t *testing.T) {
		s := newRollingSim(t, 5000)
		c := New(Config{Rollouts: tracker.SinkFunc(func(*rollout.Trace) {})}, SinkFunc(func(*phases.Trace) {}), nil, nil)
		last := feed(c, s.deltas)
		c.Tick(last.Add(tracker.HistoryRetention - time.Minute))
		if n := gonePods(c); n != 2 {
			t.Errorf("%d gone Pods remembered within the retention, want the 2 old ones", n)
		}
		if n := c.rollouts.Held().Steps; n != 5 {
			t.Errorf("%d steps remembered within the retention, want 5 (the creation's and the update's 4)", n)
		}
		c.Tick(last.Add(tracker.HistoryRetention + time.Minute))
		if n := gonePods(c); n != 0 {
			t.Errorf("%d gone Pods remembered past the retention, want none", n)
		}
		h := c.rollouts.Held()
		if h.Steps != 0 {
			t.Errorf("%d steps remembered past the retention, want none", h.Steps)
		}
		// The sim's one workload is the Deployment.
		if h.Workloads != 1 || h.Pods != 2 {
			t.Errorf("the Deployment and its 2 running Pods must stay (workloads kept: %d, Pods %d)", h.Workloads, h.Pods)
		}
	})

	t.Run("in progress past the retention", func(t *testing.T) {
		s := newRollingSim(t, 5000)
		// The second new Pod never turns Ready: its old Pod stays, and the controller gives no
		// verdict (a Deployment with no progress deadline).
		var deltas []watch.Delta
		stuck := s.at(9060) // web-new-1's Ready
		for _, d := range s.deltas {
			if d.Recv.Before(stuck) {
				deltas = append(deltas, d)
			}
		}
		var rs []*rollout.Trace
		c := New(Config{Rollouts: tracker.SinkFunc(func(r *rollout.Trace) { rs = append(rs, r) })}, SinkFunc(func(*phases.Trace) {}), nil, nil)
		last := feed(c, deltas)
		for at := last; at.Before(last.Add(tracker.HistoryRetention + 5*time.Minute)); at = at.Add(30 * time.Second) {
			c.Tick(at)
		}
		if n := gonePods(c); n != 1 {
			t.Errorf("%d gone Pods remembered, want the rollout's old one", n)
		}
		c.Tick(s.at(5000).Add(tracker.DefaultStuckAfter + time.Minute))
		u := updateOf(rs)
		if u == nil {
			t.Fatalf("the update was not exported (%d rollouts)", len(rs))
		}
		if u.Rollout.Outcome != rollout.OutcomeFailed || len(u.Rollout.OldPods) != 1 || len(u.Rollout.NewPods) != 2 || len(u.Rollout.Steps) != 3 {
			t.Errorf("stuck update: outcome %s, %d old Pods, %d new, %d steps; want failed, 1, 2, 3",
				u.Rollout.Outcome, len(u.Rollout.OldPods), len(u.Rollout.NewPods), len(u.Rollout.Steps))
		}
	})
}

// BenchmarkRolloutTickIdle is one tick of the rollout tracker in a cluster of n Deployments
// with no rollout in progress, as most of a cluster's workloads are most of the time (the
// scale test bed's 20,000 Pods come in 2,000; 150,000 Pods in Deployments of 10 would be
// 15,000): what a tick costs must not grow with the workloads that are not rolling out.
func BenchmarkRolloutTickIdle(b *testing.B) {
	for _, n := range []int{1000, 15000} {
		b.Run(fmt.Sprintf("workloads=%d", n), func(b *testing.B) {
			s := newSim(b, "default")
			for i := 0; i < n; i++ {
				d := s.deployment(fmt.Sprintf("d-%d", i), 10, 0)
				completeStatus(d, secs(s.at(0)))
				s.deltas[len(s.deltas)-1].Initial = true // there, rolled out, before readyspan
			}
			c := New(Config{Rollouts: tracker.SinkFunc(func(*rollout.Trace) {})}, SinkFunc(func(*phases.Trace) {}), nil, nil)
			for _, d := range s.deltas {
				c.Handle(d)
			}
			if h := c.rollouts.Held(); h.Workloads != n || h.Rolling != 0 {
				b.Fatalf("%d workloads, %d rolling out; want %d and none", h.Workloads, h.Rolling, n)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				c.Tick(s.at(2000 + 200*(i%5)))
			}
		})
	}
}

// BenchmarkRolloutTail is one Pod change in a rollout of n Pods that is rolled out (the
// Deployment's verdict is in) and waits for its last old Pod to be gone: terminating Pods
// change, each change asks whether the rollout is done, and that must not cost more than a walk
// over its Pods.
func BenchmarkRolloutTail(b *testing.B) {
	for _, n := range []int{2, 100, 500} {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			s := newRollingSimOf(b, 5000, n)
			var done []*rollout.Trace
			c := New(Config{Rollouts: tracker.SinkFunc(func(r *rollout.Trace) { done = append(done, r) })}, SinkFunc(func(*phases.Trace) {}), nil, nil)
			// The last old Pod is still terminating when the verdict comes: it is not gone yet,
			// and each change of it is measured.
			var change watch.Delta
			for _, d := range s.deltas {
				if p, ok := d.Object.(*corev1.Pod); ok && p.Name == s.oldPods[n-1] {
					if d.Type == watch.Deleted {
						continue
					}
					change = d
				}
				c.Handle(d)
			}
			if h := c.rollouts.Held(); h.Rolling != 1 || h.RolledOut != 1 {
				for _, r := range done {
					b.Logf("rollout %d: %s %s, %d new Pods", r.Rollout.Generation, r.Rollout.Outcome, r.Rollout.Reason, len(r.Rollout.NewPods))
				}
				b.Fatalf("want one rollout rolled out and waiting for its Pods' traces (%d active)", c.rollouts.Held().Rolling)
			}
			change.Type = watch.Modified
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				change.Recv = s.at(s.doneMs + 1 + i%1000)
				c.Handle(change)
			}
			b.StopTimer()
			if c.rollouts.Held().Rolling != 1 {
				b.Fatal("the rollout finished while it was measured")
			}
		})
	}
}
