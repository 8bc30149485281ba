package tracer

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/tools/txtar"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/readyspan/readyspan/exporters/terminal"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/watch"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

const (
	busybox = "127.0.0.1:5000/test/busybox:1.35"
	big     = "127.0.0.1:5000/test/big2:1"
)

var web = []container{{name: "web", image: busybox, readiness: true}}

// scenario builds the watch stream of one startup story and checks the facts it is about;
// the full output is compared with testdata/scenarios/<name>.txtar.
type scenario struct {
	name  string
	build func(s *sim) (end int) // returns the last ms to run deadlines at
	check func(t *testing.T, traces []*phases.Trace)
}

// happy runs a Pod through sandbox, containers, readiness and endpoints from bindMs on, and
// returns when it was Ready.
func happy(s *sim, name string, bindMs int, cold bool, service bool) int {
	s.bind(name, bindMs)
	s.kubeletStart(name, bindMs+30, bindMs+700)
	started := s.run(name, "web", false, cold, 4300, bindMs+760)
	s.running(name, "web", false, started, started+900, false)
	s.ready(name, started+2100)
	if service {
		s.endpoints("web", map[string]bool{name: true}, started+2110)
	}
	return started + 2110
}

var scenarios = []scenario{
	{
		name: "deployment-3-replicas",
		build: func(s *sim) int {
			s.service("web", map[string]string{"app": "web"}, 0)
			d := s.deployment("web", 3, 10)
			rs := s.replicaSet(d, "6b9c87548b", 25)
			end := 0
			for i, n := range []string{"web-6b9c87548b-aaaaa", "web-6b9c87548b-bbbbb", "web-6b9c87548b-ccccc"} {
				s.pod(n, rs, nil, web, 40+5*i)
			}
			for i, n := range []string{"web-6b9c87548b-aaaaa", "web-6b9c87548b-bbbbb", "web-6b9c87548b-ccccc"} {
				end = happy(s, n, 70+15*i, false, true)
			}
			return end
		},
		check: func(t *testing.T, ts []*phases.Trace) {
			wantCount(t, ts, 3)
			for i, tr := range ts {
				wantOutcome(t, tr, phases.OutcomeReady)
				wantSpan(t, tr, "controllers.deployment")
				wantSpan(t, tr, "controllers.replicaset")
				wantSpan(t, tr, "status.endpoints")
				if c := tr.Find("container/web/image_pull"); c == nil || c.Attr(phases.AttrImageCache) != "warm" {
					t.Errorf("%s: want a warm image pull span", tr.Pod.Name)
				}
				// The scheduler's Scheduled event, 1 ms after the bind at 70+15i ms: its
				// eventTime (µs) ends the scheduling phase.
				wantAt(t, tr.Pod.Name+": scheduling end", tr.Phase("scheduling").End, simAt(70+15*i+1), time.Microsecond)
				if tr.Pod.Client != "kubectl-client-side-apply" {
					t.Errorf("%s: client %q, want kubectl-client-side-apply", tr.Pod.Name, tr.Pod.Client)
				}
			}
		},
	},
	{
		name: "deployment-with-audit-log",
		build: func(s *sim) int {
			s.auditWrite("deployments", "apps", "web", "create", "kubectl/v1.37.2 (linux/amd64) kubernetes/$Format", 6, 9)
			d := s.deployment("web", 1, 9)
			rs := s.replicaSet(d, "6b9c87548b", 25)
			s.pod("web-6b9c87548b-aaaaa", rs, nil, web, 40)
			return happy(s, "web-6b9c87548b-aaaaa", 70, false, false)
		},
		check: func(t *testing.T, ts []*phases.Trace) {
			tr := ts[0]
			api := tr.Phase("apiserver")
			if api.Duration() != 3*time.Millisecond || api.Attr(phases.AttrSourceStart) != "audit" || api.Attr(phases.AttrObserved) != nil {
				t.Errorf("apiserver phase %v %v, want the audit log's 3ms, observed", api.Duration(), api.Attrs)
			}
			if sub := tr.Phase("submit"); sub.Attr(phases.AttrObserved) != false || sub.Service != "kubectl" {
				t.Errorf("submit must be unobserved and owned by kubectl: %v %s", sub.Attrs, sub.Service)
			}
			if !tr.Summary.PhaseObserved[1] || tr.Summary.PhaseObserved[0] {
				t.Errorf("with audit data the apiserver phase is measured, submit is not")
			}
		},
	},
	{
		name: "bare-pod-with-audit-log",
		build: func(s *sim) int {
			s.auditWrite("pods", "", "solo", "create", "kubectl/v1.37.2 (linux/amd64) kubernetes/$Format", 0, 4)
			s.pod("solo", nil, nil, []container{{name: "web", image: busybox}}, 4)
			return happy(s, "solo", 30, false, false)
		},
		check: func(t *testing.T, ts []*phases.Trace) {
			tr := ts[0]
			if api := tr.Phase("apiserver"); api.Duration() != 4*time.Millisecond {
				t.Errorf("apiserver %v, want the audit log's 4ms", api.Duration())
			}
			if c := tr.Phase("controllers"); c.Duration() != 0 || c.Attr(phases.AttrApplicable) != false {
				t.Errorf("a bare Pod's controllers phase is empty and not applicable: %v %v", c.Duration(), c.Attrs)
			}
			if s := tr.Phase("scheduling"); s.Attr(phases.AttrSourceStart) != "audit" {
				t.Errorf("scheduling starts when the Pod was persisted: %v", s.Attrs)
			}
		},
	},
	{
		name: "bare-pod-cold-pull",
		build: func(s *sim) int {
			s.pod("solo", nil, nil, []container{{name: "web", image: big}}, 0)
			return happy(s, "solo", 30, true, false)
		},
		check: func(t *testing.T, ts []*phases.Trace) {
			wantCount(t, ts, 1)
			tr := ts[0]
			wantOutcome(t, tr, phases.OutcomeReady)
			if c := tr.Phase("controllers"); c.Attr(phases.AttrApplicable) != false {
				t.Errorf("bare Pod: controllers must say readyspan.phase.applicable=false")
			}
			pull := tr.Find("container/web/image_pull")
			if pull == nil || pull.Attr(phases.AttrImageCache) != "cold" {
				t.Fatalf("want a cold pull span")
			}
			if d := pull.Duration(); d != 4300*time.Millisecond {
				t.Errorf("pull span %v, want 4.3s (Pulling → Pulled)", d)
			}
			if tx := tr.Find("container/web/image_pull/transfer"); tx == nil || tx.Duration() != 4299*time.Millisecond || !tx.End.Equal(pull.End) {
				t.Errorf("transfer child must be the stated 4.299s ending at Pulled: %+v", tx)
			}
			if tr.Phase("submit").Service != "kubectl-create" {
				t.Errorf("submit service %q, want the creating client", tr.Phase("submit").Service)
			}
		},
	},
	{
		name: "init-container-and-sidecar",
		build: func(s *sim) int {
			s.pod("mixed", nil,
				[]container{{name: "migrate", image: busybox}, {name: "proxy", image: busybox, sidecar: true, readiness: true}},
				[]container{{name: "web", image: busybox, readiness: true}}, 0)
			s.bind("mixed", 20)
			s.kubeletStart("mixed", 50, 700)
			st := s.run("mixed", "migrate", true, false, 0, 760)
			s.update("mixed", st+800, func(p *corev1.Pod, now metav1.Time) {
				cs := containerStatus(p, "migrate", true)
				cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: secs(s.at(st)), FinishedAt: secs(s.at(st + 700))}}
				cs.Ready = true
			})
			st2 := s.run("mixed", "proxy", true, false, 0, st+820)
			s.running("mixed", "proxy", true, st2, st2+500, true)
			s.update("mixed", st2+510, func(p *corev1.Pod, now metav1.Time) {
				setCond(p, corev1.PodInitialized, corev1.ConditionTrue, now, "", "")
			})
			st3 := s.run("mixed", "web", false, false, 0, st2+520)
			s.running("mixed", "web", false, st3, st3+900, false)
			s.ready("mixed", st3+1500)
			return st3 + 1500
		},
		check: func(t *testing.T, ts []*phases.Trace) {
			wantCount(t, ts, 1)
			tr := ts[0]
			wantSpan(t, tr, "container.init/migrate")
			wantSpan(t, tr, "container.sidecar/proxy")
			wantSpan(t, tr, "container/web")
			init, web := tr.Find("container.init/migrate"), tr.Find("container/web")
			if init.End.After(web.Start) {
				t.Errorf("init container must finish before the app container's turn")
			}
		},
	},
	{
		name: "two-containers",
		build: func(s *sim) int {
			s.pod("pair", nil, nil, []container{{name: "web", image: busybox, readiness: true}, {name: "log", image: big, postStart: true}}, 0)
			s.bind("pair", 20)
			s.kubeletStart("pair", 50, 700)
			a := s.run("pair", "web", false, false, 0, 760)
			b := s.run("pair", "log", false, true, 1200, a+5)
			s.running("pair", "web", false, a, b+900, false)
			s.running("pair", "log", false, b, b+900, true)
			s.ready("pair", b+2000)
			return b + 2000
		},
		check: func(t *testing.T, ts []*phases.Trace) {
			tr := ts[0]
			wantSpan(t, tr, "container/web/image_pull")
			wantSpan(t, tr, "container/log/image_pull/transfer")
			wantSpan(t, tr, "container/log/post_start")
			if tr.Summary.PullsPulled != 1 || tr.Summary.PullsPresent != 1 {
				t.Errorf("pulls pulled=%d present=%d, want 1 and 1", tr.Summary.PullsPulled, tr.Summary.PullsPresent)
			}
		},
	},
	{
		name: "errimagepull-then-success",
		build: func(s *sim) int {
			s.pod("retry", nil, nil, []container{{name: "web", image: big}}, 0)
			s.bind("retry", 20)
			s.kubeletStart("retry", 50, 700)
			img := fmt.Sprintf("%q", big)
			s.kubeletEvent("retry", "web", false, "Normal", "Pulling", "Pulling image "+img, 760)
			s.kubeletEvent("retry", "web", false, "Warning", "Failed", "Failed to pull image "+img+": rpc error: code = NotFound desc = failed to pull and unpack image", 900)
			s.kubeletEvent("retry", "web", false, "Warning", "Failed", "Error: ErrImagePull", 901)
			s.update("retry", 950, func(p *corev1.Pod, now metav1.Time) {
				containerStatus(p, "web", false).State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "failed to pull and unpack image"}}
			})
			s.kubeletEvent("retry", "web", false, "Normal", "BackOff", "Back-off pulling image "+img, 1500)
			s.kubeletEvent("retry", "web", false, "Warning", "Failed", "Error: ImagePullBackOff", 1501)
			s.update("retry", 1550, func(p *corev1.Pod, now metav1.Time) {
				containerStatus(p, "web", false).State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image " + img}}
			})
			s.kubeletEvent("retry", "web", false, "Normal", "Pulling", "Pulling image "+img, 11000)
			s.kubeletEvent("retry", "web", false, "Normal", "Pulled", "Successfully pulled image "+img+" in 2.5s (2.5s including waiting). Image size: 34704198 bytes.", 13500)
			s.kubeletEvent("retry", "web", false, "Normal", "Created", "Container created", 13540)
			s.kubeletEvent("retry", "web", false, "Normal", "Started", "Container started", 13660)
			s.running("retry", "web", false, 13660, 14500, true)
			s.ready("retry", 14500)
			return 14500
		},
		check: func(t *testing.T, ts []*phases.Trace) {
			tr := ts[0]
			wantOutcome(t, tr, phases.OutcomeReady)
			pull := tr.Find("container/web/image_pull")
			if pull == nil || len(pull.Events()) < 3 {
				t.Fatalf("pull span must carry the failures as events: %+v", pull)
			}
			if pull.Status == phases.StatusError {
				t.Errorf("a pull that finally succeeded is not an error")
			}
			if s := tr.Summary; s.PullsFailed != 1 || s.PullsPulled != 1 {
				t.Errorf("pulls failed=%d pulled=%d, want 1 failed attempt and 1 pull", s.PullsFailed, s.PullsPulled)
			}
			// From the first Pulling (760 ms) to the Pulled (13500 ms), back-off included:
			// both are event-name stamps, exact.
			wantAt(t, "pull start", pull.Start, simAt(760), 0)
			wantAt(t, "pull end", pull.End, simAt(13500), 0)
		},
	},
	{
		name: "failedscheduling-3-then-scheduled",
		build: func(s *sim) int {
			d := s.deployment("web", 1, 0)
			rs := s.replicaSet(d, "7d9f8c6b5", 10)
			s.pod("web-7d9f8c6b5-abcde", rs, nil, web, 20)
			msg := "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. no new claims to deallocate, preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
			s.schedulerEvent("web-7d9f8c6b5-abcde", "FailedScheduling", "Scheduling", "Warning", msg, 30)
			s.update("web-7d9f8c6b5-abcde", 32, func(p *corev1.Pod, _ metav1.Time) {
				setCond(p, corev1.PodScheduled, corev1.ConditionFalse, secs(s.at(31)), "Unschedulable", msg)
			})
			s.schedulerEvent("web-7d9f8c6b5-abcde", "FailedScheduling", "Scheduling", "Warning", msg, 1030)
			s.schedulerEvent("web-7d9f8c6b5-abcde", "FailedScheduling", "Scheduling", "Warning", msg, 5030)
			return happy(s, "web-7d9f8c6b5-abcde", 8000, false, false)
		},
		check: func(t *testing.T, ts []*phases.Trace) {
			tr := ts[0]
			sch := tr.Phase("scheduling")
			if len(sch.Events()) != 1 || sch.Events()[0].Name != "FailedScheduling" {
				t.Fatalf("scheduling events %+v", sch.Events())
			}
			if tr.Summary.SchedulingAttempts != 4 {
				t.Errorf("attempts %d, want 3 failed + 1 bind", tr.Summary.SchedulingAttempts)
			}
			// From the Pod's creation (SuccessfulCreate's name, 21 ms) to the Scheduled event
			// after the bind at 8000 ms (eventTime, 8001 ms), across the three failed attempts.
			wantAt(t, "scheduling start", sch.Start, simAt(21), 0)
			wantAt(t, "scheduling end", sch.End, simAt(8001), time.Microsecond)
			if tr.Summary.SLIEligible {
				t.Errorf("a Pod scheduled after failed attempts is not in the SLI")
			}
		},
	},
	{
		name: "crashloopbackoff",
		build: func(s *sim) int {
			s.pod("crasher", nil, nil, []container{{name: "web", image: busybox}}, 0)
			s.bind("crasher", 20)
			s.kubeletStart("crasher", 50, 700)
			st := s.run("crasher", "web", false, false, 0, 760)
			s.update("crasher", st+1000, func(p *corev1.Pod, now metav1.Time) {
				cs := containerStatus(p, "web", false)
				cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", StartedAt: secs(s.at(st)), FinishedAt: secs(s.at(st + 500))}}
				p.Status.Phase = corev1.PodRunning
			})
			s.kubeletEvent("crasher", "web", false, "Warning", "BackOff", "Back-off restarting failed container web in pod crasher_default(uid)", st+1100)
			s.update("crasher", st+1150, func(p *corev1.Pod, now metav1.Time) {
				cs := containerStatus(p, "web", false)
				cs.RestartCount = 1
				cs.LastTerminationState = cs.State
				cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 10s restarting failed container=web pod=crasher_default(uid)"}}
			})
			s.kubeletEvent("crasher", "web", false, "Warning", "BackOff", "Back-off restarting failed container web in pod crasher_default(uid)", st+20000)
			return st + 1150 + 125000 // beyond --fail-after
		},
		check: func(t *testing.T, ts []*phases.Trace) {
			tr := ts[0]
			wantOutcome(t, tr, phases.OutcomeFailed)
			if tr.Root().Status != phases.StatusError || tr.Root().StatusMessage != "CrashLoopBackOff" {
				t.Errorf("root status %v %q", tr.Root().Status, tr.Root().StatusMessage)
			}
			if c := tr.Find("container/web"); c.Status != phases.StatusError {
				t.Errorf("container span must be an error")
			}
		},
	},
	{
		name: "readiness-failing-then-passing",
		build: func(s *sim) int {
			s.pod("slowready", nil, nil, web, 0)
			s.bind("slowready", 20)
			s.kubeletStart("slowready", 50, 700)
			st := s.run("slowready", "web", false, false, 0, 760)
			s.running("slowready", "web", false, st, st+900, false)
			for i := 0; i < 3; i++ {
				s.kubeletEvent("slowready", "web", false, "Warning", "Unhealthy", "Readiness probe failed: connection refused", st+2000+2000*i)
			}
			s.ready("slowready", st+9000)
			return st + 9000
		},
		check: func(t *testing.T, ts []*phases.Trace) {
			tr := ts[0]
			wantOutcome(t, tr, phases.OutcomeReady)
			r := tr.Find("container/web/readiness")
			if r == nil {
				t.Fatal("no readiness span")
			}
			// From Started (event name, 760+2+40+120 = 922 ms) to the watch event that showed
			// the container ready (written at 922+9000 ms, received 3 ms later).
			wantAt(t, "readiness start", r.Start, simAt(922), 0)
			wantAt(t, "readiness end", r.End, simAt(9925), 0)
			c := tr.Find("container/web")
			n := 0
			for _, e := range c.Events() {
				if e.Name == "Unhealthy" {
					n++
				}
			}
			if n != 1 { // one event, count 3
				t.Errorf("Unhealthy events on the container: %d", n)
			}
		},
	},
	{
		name: "events-missing",
		build: func(s *sim) int {
			s.pod("quiet", nil, nil, web, 0)
			s.bind("quiet", 20)
			s.kubeletStart("quiet", 50, 700)
			s.running("quiet", "web", false, 900, 1800, false)
			s.ready("quiet", 3000)
			// Only status: drop every Event from the stream.
			out := s.deltas[:0]
			for _, d := range s.deltas {
				if d.Resource != ResourceEvents {
					out = append(out, d)
				}
			}
			s.deltas = out
			return 3000
		},
		check: func(t *testing.T, ts []*phases.Trace) {
			tr := ts[0]
			wantOutcome(t, tr, phases.OutcomeReady)
			if s := tr.Phase("scheduling").Attr(phases.AttrSourceEnd); s != "watch" {
				t.Errorf("without the Scheduled event the bind comes from the watch, got %v", s)
			}
			wantSpan(t, tr, "container/web")
		},
	},
	{
		name: "events-after-status",
		build: func(s *sim) int {
			s.pod("late", nil, nil, web, 0)
			end := happy(s, "late", 20, true, false)
			// The kubelet's events reach readyspan after the status that made the Pod Ready
			// (the recorder is asynchronous), though within the settle time.
			var evs, rest []watch.Delta
			for _, d := range s.deltas {
				if d.Resource == ResourceEvents && d.Recv.After(s.at(700)) {
					evs = append(evs, d)
				} else {
					rest = append(rest, d)
				}
			}
			for i := range evs {
				evs[i].Recv = s.at(end + 500 + i)
			}
			s.deltas = append(rest, evs...)
			return end + 3000
		},
		check: func(t *testing.T, ts []*phases.Trace) {
			tr := ts[0]
			if c := tr.Find("container/web/image_pull"); c == nil || c.Attr(phases.AttrImageCache) != "cold" {
				t.Fatalf("late Pulled event must still be in the trace")
			}
		},
	},
	{
		name: "kubelet-clock-2s-ahead",
		build: func(s *sim) int {
			s.kubeletSkew = 2 * time.Second
			s.pod("skewed", nil, nil, web, 0)
			return happy(s, "skewed", 20, true, false)
		},
		check: func(t *testing.T, ts []*phases.Trace) {
			tr := ts[0]
			// The kubelet stamps 2 s ahead and readyspan receives 3 ms after the write: its
			// events' names are 1997 ms after their receive times.
			if v, _ := tr.Root().Attr(phases.AttrKubeletAhead).(int64); v != 1997 {
				t.Errorf("kubelet ahead %v ms, want 1997", tr.Root().Attr(phases.AttrKubeletAhead))
			}
			pull := tr.Find("container/web/image_pull")
			if pull.Start.Before(tr.Phase("kubelet").Start) || pull.Attr(phases.AttrClamped) != nil {
				t.Errorf("corrected pull must sit inside the kubelet phase without clamping: %v", pull.Attrs)
			}
		},
	},
	{
		name: "deleted-before-ready",
		build: func(s *sim) int {
			s.pod("gone", nil, nil, []container{{name: "web", image: big}}, 0)
			s.bind("gone", 20)
			s.kubeletStart("gone", 50, 700)
			s.kubeletEvent("gone", "web", false, "Normal", "Pulling", fmt.Sprintf("Pulling image %q", big), 760)
			s.delete("gone", 3000)
			return 3000
		},
		check: func(t *testing.T, ts []*phases.Trace) {
			tr := ts[0]
			wantOutcome(t, tr, phases.OutcomeDeleted)
			if tr.Summary.CurrentPhase != "kubelet" {
				t.Errorf("deleted in %q", tr.Summary.CurrentPhase)
			}
		},
	},
	{
		name: "stuck-unschedulable",
		build: func(s *sim) int {
			s.pod("stuck", nil, nil, web, 0)
			msg := "0/1 nodes are available: 1 Insufficient cpu."
			s.schedulerEvent("stuck", "FailedScheduling", "Scheduling", "Warning", msg, 10)
			return 11 * 60 * 1000
		},
		check: func(t *testing.T, ts []*phases.Trace) {
			tr := ts[0]
			wantOutcome(t, tr, phases.OutcomeStuck)
			if tr.Root().StatusMessage != "stuck in scheduling" {
				t.Errorf("status %q", tr.Root().StatusMessage)
			}
		},
	},
	{
		name: "imagepullbackoff-fails",
		build: func(s *sim) int {
			s.pod("badimage", nil, nil, []container{{name: "web", image: "127.0.0.1:5000/test/nope:1"}}, 0)
			s.bind("badimage", 20)
			s.kubeletStart("badimage", 50, 700)
			img := `"127.0.0.1:5000/test/nope:1"`
			s.kubeletEvent("badimage", "web", false, "Normal", "Pulling", "Pulling image "+img, 760)
			s.kubeletEvent("badimage", "web", false, "Warning", "Failed", "Failed to pull image "+img+": not found", 800)
			s.kubeletEvent("badimage", "web", false, "Warning", "Failed", "Error: ErrImagePull", 801)
			s.update("badimage", 850, func(p *corev1.Pod, now metav1.Time) {
				containerStatus(p, "web", false).State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull"}}
			})
			s.update("badimage", 2000, func(p *corev1.Pod, now metav1.Time) {
				containerStatus(p, "web", false).State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}
			})
			s.kubeletEvent("badimage", "web", false, "Normal", "BackOff", "Back-off pulling image "+img, 2000)
			return 130_000
		},
		check: func(t *testing.T, ts []*phases.Trace) {
			tr := ts[0]
			wantOutcome(t, tr, phases.OutcomeFailed)
			pull := tr.Find("container/web/image_pull")
			if pull.Status != phases.StatusError {
				t.Errorf("pull span status %v", pull.Status)
			}
			if tr.Summary.PullsFailed != 1 {
				t.Errorf("%d failed pulls, want 1: one attempt, reported by two Failed events, then a back-off", tr.Summary.PullsFailed)
			}
		},
	},
}

