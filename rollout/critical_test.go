package rollout

import (
	"fmt"
	"testing"
	"time"

	"github.com/readyspan/readyspan/phases"
)

// Every fixture below is a rollout whose answer was worked out on paper, in the comment above
// it. Times are milliseconds after t0, the change.
var t0 = time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)

func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

func at(n int, src phases.Source) phases.Times {
	return phases.Times{{At: phases.InstantOf(ms(n)), Source: src}}
}

// uid returns a Pod or workload UID that is a UUID, so its trace ID is the UID itself.
func uid(kind string, n int) string {
	prefix := map[string]string{"new": "0000000a", "old": "0000000b", "workload": "0000000c"}[kind]
	return fmt.Sprintf("%s-0000-4000-8000-%012d", prefix, n)
}

// startup is the observation of a new Pod created at c by a ReplicaSet scaled at scaled, for
// a Deployment change persisted at t0. Relative to c (all kubelet steps from its events, to
// the ns; the rest from the watch):
//
//	scheduled   +100   scheduling   [c,      c+100]   100 ms
//	sandbox     +400   ┐
//	pulling     +400   │ image pull [c+400,  c+1400] 1000 ms
//	pulled     +1400   │
//	created    +1450   │ the rest of the kubelet phase: [c+100, c+400] ∪ [c+1400, c+1500] = 400 ms
//	started    +1500   │ readiness  [c+1500, c+2900] 1400 ms (container started → ready)
//	ready      +2900   ┘ kubelet    [c+100,  c+2900]
//	Ready      +3000     status     [c+1500, c+3000], of which after the kubelet phase: 100 ms
//
// so a critical Pod created → Ready splits its 3000 ms into scheduling 100, image_pull 1000,
// readiness 1400, kubelet_other 400 and status 100. With ready false the readiness probe
// never passes, and the Pod is still starting at end.
func startup(n int, scaled, c int, ready bool, end int) *phases.Pod {
	p := &phases.Pod{UID: uid("new", n), Name: fmt.Sprintf("web-new-%d", n), Namespace: "prod",
		Node: "node-1", Controllers: []phases.Controller{{Kind: "Deployment", Name: "web"}, {Kind: "ReplicaSet", Name: "web-new", Reached: at(scaled, phases.SourceEventName), ReachedBy: "scaled up"}},
		Root: phases.RootOf("Deployment"), Client: "kubectl"}
	p.RootPersisted = at(0, phases.SourceWatch)
	p.Created = at(c, phases.SourceEventName)
	p.Scheduled = at(c+100, phases.SourceEventTime)
	p.SandboxReady = at(c+400, phases.SourceWatch)
	ctr := phases.Container{Name: "web", Image: "registry.example/web:v2", HasReadinessProbe: true, Cache: "cold",
		PullTransfer: 900 * time.Millisecond, PullTotal: time.Second}
	ctr.PullStarted = at(c+400, phases.SourceEventName)
	ctr.PullFinished = at(c+1400, phases.SourceEventName)
	ctr.Created = at(c+1450, phases.SourceEventName)
	ctr.Started = at(c+1500, phases.SourceEventName)
	p.Running = at(c+1600, phases.SourceWatch)
	if ready {
		ctr.ReadyAt = at(c+2900, phases.SourceWatch)
		p.ContainersReady = at(c+2900, phases.SourceWatch)
		p.Ready = at(c+3000, phases.SourceWatch)
	} else {
		p.Outcome, p.End = phases.OutcomeInProgress, ms(end)
		ctr.Unhealthy = []phases.Occurrence{{Time: phases.Stamp{At: phases.InstantOf(ms(c + 2500)), Source: phases.SourceEventName},
			Reason: "Unhealthy", Message: "Readiness probe failed: HTTP probe failed with statuscode: 503", Count: 30}}
	}
	p.Containers = []phases.Container{ctr}
	return p
}

// newPod is the rollout's view of the Pod startup describes, with its trace.
func newPod(n int, scaled, c int, ready bool, end int) NewPod {
	np := NewPod{UID: uid("new", n), Name: fmt.Sprintf("web-new-%d", n), Node: "node-1",
		Created: at(c, phases.SourceEventName),
		Trace:   phases.Build(startup(n, scaled, c, ready, end), phases.Options{})}
	if ready {
		np.Ready = at(c+3000, phases.SourceWatch)
	}
	return np
}

