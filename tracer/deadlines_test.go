package tracer

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/watch"
)

// The clock alone finishes a trace at five moments (check's branches); each is met on the
// first tick at or after it, and not on the tick before. Ticks every 100 ms, as in runScenario;
// the deadlines are short so the cases stay small: settle 2 s, endpoints wait 5 s, fail-after
// 20 s, stuck-after 60 s.
func TestDeadlines(t *testing.T) {
	cfg := Config{Settle: 2 * time.Second, EndpointsWait: 5 * time.Second, FailAfter: 20 * time.Second, StuckAfter: time.Minute}
	svc := map[string]string{"app": "web"}
	tests := []struct {
		name    string
		build   func(s *sim) (due time.Time) // the stream; when the trace is due
		outcome phases.Outcome
	}{
		// happy returns when the address turned ready; without one, Ready came 10 ms before.
		{"Ready, no Service: settled", func(s *sim) time.Time {
			s.pod("a", nil, nil, web, 0)
			return s.recv(happy(s, "a", 50, false, false) - 10).Add(2 * time.Second)
		}, phases.OutcomeReady},
		{"Ready, its address ready: settled", func(s *sim) time.Time {
			s.service("web", svc, 0)
			s.pod("a", nil, nil, web, 10)
			return s.recv(happy(s, "a", 50, false, true)).Add(2 * time.Second)
		}, phases.OutcomeReady},
		{"Ready, a Service, no endpoints: the endpoints wait", func(s *sim) time.Time {
			s.service("web", svc, 0)
			s.pod("a", nil, nil, web, 10)
			return s.recv(happy(s, "a", 50, false, false) - 10).Add(5 * time.Second)
		}, phases.OutcomeReady},
		{"a Service deleted while the Pod waits for endpoints: settled from the next tick", func(s *sim) time.Time {
			s.service("web", svc, 0)
			s.pod("a", nil, nil, web, 10)
			ready := happy(s, "a", 50, false, false) - 10
			s.emit(ResourceServices, watch.Deleted, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: s.ns}}, s.at(ready+1050))
			return onTick(s, s.recv(ready+1050)).Add(2 * time.Second) // complete on the first tick after the deletion
		}, phases.OutcomeReady},
		{"a Service created while the Pod settles: the endpoints wait instead", func(s *sim) time.Time {
			s.pod("a", nil, nil, web, 10)
			ready := happy(s, "a", 50, false, false) - 10
			s.service("web", svc, ready+1000)
			return s.recv(ready).Add(5 * time.Second)
		}, phases.OutcomeReady},
		{"a persistent failure: fail-after", func(s *sim) time.Time {
			s.pod("a", nil, nil, web, 0)
			s.bind("a", 50)
			s.update("a", 3000, func(p *corev1.Pod, now metav1.Time) {
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web", Image: busybox,
					State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}}}}
			})
			return s.recv(3000).Add(20 * time.Second)
		}, phases.OutcomeFailed},
		{"a volume that does not mount: fail-after from the first FailedMount", func(s *sim) time.Time {
			s.pod("a", nil, nil, web, 0)
			s.bind("a", 50)
			s.kubeletEvent("a", "", false, corev1.EventTypeWarning, "FailedMount", `MountVolume.SetUp failed for volume "cfg" : configmap "late-config" not found`, 200)
			s.kubeletEvent("a", "", false, corev1.EventTypeWarning, "FailedMount", `MountVolume.SetUp failed for volume "cfg" : configmap "late-config" not found`, 8200)
			return s.recv(200).Add(20 * time.Second)
		}, phases.OutcomeFailed},
		{"a volume mounted before fail-after: no failure, Ready", func(s *sim) time.Time {
			s.pod("a", nil, nil, web, 0)
			s.kubeletEvent("a", "", false, corev1.EventTypeWarning, "FailedMount", `MountVolume.SetUp failed for volume "cfg" : configmap "late-config" not found`, 200)
			// The sandbox turns ready at 19200, before fail-after (20200); Ready only after it.
			return s.recv(happy(s, "a", 18500, false, false) - 10).Add(2 * time.Second)
		}, phases.OutcomeReady},
		{"a pull failure in the version that shows the volumes mounted: fail-after from it", func(s *sim) time.Time {
			s.pod("a", nil, nil, web, 0)
			s.bind("a", 50)
			s.kubeletEvent("a", "", false, corev1.EventTypeWarning, "FailedMount", `MountVolume.SetUp failed for volume "cfg" : configmap "late-config" not found`, 200)
			s.update("a", 5000, func(p *corev1.Pod, now metav1.Time) {
				setCond(p, corev1.PodReadyToStartContainers, corev1.ConditionTrue, now, "", "")
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web", Image: busybox,
					State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "not found"}}}}
			})
			return s.recv(5000).Add(20 * time.Second)
		}, phases.OutcomeFailed},
		{"never Ready: stuck-after from creation", func(s *sim) time.Time {
			s.pod("a", nil, nil, web, 0)
			s.bind("a", 50)
			// From the creationTimestamp, the earliest stamp of the creation: a whole second.
			return s.at(0).Truncate(time.Second).Add(time.Minute)
		}, phases.OutcomeStuck},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSim(t, "default")
			due := tt.build(s)
			sort.SliceStable(s.deltas, func(i, j int) bool { return s.deltas[i].Recv.Before(s.deltas[j].Recv) })
			var exported []time.Time
			var got *phases.Trace
			var clock time.Time
			c := New(cfg, SinkFunc(func(tr *phases.Trace) { exported, got = append(exported, clock), tr }), nil, nil)
			clock = s.t0
			for _, d := range s.deltas {
				for ; clock.Before(d.Recv); clock = clock.Add(100 * time.Millisecond) {
					c.Tick(clock)
				}
				at := clock
				clock = d.Recv
				c.Handle(d)
				clock = at
			}
			for stop := due.Add(10 * time.Second); clock.Before(stop); clock = clock.Add(100 * time.Millisecond) {
				c.Tick(clock)
			}
			if len(exported) != 1 {
				t.Fatalf("exported %d times, want once", len(exported))
			}
			// The first tick at or after the due time (ticks are on t0 + k·100 ms).
			want := onTick(s, due)
			if !exported[0].Equal(want) {
				t.Errorf("exported on the tick at %v, want the one at %v (due %v)", exported[0].Sub(s.t0), want.Sub(s.t0), due.Sub(s.t0))
			}
			if got.Pod.Outcome != tt.outcome {
				t.Errorf("outcome %s, want %s", got.Pod.Outcome, tt.outcome)
			}
			if c.InFlight() != 0 || len(c.due) != 0 {
				t.Errorf("%d Pods in flight and %d due times left", c.InFlight(), len(c.due))
			}
		})
	}
}