func wantCount(t *testing.T, ts []*phases.Trace, n int) {
	t.Helper()
	if len(ts) != n {
		t.Fatalf("%d traces, want %d", len(ts), n)
	}
}

func wantOutcome(t *testing.T, tr *phases.Trace, o phases.Outcome) {
	t.Helper()
	if tr.Summary.Outcome != o {
		t.Errorf("%s: outcome %s, want %s (%s)", tr.Pod.Name, tr.Summary.Outcome, o, tr.Root().StatusMessage)
	}
}

// wantAt checks a boundary against the time the stream stamped, within the stamp's precision.
func wantAt(t *testing.T, what string, got, want time.Time, tolerance time.Duration) {
	t.Helper()
	if d := got.Sub(want); d < -tolerance || d > tolerance {
		t.Errorf("%s at %s, want %s ± %v (off by %v)", what, got.Format(time.RFC3339Nano), want.Format(time.RFC3339Nano), tolerance, d)
	}
}

func wantSpan(t *testing.T, tr *phases.Trace, path string) {
	t.Helper()
	if tr.Find(path) == nil {
		t.Errorf("%s: no span %s", tr.Pod.Name, path)
	}
}

// runScenario feeds the stream to a correlator as the live loop would (deadlines ticked every
// 100 ms of stream time) and returns the traces in a stable order.
func runScenario(t *testing.T, sc scenario) []*phases.Trace {
	s := newSim(t, "default")
	end := sc.build(s)
	sort.SliceStable(s.deltas, func(i, j int) bool { return s.deltas[i].Recv.Before(s.deltas[j].Recv) })
	var traces []*phases.Trace
	c := New(Config{Settle: 2 * time.Second, FailAfter: 2 * time.Minute, StuckAfter: 10 * time.Minute}, SinkFunc(func(tr *phases.Trace) { traces = append(traces, tr) }), nil, nil)
	next := s.t0
	for _, d := range s.deltas {
		for ; next.Before(d.Recv); next = next.Add(100 * time.Millisecond) {
			c.Tick(next)
		}
		c.Handle(d)
	}
	for stop := s.at(end).Add(5 * time.Second); next.Before(stop); next = next.Add(100 * time.Millisecond) {
		c.Tick(next)
	}
	c.Flush(phases.OutcomeInProgress)
	sort.SliceStable(traces, func(i, j int) bool { return traces[i].Pod.Name < traces[j].Pod.Name })
	return traces
}

