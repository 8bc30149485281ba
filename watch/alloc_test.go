package watch_test

import (
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/watch"
)

// TestLastSeenWrittenInPlace checks that a change of an object the Watcher knows writes its
// identity over the one kept, without allocating another whole object, and still tells a
// relist's unchanged object from a change.
func TestLastSeenWrittenInPlace(t *testing.T) {
	w := watch.NewWatcher(fake.NewClientset(), tracer.Kinds, watch.Config{}, nil, nil)
	k, _ := tracer.Kinds.OfObject(&corev1.Pod{})
	known := cache.NewStore(cache.DeletionHandlingMetaNamespaceKeyFunc)
	pod := func(rv int, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "uid-p", ResourceVersion: strconv.Itoa(rv),
			OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "rs", UID: "uid-rs"}}},
			Spec: corev1.PodSpec{NodeName: node}}
	}
	process := func(typ cache.DeltaType, p *corev1.Pod) {
		t.Helper()
		if err := w.Process(k, known, cache.Deltas{{Type: typ, Object: p}}); err != nil {
			t.Fatal(err)
		}
	}
	drain := func() (n int) {
		for {
			select {
			case <-w.Deltas():
				n++
			default:
				return n
			}
		}
	}
	process(cache.Added, pod(1, ""))
	first, _, _ := known.GetByKey("ns/p")
	process(cache.Updated, pod(2, "node-a"))
	process(cache.Replaced, pod(2, "node-a")) // a relist's unchanged object
	if n := drain(); n != 2 {
		t.Fatalf("handed on %d deltas, want 2 (added, modified; not the relist's unchanged object)", n)
	}
	kept, _, _ := known.GetByKey("ns/p")
	if kept != first {
		t.Errorf("a change replaced the identity kept instead of writing over it")
	}
	if p := kept.(*corev1.Pod); p.ResourceVersion != "2" || p.Spec.NodeName != "node-a" || p.UID != "uid-p" || len(p.OwnerReferences) != 1 {
		t.Errorf("identity after the change: %+v", p)
	}

	changes := make([]*corev1.Pod, 200)
	for i := range changes {
		changes[i] = pod(3+i, "node-a")
	}
	i := 0
	allocs := testing.AllocsPerRun(len(changes)-1, func() {
		process(cache.Updated, changes[i])
		i++
		drain()
	})
	// What is left is the key the store computes (namespace/name); a new identity would add a
	// whole Pod.
	if allocs > 1 {
		t.Errorf("a change of a known Pod allocates %.0f times, want at most 1", allocs)
	}
}

// TestTransformSlimsManagedFieldsInPlace: Transform keeps of each managedFields entry what is
// read (manager, operation, time, subresource) in the decoded object's own slice, allocating
// nothing for it.
func TestTransformSlimsManagedFieldsInPlace(t *testing.T) {
	now := metav1.Now()
	entries := []metav1.ManagedFieldsEntry{
		{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &now,
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{}}`)},
		{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &now, Subresource: "status",
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:status":{}}`)},
	}
	pods := make([]*corev1.Pod, 101)
	for i := range pods {
		pods[i] = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", ManagedFields: append([]metav1.ManagedFieldsEntry(nil), entries...)}}
	}
	i := 0
	allocs := testing.AllocsPerRun(len(pods)-1, func() {
		if _, err := tracer.Kinds.Transform(pods[i]); err != nil {
			t.Fatal(err)
		}
		i++
	})
	if allocs != 0 {
		t.Errorf("Transform of a Pod allocates %.0f times, want 0", allocs)
	}
	got := pods[0].ManagedFields
	if len(got) != 2 || got[1] != (metav1.ManagedFieldsEntry{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, Time: &now, Subresource: "status"}) {
		t.Errorf("managedFields kept: %+v", got)
	}
}
