package watch_test

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/readyspan/readyspan/shard"
	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/watch"
)

// TestJobsSharded: a Job, its Pods and the Events about it go to one shard, the one its key
// names, when two replicas split the cluster.
func TestJobsSharded(t *testing.T) {
	var owner shard.Shard
	for i := 0; i < 2; i++ {
		if (shard.Shard{Index: i, Total: 2}).Owns(shard.WorkloadKey("default", "Job", "backup-17")) {
			owner = shard.Shard{Index: i, Total: 2}
		}
	}
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "backup-17", UID: "uid-job"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "backup-17-aaaaa", UID: "uid-pod",
		OwnerReferences: []metav1.OwnerReference{{Kind: "Job", Name: "backup-17", UID: "uid-job", Controller: ptr.To(true)}}}}
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "backup-17.1", UID: "uid-ev"},
		InvolvedObject: corev1.ObjectReference{Kind: "Job", Namespace: "default", Name: "backup-17", UID: "uid-job"}}
	for i := 0; i < 2; i++ {
		part := shard.Shard{Index: i, Total: 2}
		w := watch.NewWatcher(fake.NewClientset(), tracer.Kinds, watch.Config{Shard: part}, nil, nil)
		mine := part == owner
		if ok := w.Admit(tracer.Kinds.OfResource(tracer.ResourceJobs), j); ok != mine {
			t.Errorf("shard %s: the Job admitted %v, want %v", part, ok, mine)
		}
		if ok := w.Admit(tracer.Kinds.OfResource(tracer.ResourcePods), pod); ok != mine {
			t.Errorf("shard %s: the Job's Pod admitted %v, want %v", part, ok, mine)
		}
		if ok := w.Admit(tracer.Kinds.OfResource(tracer.ResourceEvents), ev); ok != mine {
			t.Errorf("shard %s: the Event about the Job admitted %v, want %v", part, ok, mine)
		}
	}
}