func render(t *testing.T, traces []*phases.Trace) (spans, waterfall []byte) {
	var js, wf bytes.Buffer
	for _, tr := range traces {
		if err := terminal.JSONLines(&js, tr); err != nil {
			t.Fatal(err)
		}
		if err := terminal.Waterfall(&wf, tr); err != nil {
			t.Fatal(err)
		}
	}
	return js.Bytes(), wf.Bytes()
}

func TestScenarios(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			traces := runScenario(t, sc)
			if len(traces) == 0 {
				t.Fatal("no trace")
			}
			for _, tr := range traces {
				checkShape(t, tr)
			}
			sc.check(t, traces)
			spans, waterfall := render(t, traces)
			again, _ := render(t, runScenario(t, sc))
			if !bytes.Equal(spans, again) {
				t.Fatal("a second run produced different spans")
			}
			if bytes.Contains(spans, []byte("hunter2")) {
				t.Fatal("env or args values leaked into spans")
			}
			golden(t, filepath.Join("testdata", "scenarios", sc.name+".txtar"), spans, waterfall)
		})
	}
}

// checkShape asserts what every trace must satisfy: the root and the six phases in causal
// order, children inside parents, no negative span, IDs derived from the Pod UID.
func checkShape(t *testing.T, tr *phases.Trace) {
	t.Helper()
	root := tr.Root()
	if root.Name != phases.RootSpanName || !root.ParentSpanID.IsZero() {
		t.Fatalf("first span %q is not the root", root.Name)
	}
	if tr.TraceID.String() != strings.ReplaceAll(tr.Pod.UID, "-", "") {
		t.Errorf("trace ID %s is not the Pod UID %s", tr.TraceID, tr.Pod.UID)
	}
	var prev *phases.Span
	for _, name := range phases.Phases {
		p := tr.Phase(name)
		if p == nil {
			t.Fatalf("%s: no %s phase", tr.Pod.Name, name)
		}
		if prev != nil && p.Start.Before(prev.Start) {
			t.Errorf("%s: phase %s starts before %s", tr.Pod.Name, name, prev.Name)
		}
		prev = p
	}
	byID := map[phases.SpanID]*phases.Span{}
	for i := range tr.Spans {
		byID[tr.Spans[i].SpanID] = &tr.Spans[i]
	}
	for i := range tr.Spans {
		s := &tr.Spans[i]
		if s.End.Before(s.Start) {
			t.Errorf("%s: span %s is negative", tr.Pod.Name, s.Path)
		}
		if s.SpanID != phases.SpanIDFor(tr.Pod.UID, s.Path) {
			t.Errorf("%s: span %s ID not derived from UID and path", tr.Pod.Name, s.Path)
		}
		if i == 0 {
			continue
		}
		parent := byID[s.ParentSpanID]
		if parent == nil {
			t.Fatalf("%s: span %s has no parent in the trace", tr.Pod.Name, s.Path)
		}
		if s.Start.Before(parent.Start) || s.End.After(parent.End) {
			t.Errorf("%s: span %s [%v, %v] outside parent %s [%v, %v]", tr.Pod.Name, s.Path, s.Start, s.End, parent.Path, parent.Start, parent.End)
		}
		for _, key := range []string{phases.AttrSourceStart, phases.AttrSourceEnd} {
			if s.Attr(key) == nil {
				t.Errorf("%s: span %s lacks %s", tr.Pod.Name, s.Path, key)
			}
		}
	}
}

// golden compares output with a txtar file; -update rewrites it.
func golden(t *testing.T, path string, spans, waterfall []byte) {
	t.Helper()
	ar := &txtar.Archive{
		Comment: []byte("Generated by go test -update; spans are JSON lines, one per span.\n"),
		Files:   []txtar.File{{Name: "waterfall", Data: waterfall}, {Name: "spans", Data: spans}},
	}
	want := txtar.Format(ar)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./tracer -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (run go test ./tracer -update and review the diff):\n%s", path, firstDiff(got, want))
	}
}

func firstDiff(a, b []byte) string {
	al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := 0; i < len(al) && i < len(bl); i++ {
		if al[i] != bl[i] {
			return fmt.Sprintf("line %d:\n  file: %s\n  now:  %s", i+1, al[i], bl[i])
		}
	}
	return fmt.Sprintf("length differs: %d vs %d lines", len(al), len(bl))
}