func oldPod(n int, deleted, gone int) OldPod {
	return OldPod{UID: uid("old", n), Name: fmt.Sprintf("web-old-%d", n),
		Deleted: at(deleted, phases.SourceWatch), Gone: at(gone, phases.SourceWatch), GracePeriod: 30}
}

func step(ms int, up bool, target string, from, to int32, pods ...string) Step {
	verb := "down"
	if up {
		verb = "up"
	}
	return Step{Time: at(ms, phases.SourceEventName), Up: up, Target: target, From: from, To: to,
		Message: fmt.Sprintf("Scaled %s replica set %s from %d to %d", verb, target, from, to), Pods: pods}
}

func deployment(kind Kind, generation int64, replicas int32, strategy Strategy, complete int, outcome Outcome) *Rollout {
	return &Rollout{
		Workload: Workload{Kind: Deployment, Name: "web", Namespace: "prod", UID: uid("workload", 1)},
		Kind:     kind, Generation: generation, Revision: fmt.Sprint(generation), Strategy: strategy, Replicas: replicas,
		Start:    at(0, phases.SourceAudit),
		Complete: at(complete, phases.SourceWatch),
		Outcome:  outcome,
	}
}

var surgeOne = Strategy{Type: "RollingUpdate", MaxSurge: "1", MaxUnavailable: "0", ProgressDeadlineSeconds: 600, Partition: -1}

// sixWaves is a template change of a 6-replica Deployment with maxSurge 1, maxUnavailable 0.
// Wave k (k = 1…6) starts at u(k) = 20 + 3070·(k−1):
//
//	u(k)          scale up web-new from k−1 to k        (step 2k−2)
//	u(k)+50       new Pod k created, Ready 3 s later at u(k)+3050
//	u(k)+3060     scale down web-old from 7−k to 6−k    (step 2k−1); old Pod k deleted,
//	u(k)+4060     old Pod k gone
//	u(k)+3070     = u(k+1), the next scale up: the controller counts replicas, not Pods, so it
//	              does not wait for old Pod k to go
//
// The last wave: u(6) = 15370, new Pod 6 Ready at 18420, scale down at 18430, old Pod 6 gone
// at 19430; the controller's verdict is seen at 19460.
//
// The critical path, walked back from the end: old Pod 6 ended last (19430); its step, the
// last scale down (18430), was enabled by new Pod 6 (Ready 18420; old Pod 5 was gone only at
// 16360 < 18430 but new Pod 6 ended later); new Pod 6's step, u(6), by new Pod 5 (Ready at
// u(6)−20, while old Pod 5 was still terminating); and so on back to new Pod 1 and u(1) = 20.
// Critical: new Pods 1–6, the six scale ups, the last scale down and old Pod 6.
//
//	controllers  30 (gone → verdict) + 10 (Ready → last scale down) + 6·50 (scale up → Pod
//	             created) + 5·20 (Ready → next scale up) + 20 (change → first scale up) = 460
//	scheduling   6·100 = 600; image_pull 6·1000 = 6000; readiness 6·1400 = 8400;
//	kubelet_other 6·400 = 2400; status 6·100 = 600; termination 1000
//
// Total 19460 ms, the rollout's length. Readiness is 8400/19460 = 43.2 %, pulls 30.8 %.
func sixWaves() *Rollout {
	r := deployment(KindUpdate, 7, 6, surgeOne, 19460, OutcomeComplete)
	for k := 1; k <= 6; k++ {
		u := 20 + 3070*(k-1)
		r.Steps = append(r.Steps,
			step(u, true, "web-new", int32(k-1), int32(k), uid("new", k)),
			step(u+3060, false, "web-old", int32(7-k), int32(6-k), uid("old", k)))
		r.NewPods = append(r.NewPods, newPod(k, u, u+50, true, 0))
		r.OldPods = append(r.OldPods, oldPod(k, u+3060, u+4060))
	}
	return r
}

