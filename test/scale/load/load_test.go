package load

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/readyspan/readyspan/test/scale/report"
)

func deployment(name string, generation, observed int64, replicas, updated, ready, total int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: generation},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(replicas)},
		Status:     appsv1.DeploymentStatus{ObservedGeneration: observed, UpdatedReplicas: updated, ReadyReplicas: ready, Replicas: total},
	}
}

func TestRolledOut(t *testing.T) {
	tests := []struct {
		name string
		dep  *appsv1.Deployment
		want bool
	}{
		{name: "complete", dep: deployment("a", 2, 2, 10, 10, 10, 10), want: true},
		{name: "change not observed yet", dep: deployment("a", 3, 2, 10, 10, 10, 10)},
		{name: "new Pods not Ready", dep: deployment("a", 2, 2, 10, 10, 7, 10)},
		{name: "old Pods still there", dep: deployment("a", 2, 2, 10, 10, 10, 20)},
		{name: "not all updated", dep: deployment("a", 2, 2, 10, 6, 10, 10)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rolledOut(tt.dep); got != tt.want {
				t.Errorf("rolledOut = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestNextToRoll(t *testing.T) {
	d := New(nil, Config{Namespaces: []string{"ns"}, Replicas: 10, Rolls: 2})
	d.deployments[d.name(0)] = deployment(d.name(0), 1, 1, 10, 10, 10, 10)
	d.deployments[d.name(1)] = deployment(d.name(1), 2, 2, 10, 10, 4, 14) // rolling out
	d.deployments[d.name(2)] = deployment(d.name(2), 1, 1, 10, 10, 10, 10)
	if got := d.nextToRoll(3, []int{1, 0, 1}); got != 0 {
		t.Errorf("next = %d, want 0 (1 is rolling out; 0 and 2 are tied, the first wins)", got)
	}
	if got := d.nextToRoll(3, []int{2, 0, 1}); got != 2 {
		t.Errorf("next = %d, want 2 (0 has had its rolls)", got)
	}
	if got := d.nextToRoll(3, []int{2, 0, 2}); got != -1 {
		t.Errorf("next = %d, want -1 (only 1 is left and it is rolling out)", got)
	}
	if got := d.nextToRoll(4, []int{1, 1, 1, 0}); got != 0 {
		t.Errorf("next = %d, want 0 (3 was never seen on the watch)", got)
	}
}

// The last Pods turn Ready before their addresses do: the driver waits for the EndpointSlice
// that serves them, so their lag is measured from serving like every other Pod's, and gives up
// after its bound when an address never turns ready.
func TestAwaitServing(t *testing.T) {
	readyPod := func(uid string) *report.PodTimes {
		return &report.PodTimes{UID: uid, Ready: time.Now()}
	}
	t.Run("address turns ready", func(t *testing.T) {
		d := &Driver{pods: map[types.UID]*report.PodTimes{"a": readyPod("a")}, serving: map[types.UID]time.Time{}}
		go func() {
			time.Sleep(150 * time.Millisecond)
			d.slice(&discoveryv1.EndpointSlice{Endpoints: []discoveryv1.Endpoint{
				{TargetRef: &corev1.ObjectReference{Kind: "Pod", UID: "a"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}}})
		}()
		d.awaitServing(context.Background(), time.Minute)
		res, _ := d.result(Result{}, nil)
		if len(res.Pods) != 1 || res.Pods[0].Serving.IsZero() {
			t.Fatalf("pods %+v: want the one Pod with its serving time", res.Pods)
		}
	})
	t.Run("address never ready", func(t *testing.T) {
		d := &Driver{pods: map[types.UID]*report.PodTimes{"a": readyPod("a")}, serving: map[types.UID]time.Time{}}
		done := make(chan struct{})
		go func() { d.awaitServing(context.Background(), 200*time.Millisecond); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatal("awaitServing did not give up after its bound")
		}
	})
}
