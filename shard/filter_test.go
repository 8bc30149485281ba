package shard_test

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/readyspan/readyspan/shard"
)

// TestWorkloadKinds: a kind NewFilter is given as a workload goes by its own key, and so do the
// Events about it; without it, its Events pass on every shard, as Events about any kind the
// filter does not know do.
func TestWorkloadKinds(t *testing.T) {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "backup"}}
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "backup.1"},
		InvolvedObject: corev1.ObjectReference{Kind: "Job", Namespace: "ns", Name: "backup"}}
	key := shard.WorkloadKey("ns", "Job", "backup")
	for i := 0; i < 2; i++ {
		s := shard.Shard{Index: i, Total: 2}
		mine := s.Owns(key)
		withJobs := shard.NewFilter(s, shard.Deployments, shard.Workload{Kind: "StatefulSet"}, shard.Workload{Kind: "DaemonSet"}, shard.Workload{Kind: "Job"})
		if got := withJobs.AdmitWorkload(job, "Job", false); got != mine {
			t.Errorf("shard %s: the Job admitted %v, want %v", s, got, mine)
		}
		if !withJobs.AdmitWorkload(job, "Job", true) {
			t.Errorf("shard %s: a Job handed on before is no longer admitted", s)
		}
		if _, got := withJobs.Admit(ev, false); got != mine {
			t.Errorf("shard %s: the Event about the Job admitted %v, want %v", s, got, mine)
		}
		if _, got := shard.NewFilter(s).Admit(ev, false); !got {
			t.Errorf("shard %s: without Jobs as workloads, an Event about one is dropped", s)
		}
	}
	var none *shard.Filter // unsharded
	if !none.AdmitWorkload(job, "Job", false) {
		t.Error("an unsharded filter drops a workload")
	}
}