// minReady is one wave of a 1-replica Deployment with minReadySeconds 5: scale up at 20, the
// new Pod created at 70, Ready at 3070, available at 8070; scale down at 8080, the old Pod gone
// at 9080; the verdict at 9100.
//
// Critical: old Pod (termination 1000), the scale down, the new Pod, the scale up.
//
//	controllers  20 (gone → verdict) + 10 (available → scale down) + 50 + 20 = 100
//	min_ready    5000 (Ready → available)
//	the new Pod's 3000 as in startup; termination 1000
//
// Total 9100: minReadySeconds 54.9 %, readiness 15.4 %.
func minReady() *Rollout {
	s := surgeOne
	s.MinReadySeconds = 5
	r := deployment(KindUpdate, 3, 1, s, 9100, OutcomeComplete)
	r.Steps = []Step{
		step(20, true, "web-new", 0, 1, uid("new", 1)),
		step(8080, false, "web-old", 1, 0, uid("old", 1)),
	}
	r.NewPods = []NewPod{newPod(1, 20, 70, true, 0)}
	r.OldPods = []OldPod{oldPod(1, 8080, 9080)}
	return r
}

// scaleDown is a scale from 5 to 3: one scale down at 20, two old Pods deleted at 30 and 35,
// gone at 2030 and 5035 (the second killed at the end of a 5 s grace period); the verdict at
// 5055.
//
// Critical: the second old Pod and the step. Termination 5035 − 35 = 5000; controllers
// 20 (gone → verdict) + 15 (step → deletion) + 20 (change → step) = 55. Total 5055: 98.9 %
// termination.
func scaleDown() *Rollout {
	r := deployment(KindScale, 4, 3, Strategy{Type: "RollingUpdate", MaxSurge: "25%", MaxUnavailable: "25%", Partition: -1}, 5055, OutcomeComplete)
	r.Steps = []Step{step(20, false, "web-old", 5, 3, uid("old", 1), uid("old", 2))}
	killed := oldPod(2, 35, 5035)
	killed.GracePeriod, killed.Killed = 5, true
	r.OldPods = []OldPod{oldPod(1, 30, 2030), killed}
	return r
}

// noPods is a change the controllers answered without touching a Pod (a label on the
// Deployment only): its 2000 ms are all the controllers'.
func noPods() *Rollout {
	return deployment(KindUpdate, 5, 6, surgeOne, 2000, OutcomeComplete)
}

// failed is a 3-replica rollout to a version whose readiness probe never passes, with
// progressDeadlineSeconds 30. Wave 1 as in sixWaves (scale up 20, new Pod 1 created 70 and
// Ready 3070, scale down 3080, old Pod 1 gone 4080); wave 2 scales up at 3090 and creates new
// Pod 2 at 3140, which is never Ready; ProgressDeadlineExceeded is seen at 33100.
//
// New Pod 2 is still open: it ends at the rollout's end, 33100, so it ended last. Its 29960
// ms: scheduling 100, image_pull 1000, kubelet_other 400, readiness from its start at 4640 to
// 33100 = 28460 (its trace's readiness span runs to the end of the Pod's trace). Before it:
// 50 (scale up → created), then new Pod 1 (Ready 3070 ≤ 3090; old Pod 1, gone at 4080, ended
// after the scale up) 20 → its 3000 → 50 → 20.
//
//	controllers 0 + 50 + 20 + 50 + 20 = 140; scheduling 200; image_pull 2000;
//	readiness 1400 + 28460 = 29860; kubelet_other 800; status 100
//
// Total 33100: readiness 90.2 %, pulls 6.0 %.
func failed() *Rollout {
	s := surgeOne
	s.ProgressDeadlineSeconds = 30
	r := deployment(KindUpdate, 9, 3, s, 33100, OutcomeFailed)
	r.Reason = "ProgressDeadlineExceeded"
	r.Steps = []Step{
		step(20, true, "web-new", 0, 1, uid("new", 1)),
		step(3080, false, "web-old", 3, 2, uid("old", 1)),
		step(3090, true, "web-new", 1, 2, uid("new", 2)),
	}
	r.NewPods = []NewPod{newPod(1, 20, 70, true, 0), newPod(2, 3090, 3140, false, 33100)}
	r.OldPods = []OldPod{oldPod(1, 3080, 4080)}
	return r
}

