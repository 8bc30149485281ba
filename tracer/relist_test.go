package tracer

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/watch"
)

// TestRelistFindsDeletion deletes a Pod while the watch is down: the first watch ends with 410
// Gone and the Pod is gone from the relist. The watch.Watcher keeps no copy of the Pod, only its
// identity, yet the deletion must still name it, its node and its owner, and the correlator must
// finish its trace from the last state it saw (image and all), not from the identity.
func TestRelistFindsDeletion(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	owner := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-6d4b8c", UID: "uid-rs", Controller: ptr.To(true)}
	gone := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-6d4b8c-x7k2p", UID: "uid-gone", ResourceVersion: "10",
			CreationTimestamp: metav1.NewTime(time.Now().Add(-time.Second)), OwnerReferences: []metav1.OwnerReference{owner}},
		Spec:   corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "app", Image: "registry.local/web:2"}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	stays := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "stays", UID: "uid-stays", ResourceVersion: "11"}}
	client := fake.NewClientset(gone, stays)
	var mu sync.Mutex
	watches := 0
	client.PrependWatchReactor("pods", func(k8stesting.Action) (bool, apiwatch.Interface, error) {
		mu.Lock()
		watches++
		n := watches
		mu.Unlock()
		if n > 1 {
			return false, nil, nil // the fake's own watch from then on
		}
		fw := apiwatch.NewFake()
		go func() {
			// The Pod goes while this watch is not delivering, and the watch then expires.
			if err := client.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), "default", gone.Name); err != nil {
				t.Error(err)
			}
			fw.Error(&apierrors.NewResourceExpired("too old resource version").ErrStatus)
		}()
		return true, fw, nil
	})

	var traces []*phases.Trace
	corr := New(Config{}, SinkFunc(func(tr *phases.Trace) { traces = append(traces, tr) }), nil, nil)
	w := watch.NewWatcher(client, Kinds, watch.Config{}, nil, nil)
	w.Start(ctx)
	var deletion *watch.Delta
	for deletion == nil {
		select {
		case d := <-w.Deltas():
			corr.Handle(d)
			if d.Type == watch.Deleted {
				if p, ok := d.Object.(*corev1.Pod); ok && p.UID == gone.UID {
					deletion = &d
				}
			}
			if p, ok := d.Object.(*corev1.Pod); ok && p.UID == stays.UID && !d.Initial {
				t.Errorf("the relist's unchanged Pod came again as %s", d.Type)
			}
		case <-ctx.Done():
			t.Fatal("the relist did not report the deleted Pod")
		}
	}
	if !deletion.FinalStateUnknown {
		t.Error("a deletion found by a relist is not marked FinalStateUnknown")
	}
	p := deletion.Object.(*corev1.Pod)
	if p.Name != gone.Name || p.Namespace != "default" || p.Spec.NodeName != "node-1" ||
		len(p.OwnerReferences) != 1 || p.OwnerReferences[0].UID != "uid-rs" {
		t.Errorf("the deletion does not name the Pod, its node and its owner: %+v", p.ObjectMeta)
	}
	if len(p.Spec.Containers) != 0 {
		t.Errorf("the watch.Watcher kept the Pod's spec (%d containers): a second cache", len(p.Spec.Containers))
	}
	if len(traces) != 1 {
		t.Fatalf("%d traces, want the deleted Pod's", len(traces))
	}
	tr := traces[0]
	wantOutcome(t, tr, phases.OutcomeDeleted)
	if len(tr.Pod.Containers) != 1 || tr.Pod.Containers[0].Image != "registry.local/web:2" || tr.Pod.Node != "node-1" {
		t.Errorf("the trace was built from the identity, not the last state: node %q, containers %+v", tr.Pod.Node, tr.Pod.Containers)
	}
}
