package watch_test

import (
	"context"
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/watch"
)

// Snapshot lists every kind the registry watches, owners before what they own and Pods last,
// as an initial list; a List that fails names its kind.
func TestSnapshot(t *testing.T) {
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: "ns", UID: k8stypes.UID("uid-" + name)}
	}
	c := fake.NewClientset(
		&corev1.Pod{ObjectMeta: meta("web-1")},
		&appsv1.ReplicaSet{ObjectMeta: meta("web-rs")},
		&appsv1.Deployment{ObjectMeta: meta("web")},
		&batchv1.Job{ObjectMeta: meta("migrate")},
		&corev1.Event{ObjectMeta: meta("web-1.18ed77fbbd42ca4f")},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "elsewhere", UID: "uid-other"}},
	)
	deltas, err := tracer.Kinds.Snapshot(context.Background(), c, "ns")
	if err != nil {
		t.Fatal(err)
	}
	var order []watch.Resource
	for _, d := range deltas {
		if !d.Initial || d.Type != watch.Added {
			t.Errorf("%s: not an initial watch.Added delta", d.Resource)
		}
		order = append(order, d.Resource)
	}
	want := []watch.Resource{tracer.ResourceDeployments, tracer.ResourceJobs, tracer.ResourceReplicaSets, tracer.ResourceEvents, tracer.ResourcePods}
	if len(order) != len(want) {
		t.Fatalf("deltas %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("deltas %v, want %v", order, want)
		}
	}
	forbidden := errors.New("services is forbidden")
	c.PrependReactor("list", "services", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, forbidden })
	_, err = tracer.Kinds.Snapshot(context.Background(), c, "ns")
	var le *watch.ListError
	if !errors.As(err, &le) || le.Resource != tracer.ResourceServices || !errors.Is(err, forbidden) {
		t.Errorf("a forbidden list: %v", err)
	}
}