// statefulSet is an OrderedReady update of a 3-replica StatefulSet, in reverse ordinal order,
// whose new Pods have no trace yet. For ordinal i = 2, 1, 0 (j = 2 − i) the round starts at
// a(j) = 20 + 4020·j:
//
//	a(j)          delete old Pod i        (step 2j)
//	a(j)+1000     old Pod i gone
//	a(j)+1010     create new Pod i        (step 2j+1)
//	a(j)+4010     new Pod i Ready (3000 ms, untraced)
//
// and the verdict is seen at 12100 (the last Ready at 12070). Each item waits for the one
// before it, so the whole chain is critical: every Pod and every step.
//
//	controllers  30 (Ready → verdict) + 5·10 (gone → create, Ready → delete) + 20 = 100
//	termination  3·1000 = 3000; untraced 3·3000 = 9000
//
// Total 12100: untraced 74.4 %, termination 24.8 %.
func statefulSet() *Rollout {
	r := &Rollout{
		Workload: Workload{Kind: StatefulSet, Name: "db", Namespace: "prod", UID: uid("workload", 2)},
		Kind:     KindUpdate, Generation: 2, Revision: "db-5d8f7c9b4", Replicas: 3,
		Strategy: Strategy{Type: "RollingUpdate", PodManagementPolicy: "OrderedReady"},
		Start:    at(0, phases.SourceWatch), Complete: at(12100, phases.SourceWatch), Outcome: OutcomeComplete,
	}
	for j := 0; j < 3; j++ {
		a, i := 20+4020*j, 2-j
		name := fmt.Sprintf("db-%d", i)
		old, nw := uid("old", i+1), uid("new", i+1)
		r.Steps = append(r.Steps,
			Step{Time: at(a, phases.SourceEventName), Target: name, From: -1, To: -1, Message: "delete Pod " + name + " in StatefulSet db successful", Pods: []string{old}},
			Step{Time: at(a+1010, phases.SourceEventName), Up: true, Target: name, From: -1, To: -1, Message: "create Pod " + name + " in StatefulSet db successful", Pods: []string{nw}})
		r.OldPods = append(r.OldPods, OldPod{UID: old, Name: name, Deleted: at(a, phases.SourceWatch), Gone: at(a+1000, phases.SourceWatch), GracePeriod: 30})
		r.NewPods = append(r.NewPods, NewPod{UID: nw, Name: name, Created: at(a+1010, phases.SourceEventName), Ready: at(a+4010, phases.SourceWatch)})
	}
	return r
}

// earlyHandoff is two waves of an untraced scale from 0 to 2 where the second scale up is
// stamped 2 ms before the Ready that let the controller take it (the controller's event clock
// against readyspan's receive time; handoffSlack allows 5 ms). New Pod 1: created 70, Ready
// 3070; the second scale up at 3068; new Pod 2: created 3118, Ready 6118; verdict at 6130.
//
// New Pod 2 is critical (3000 untraced), its step (50 controllers before it), and new Pod 1,
// which enabled the step: its time counts only up to the step, 3068 − 70 = 2998, or the
// critical path would hold [3068, 3070] twice.
//
//	controllers 12 + 50 + 0 + 50 + 20 = 132; untraced 3000 + 2998 = 5998; total 6130
func earlyHandoff() *Rollout {
	r := deployment(KindScale, 2, 2, surgeOne, 6130, OutcomeComplete)
	r.Steps = []Step{step(20, true, "web-new", 0, 1, uid("new", 1)), step(3068, true, "web-new", 1, 2, uid("new", 2))}
	r.NewPods = []NewPod{
		{UID: uid("new", 1), Name: "web-new-1", Created: at(70, phases.SourceEventName), Ready: at(3070, phases.SourceWatch)},
		{UID: uid("new", 2), Name: "web-new-2", Created: at(3118, phases.SourceEventName), Ready: at(6118, phases.SourceWatch)},
	}
	return r
}

// lateWatch is earlyHandoff seen by a slow readyspan: its watch received new Pod 1's Ready
// at 3100, 32 ms after the controller stamped the second scale up (3068, the Event's name),
// but before it received that Event (3110). The receive times share one clock and the
// controller wrote the Event after acting on the Ready, so new Pod 1 still enabled the step;
// the path and its figures are earlyHandoff's: new Pod 1 counts up to the step, 70 → 3068.
func lateWatch() *Rollout {
	r := earlyHandoff()
	r.NewPods[0].Ready = at(3100, phases.SourceWatch)
	r.Steps[1].Time = append(at(3068, phases.SourceEventName), phases.Stamp{At: phases.InstantOf(ms(3110)), Source: phases.SourceWatch})
	return r
}

// lateWatchAfterStep is lateWatch with new Pod 1's Ready received after the step's Event
// (3120 > 3110): then nothing observed says it came first, and the step's predecessor is
// unknown: controllers from the change to the step, 3068 − 0.
//
//	controllers 12 + 50 + 3068 = 3130; untraced 3000 (new Pod 2); total 6130
func lateWatchAfterStep() *Rollout {
	r := lateWatch()
	r.NewPods[0].Ready = at(3120, phases.SourceWatch)
	return r
}

