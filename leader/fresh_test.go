package leader

import (
	"context"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/watch"
)

// kubePod is a Pod as the apiserver lists it, Ready at ready (whole seconds, as conditions are)
// or not yet Ready if ready is zero.
func kubePod(uid string, created, ready time.Time) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "default", UID: types.UID(uid), CreationTimestamp: metav1.NewTime(created.Truncate(time.Second))},
		Spec:       corev1.PodSpec{NodeName: "node-1"},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(created.Add(time.Second).Truncate(time.Second))},
		}},
	}
	if !ready.IsZero() {
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = append(p.Status.Conditions,
			corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(ready.Truncate(time.Second))},
			corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(ready.Truncate(time.Second))})
	}
	return p
}

// A fresh replica, started after the old leader (the replacement of a deleted one), that wins
// the Lease: its correlator, resuming RecentWindow before it started, traces the Pods it finds
// Ready since then into the standby buffer, and the takeover exports those the previous leader
// did not, by its handover record, or by the time rule if there was no previous leader.
func TestFreshReplicaWinsLease(t *testing.T) {
	started := t0.Add(-30 * time.Second) // the fresh replica; the old leader stops at t0
	type kpod struct {
		uid         string
		ready       time.Time
		listed      bool // Ready when the fresh replica listed the Pods; else it watched it turn Ready
		oldExported bool
	}
	pods := []kpod{
		{"r-3m", started.Add(-3 * time.Minute), true, false}, // before the window: not this replica's
		// Exported 130s before the old leader stopped: no longer in its record, yet within the
		// window of the fresh replica: a duplicate, the width of the time between the fresh
		// replica's start and the old leader's stop.
		{"r-100s", started.Add(-100 * time.Second), true, true},
		{"r-80s", started.Add(-80 * time.Second), true, true},
		{"r-60s", started.Add(-60 * time.Second), true, false}, // no leader exported it (the previous one died)
		{"r-10s", started.Add(-10 * time.Second), true, true},
		{"r+10s", started.Add(10 * time.Second), false, true},
		{"after-release", t0.Add(200 * time.Millisecond), false, false},
	}
	tests := []struct {
		name      string
		firstEver bool // no replica held the Lease before: there is no old leader
		want      []string
	}{
		{"after a release with a handover record", false, []string{"r-100s", "r-60s", "after-release"}},
		// The first leader ever owes nothing from before it started.
		{"first leader ever", true, []string{"r+10s", "after-release"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			client := fake.NewClientset()
			clk := testingclock.NewFakePassiveClock(t0.Add(-10 * time.Minute))
			old := newReplica(client, clk, "old")
			if !tt.firstEver {
				old.hold(t, "old", clk.Now())
				old.gate.TakeOver(ctx, time.Time{}, false)
				for _, p := range pods {
					if p.oldExported {
						clk.SetTime(p.ready.Add(settle))
						old.gate.Offer(watchTrace(p.uid, p.ready))
					}
				}
			}

			clk.SetTime(started)
			fresh := newReplica(client, clk, "fresh")
			corr := tracer.New(tracer.Config{ResumeAfter: fresh.gate.ResumeAfter()}, tracer.SinkFunc(fresh.gate.Offer), nil, nil)
			for _, p := range pods {
				if p.listed {
					corr.Handle(watch.Delta{Resource: tracer.ResourcePods, Type: watch.Added, Object: kubePod(p.uid, p.ready.Add(-time.Minute), p.ready), Recv: started, Initial: true})
				}
			}
			for _, p := range pods {
				if !p.listed {
					clk.SetTime(p.ready.Add(-5 * time.Second))
					corr.Handle(watch.Delta{Resource: tracer.ResourcePods, Type: watch.Added, Object: kubePod(p.uid, clk.Now(), time.Time{}), Recv: clk.Now()})
					clk.SetTime(p.ready)
					corr.Handle(watch.Delta{Resource: tracer.ResourcePods, Type: watch.Modified, Object: kubePod(p.uid, p.ready.Add(-5*time.Second), p.ready), Recv: clk.Now()})
				}
			}
			if got := fresh.rec.drops("not_leader"); got != len(pods)-1 {
				t.Fatalf("the fresh replica buffered %d traces, want all but the one Ready before its window", got)
			}

			if !tt.firstEver {
				clk.SetTime(t0.Add(-100 * time.Millisecond))
				if err := old.gate.Handover(ctx); err != nil {
					t.Fatal(err)
				}
				old.hold(t, "", t0)
			}
			clk.SetTime(t0.Add(time.Second))
			if tt.firstEver {
				fresh.hold(t, "fresh", clk.Now()) // it creates the Lease: no record of another holder
			}
			fresh.wins(t)
			if got := fresh.rec.exported(); !reflect.DeepEqual(got, sorted(tt.want)) {
				t.Errorf("the fresh leader exported %v, want %v", got, sorted(tt.want))
			}
		})
	}
}
