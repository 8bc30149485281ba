package tracer

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/rollout/tracker"
	"github.com/readyspan/readyspan/watch"
)

// A snapshot (explain) has no receive times, and a StatefulSet's or DaemonSet's status states
// no time at which it was done: a rollout whose status says done is complete all the same, and
// one whose status does not is in progress.
func TestSnapshotRolloutDoneByStatus(t *testing.T) {
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: "default", UID: k8stypes.UID("uid-" + name), Generation: 2,
			CreationTimestamp: metav1.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)}
	}
	ss := func(done bool) *appsv1.StatefulSet {
		s := &appsv1.StatefulSet{ObjectMeta: meta("db"), Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(int32(3))}}
		s.Status = appsv1.StatefulSetStatus{ObservedGeneration: 2, Replicas: 3, ReadyReplicas: 3, AvailableReplicas: 3,
			UpdatedReplicas: 3, CurrentRevision: "db-2", UpdateRevision: "db-2"}
		if !done {
			s.Status.CurrentRevision, s.Status.UpdatedReplicas = "db-1", 1
		}
		return s
	}
	ds := func(done bool) *appsv1.DaemonSet {
		d := &appsv1.DaemonSet{ObjectMeta: meta("agent")}
		d.Status = appsv1.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 1, UpdatedNumberScheduled: 1, NumberAvailable: 1}
		if !done {
			d.Status.UpdatedNumberScheduled, d.Status.NumberUnavailable = 0, 1
		}
		return d
	}
	for _, tc := range []struct {
		name  string
		delta watch.Delta
		want  rollout.Outcome
	}{
		{"statefulset done", watch.Delta{Resource: ResourceStatefulSets, Type: watch.Added, Object: ss(true), Initial: true}, rollout.OutcomeComplete},
		{"statefulset rolling", watch.Delta{Resource: ResourceStatefulSets, Type: watch.Added, Object: ss(false), Initial: true}, rollout.OutcomeInProgress},
		{"daemonset done", watch.Delta{Resource: ResourceDaemonSets, Type: watch.Added, Object: ds(true), Initial: true}, rollout.OutcomeComplete},
		{"daemonset rolling", watch.Delta{Resource: ResourceDaemonSets, Type: watch.Added, Object: ds(false), Initial: true}, rollout.OutcomeInProgress},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rs []*rollout.Trace
			c := New(Config{Backfill: true, Rollouts: tracker.SinkFunc(func(r *rollout.Trace) { rs = append(rs, r) })},
				SinkFunc(func(*phases.Trace) {}), nil, nil)
			c.Handle(tc.delta)
			c.Flush(phases.OutcomeInProgress)
			if len(rs) != 1 {
				t.Fatalf("%d rollouts", len(rs))
			}
			if got := rs[0].Rollout.Outcome; got != tc.want {
				t.Errorf("outcome %s, want %s", got, tc.want)
			}
		})
	}
}