func TestCriticalPath(t *testing.T) {
	tests := []struct {
		name     string
		r        *Rollout
		duration time.Duration
		// critical maps category names to milliseconds; the others must be 0.
		critical map[string]int
		pods     []string
		steps    []int
		waves    int
	}{
		{
			name: "six waves of one", r: sixWaves(), duration: 19460 * time.Millisecond,
			critical: map[string]int{"controllers": 460, "scheduling": 600, "image_pull": 6000, "readiness": 8400,
				"kubelet_other": 2400, "status": 600, "termination": 1000},
			pods: []string{uid("new", 1), uid("new", 2), uid("new", 3), uid("new", 4), uid("new", 5), uid("new", 6), uid("old", 6)},
			// The scale ups are the even steps; of the scale downs only the last.
			steps: []int{0, 2, 4, 6, 8, 10, 11},
			waves: 6,
		},
		{
			name: "minReadySeconds", r: minReady(), duration: 9100 * time.Millisecond,
			critical: map[string]int{"controllers": 100, "scheduling": 100, "image_pull": 1000, "readiness": 1400,
				"kubelet_other": 400, "status": 100, "min_ready": 5000, "termination": 1000},
			pods: []string{uid("new", 1), uid("old", 1)}, steps: []int{0, 1}, waves: 1,
		},
		{
			name: "scale down only", r: scaleDown(), duration: 5055 * time.Millisecond,
			critical: map[string]int{"controllers": 55, "termination": 5000},
			pods:     []string{uid("old", 2)}, steps: []int{0}, waves: 0,
		},
		{
			name: "no Pods", r: noPods(), duration: 2000 * time.Millisecond,
			critical: map[string]int{"controllers": 2000},
		},
		{
			name: "failed, the last Pod never Ready", r: failed(), duration: 33100 * time.Millisecond,
			critical: map[string]int{"controllers": 140, "scheduling": 200, "image_pull": 2000, "readiness": 29860,
				"kubelet_other": 800, "status": 100},
			pods: []string{uid("new", 1), uid("new", 2)}, steps: []int{0, 2}, waves: 2,
		},
		{
			name: "StatefulSet OrderedReady, untraced Pods", r: statefulSet(), duration: 12100 * time.Millisecond,
			critical: map[string]int{"controllers": 100, "termination": 3000, "untraced": 9000},
			pods:     []string{uid("new", 1), uid("new", 2), uid("new", 3), uid("old", 1), uid("old", 2), uid("old", 3)},
			steps:    []int{0, 1, 2, 3, 4, 5}, waves: 3,
		},
		{
			name: "hand-off stamped before the Ready that enabled it", r: earlyHandoff(), duration: 6130 * time.Millisecond,
			critical: map[string]int{"controllers": 132, "untraced": 5998},
			pods:     []string{uid("new", 1), uid("new", 2)}, steps: []int{0, 1}, waves: 2,
		},
		{
			name: "Ready received late, but before the step's Event", r: lateWatch(), duration: 6130 * time.Millisecond,
			critical: map[string]int{"controllers": 132, "untraced": 5998},
			pods:     []string{uid("new", 1), uid("new", 2)}, steps: []int{0, 1}, waves: 2,
		},
		{
			name: "Ready received after the step's Event", r: lateWatchAfterStep(), duration: 6130 * time.Millisecond,
			critical: map[string]int{"controllers": 3130, "untraced": 3000},
			pods:     []string{uid("new", 2)}, steps: []int{1}, waves: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Build(tt.r).Summary
			if s.Duration != tt.duration {
				t.Errorf("duration %v, want %v", s.Duration, tt.duration)
			}
			var sum time.Duration
			for i, c := range Categories {
				sum += s.Critical[i]
				if want := time.Duration(tt.critical[c.Name]) * time.Millisecond; s.Critical[i] != want {
					t.Errorf("critical %s = %v, want %v", c.Name, s.Critical[i], want)
				}
			}
			// Each of these critical paths is a chain without overlaps: its parts add up to the
			// rollout.
			if sum != tt.duration {
				t.Errorf("the critical path's parts add up to %v, want the rollout's %v", sum, tt.duration)
			}
			if got, want := keys(s.CriticalPods), tt.pods; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("critical Pods %v, want %v", got, want)
			}
			var steps []int
			for i := range tt.r.Steps {
				if s.CriticalSteps[i] {
					steps = append(steps, i)
				}
			}
			if fmt.Sprint(steps) != fmt.Sprint(tt.steps) {
				t.Errorf("critical steps %v, want %v", steps, tt.steps)
			}
			if s.Waves != tt.waves || s.Steps != len(tt.r.Steps) {
				t.Errorf("%d waves of %d steps, want %d of %d", s.Waves, s.Steps, tt.waves, len(tt.r.Steps))
			}
		})
	}
}