// The in-flight gauges are counted as Pods change; at every tick they must equal a count made
// from scratch, through a whole stream of real startups, failures and deletions.
func TestInPhaseCounts(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			s := newSim(t, "default")
			end := sc.build(s)
			sort.SliceStable(s.deltas, func(i, j int) bool { return s.deltas[i].Recv.Before(s.deltas[j].Recv) })
			stats := &phaseStats{}
			c := New(Config{Settle: 2 * time.Second}, SinkFunc(func(*phases.Trace) {}), stats, nil)
			compare := func(at time.Time) {
				c.Tick(at)
				want := map[string]int{}
				for _, ps := range c.pods {
					want[currentPhase(ps.Pod())]++
				}
				for _, ph := range []string{phases.PhaseScheduling, phases.PhaseKubelet, phases.PhaseStatus} {
					if stats.last[ph] != want[ph] {
						t.Fatalf("at %v: %d Pods counted in %s, %d are", at.Sub(s.t0), stats.last[ph], ph, want[ph])
					}
				}
			}
			for _, d := range s.deltas {
				c.Handle(d)
				compare(d.Recv)
			}
			compare(s.at(end).Add(time.Minute))
		})
	}
}

// phaseStats keeps a copy of the last in-flight counts published.
type phaseStats struct {
	noStats
	last map[string]int
}