// keys returns the set's members that are true, in the order new Pods 1…n, then old Pods 1…n
// (the fixtures' UIDs sort that way).
func keys(m map[string]bool) []string {
	var out []string
	for _, kind := range []string{"new", "old"} {
		for n := 1; n <= 10; n++ {
			if m[uid(kind, n)] {
				out = append(out, uid(kind, n))
			}
		}
	}
	if len(out) != countTrue(m) {
		return append(out, "(a UID not from the fixtures)")
	}
	return out
}

func countTrue(m map[string]bool) int {
	n := 0
	for _, v := range m {
		if v {
			n++
		}
	}
	return n
}

// TestStartupSplit checks the fixture itself: the phases that a critical Pod's time is split
// by are where startup's comment says, so the expectations above rest on them.
func TestStartupSplit(t *testing.T) {
	tr := phases.Build(startup(1, 20, 70, true, 0), phases.Options{})
	want := map[string][2]int{
		phases.PhaseScheduling: {70, 170},
		phases.PhaseKubelet:    {170, 2970},
		phases.PhaseStatus:     {1570, 3070},
	}
	for name, w := range want {
		sp := tr.Phase(name)
		if sp == nil || !sp.Start.Equal(ms(w[0])) || !sp.End.Equal(ms(w[1])) {
			t.Errorf("phase %s = %v, want [%d, %d]", name, sp, w[0], w[1])
		}
	}
	for path, w := range map[string][2]int{
		"container/web/image_pull": {470, 1470},
		"container/web/readiness":  {1570, 2970},
	} {
		sp := tr.Find(path)
		if sp == nil || !sp.Start.Equal(ms(w[0])) || !sp.End.Equal(ms(w[1])) {
			t.Errorf("%s = %v, want [%d, %d]", path, sp, w[0], w[1])
		}
	}
}

func TestSentence(t *testing.T) {
	partitioned := func() *Rollout {
		r := noPods()
		r.Workload.Kind = StatefulSet
		r.Strategy = Strategy{Type: "RollingUpdate", PodManagementPolicy: "OrderedReady", Partition: 2}
		return r
	}
	tests := []struct {
		name string
		r    *Rollout
		want string
	}{
		{"six waves of one", sixWaves(),
			"19.5 s; 6 waves of 1 (maxSurge 1, maxUnavailable 0); 43% waiting on readiness probes, 31% image pulls"},
		{"minReadySeconds", minReady(),
			"9.1 s; 1 wave of 1 (maxSurge 1, maxUnavailable 0, minReadySeconds 5); 55% minReadySeconds, 15% waiting on readiness probes"},
		// 5000/5055 rounds to 99 %, 55/5055 to 1 %.
		{"scale down only", scaleDown(),
			"5.1 s; 2 Pods removed (maxSurge 25%, maxUnavailable 25%); 99% old Pods terminating, 1% controllers reacting"},
		// The second share is 0 % and left out.
		{"no Pods", noPods(),
			"2.0 s; no new Pods (maxSurge 1, maxUnavailable 0); 100% controllers reacting"},
		{"failed", failed(),
			"33.1 s, failed (ProgressDeadlineExceeded); 2 waves of 1 (maxSurge 1, maxUnavailable 0); 90% waiting on readiness probes, 6% image pulls"},
		{"StatefulSet OrderedReady", statefulSet(),
			"12.1 s; 3 waves of 1 (OrderedReady); 74% Pod startups without a trace, 25% old Pods terminating"},
		// After the fact (explain) the old Pods are gone from the API: the waits for them are
		// unobserved, not the controllers' reaction (the same 25 %).
		{"StatefulSet OrderedReady, old Pods not observed", func() *Rollout { r := statefulSet(); r.OldPods = nil; return r }(),
			"12.1 s; 3 waves of 1 (OrderedReady); 74% Pod startups without a trace, 25% old Pods terminating (not observed)"},
		// Only the first old Pod (30 → 2030): termination 2000, controllers 20 + 10 + 3025
		// (gone → verdict) = 3055 of 5055.
		{"one Pod removed", func() *Rollout {
			r := scaleDown()
			r.Steps[0].To, r.Steps[0].Pods, r.OldPods = 4, r.Steps[0].Pods[:1], r.OldPods[:1]
			return r
		}(), "5.1 s; 1 Pod removed (maxSurge 25%, maxUnavailable 25%); 60% controllers reacting, 40% old Pods terminating"},
		{"superseded", func() *Rollout { r := noPods(); r.Outcome = OutcomeSuperseded; return r }(),
			"2.0 s, superseded; no new Pods (maxSurge 1, maxUnavailable 0); 100% controllers reacting"},
		{"Recreate", func() *Rollout { r := noPods(); r.Strategy = Strategy{Type: "Recreate", Partition: -1}; return r }(),
			"2.0 s; no new Pods (Recreate); 100% controllers reacting"},
		{"waves of different sizes", func() *Rollout {
			r := noPods()
			r.Steps = []Step{step(10, true, "web-new", 0, 2), step(20, true, "web-new", 2, 3), step(30, true, "web-new", 3, 5)}
			return r
		}(), "2.0 s; 3 waves of 1–2 (maxSurge 1, maxUnavailable 0); 100% controllers reacting"},
		{"StatefulSet with a partition", partitioned(),
			"2.0 s; no new Pods (OrderedReady, partition 2); 100% controllers reacting"},
		{"DaemonSet OnDelete", func() *Rollout {
			r := noPods()
			r.Workload.Kind, r.Strategy = DaemonSet, Strategy{Type: "OnDelete", Partition: -1}
			return r
		}(), "2.0 s; no new Pods (OnDelete); 100% controllers reacting"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := Build(tt.r)
			if tr.Summary.Sentence != tt.want {
				t.Errorf("sentence\n got %q\nwant %q", tr.Summary.Sentence, tt.want)
			}
			if got := tr.Root().Attr(AttrSummary); got != tt.want {
				t.Errorf("root %s = %q, want the sentence", AttrSummary, got)
			}
		})
	}
}

// A Deployment's scale-down is enabled by a new Pod turning available, never by an old Pod's
// termination (a terminating Pod is no longer available): when the last scale-down's Event
// reaches readyspan late (a combined Event, stamped by its receive time), after both the last
// new Pod's available and an old Pod's gone, the new Pod — the last wave — is on the critical
// path, as in the local cluster's 6-replica rollout.
func TestScaleDownEnabledByNewPod(t *testing.T) {
	r := deployment(KindUpdate, 2, 2, surgeOne, 9000, OutcomeComplete)
	r.Steps = []Step{
		step(20, true, "web-new", 0, 1, uid("new", 1)),
		step(3010, false, "web-old", 2, 1, uid("old", 1)),
		step(3020, true, "web-new", 1, 2, uid("new", 2)),
		{Time: at(6010, phases.SourceWatch), Target: "web-old", From: 1, To: 0, Pods: []string{uid("old", 2)}},
	}
	r.NewPods = []NewPod{
		{UID: uid("new", 1), Name: "web-new-1", Created: at(30, phases.SourceEventName), Ready: at(3000, phases.SourceWatch)},
		{UID: uid("new", 2), Name: "web-new-2", Created: at(3030, phases.SourceEventName), Ready: at(5960, phases.SourceWatch)},
	}
	r.OldPods = []OldPod{
		{UID: uid("old", 1), Name: "web-old-1", Deleted: at(3015, phases.SourceWatch), Gone: at(6000, phases.SourceWatch), GracePeriod: 2},
		{UID: uid("old", 2), Name: "web-old-2", Deleted: at(6012, phases.SourceWatch), Gone: at(9000, phases.SourceWatch), GracePeriod: 2},
	}
	tr := Build(r)
	if !tr.Summary.CriticalPods[uid("new", 2)] || !tr.Summary.CriticalSteps[2] {
		t.Errorf("the last wave is not on the critical path: Pods %v, steps %v", tr.Summary.CriticalPods, tr.Summary.CriticalSteps)
	}
	if tr.Summary.CriticalPods[uid("old", 1)] {
		t.Errorf("an old Pod's termination enabled a scale-down: Pods %v", tr.Summary.CriticalPods)
	}
}