func (p *phaseStats) InPhase(counts map[string]int) {
	p.last = map[string]int{}
	for k, v := range counts {
		p.last[k] = v
	}
}

// onTick is the first tick (every 100 ms from t0) at or after t.
func onTick(s *sim, t time.Time) time.Time {
	return s.t0.Add((t.Sub(s.t0) + 100*time.Millisecond - 1).Truncate(100 * time.Millisecond))
}

// recv is when readyspan receives what the simulation writes at ms.
func (s *sim) recv(ms int) time.Time { return s.at(ms).Add(s.watchLag) }

// BenchmarkTickInFlight: one deadline tick with n Pods in flight, none of them due. Before the
// due-time heap a tick checked every Pod.
func BenchmarkTickInFlight(b *testing.B) {
	for _, n := range []int{1000, 20000} {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			s := newSim(b, "default")
			for i := 0; i < n; i++ {
				s.pod(fmt.Sprintf("p-%d", i), nil, nil, web, i%1000)
			}
			c := New(Config{}, SinkFunc(func(*phases.Trace) {}), nil, nil)
			for _, d := range s.deltas {
				c.Handle(d)
			}
			// The clock stays within one second, far from every deadline, so every iteration
			// ticks over all n Pods in flight.
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				c.Tick(s.at(2000 + 200*(i%5)))
			}
			if c.InFlight() != n {
				b.Fatalf("%d Pods in flight, want %d", c.InFlight(), n)
			}
		})
	}
}

// BenchmarkTickServicesChanged: one deadline tick after a Service changed, with n Pods in flight,
// none Ready: as while Deployments, each with its Service, keep starting.
func BenchmarkTickServicesChanged(b *testing.B) {
	for _, n := range []int{1000, 20000} {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			s := newSim(b, "default")
			for i := 0; i < n; i++ {
				s.pod(fmt.Sprintf("p-%d", i), nil, nil, web, i%1000)
			}
			for i := 0; i < 5; i++ {
				s.service(fmt.Sprintf("svc-%d", i), map[string]string{"app": fmt.Sprintf("svc-%d", i)}, 1000)
			}
			c := New(Config{}, SinkFunc(func(*phases.Trace) {}), nil, nil)
			pods, services := s.deltas[:len(s.deltas)-5], s.deltas[len(s.deltas)-5:]
			for _, d := range pods {
				c.Handle(d)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				c.Handle(services[i%5])
				c.Tick(s.at(2000 + 200*(i%5)))
			}
			if c.InFlight() != n {
				b.Fatalf("%d Pods in flight, want %d", c.InFlight(), n)
			}
		})
	}
}

// The live loop wakes when a trace's settle time ends, not on a tick: with a tick of an hour,
// a Pod made Ready now is exported once its 300 ms have passed, and not before.
func TestLoopWakesWhenDue(t *testing.T) {
	s := newSim(t, "default")
	s.t0 = time.Now()
	s.pod("a", nil, nil, web, 0)
	ready := happy(s, "a", 20, false, false) - 10 // no Service: complete at Ready
	sort.SliceStable(s.deltas, func(i, j int) bool { return s.deltas[i].Recv.Before(s.deltas[j].Recv) })
	const settle = 300 * time.Millisecond
	exported := make(chan time.Time, 1)
	c := New(Config{Settle: settle}, SinkFunc(func(*phases.Trace) { exported <- time.Now() }), nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	deltas := make(chan watch.Delta)
	go Loop(ctx, deltas, c, time.Hour, nil)
	for _, d := range s.deltas {
		time.Sleep(time.Until(d.Recv)) // each delta as it would arrive
		deltas <- d
	}
	due := s.recv(ready).Add(settle)
	select {
	case at := <-exported:
		if at.Before(due) {
			t.Errorf("exported %v before its settle time ended", due.Sub(at))
		}
		t.Logf("exported %v after its settle time ended", at.Sub(due))
	case <-time.After(time.Until(due) + 10*time.Second):
		t.Fatal("not exported: the loop waits for a tick an hour away")
	}
}
