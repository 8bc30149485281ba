package shard_test

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/readyspan/readyspan/internal/captures"
	"github.com/readyspan/readyspan/shard"
	"github.com/readyspan/readyspan/tracer"
)

// TestKeysOfRealObjects reads every Pod, ReplicaSet and Deployment of the real captures, as the
// API returned them: each Pod of a Deployment must have its Deployment's key, whatever the
// ReplicaSet (a rollout's Pods, old and new, are on one shard), and each ReplicaSet too.
func TestKeysOfRealObjects(t *testing.T) {
	for _, run := range []string{"run2-ifnotpresent", "run3-always-pull", "run4-failures", "run8-slow-pull-watch", "run10-containerd2-failures"} {
		t.Run(run, func(t *testing.T) {
			deltas, err := tracer.Kinds.LoadRecording(captures.Path(run))
			if err != nil {
				t.Fatal(err)
			}
			deployments := map[string]bool{} // keys of the Deployments seen
			var pods, sets int
			for _, d := range deltas {
				switch o := d.Object.(type) {
				case *appsv1.Deployment:
					deployments[shard.WorkloadKey(o.Namespace, "Deployment", o.Name)] = true
				}
			}
			if len(deployments) == 0 {
				t.Fatal("no Deployment in the capture")
			}
			for _, d := range deltas {
				switch o := d.Object.(type) {
				case *corev1.Pod:
					owner := metav1.GetControllerOf(o)
					if owner == nil || owner.Kind != "ReplicaSet" {
						continue
					}
					pods++
					if key := shard.PodKey(o, shard.Deployments); !deployments[key] {
						t.Errorf("Pod %s (of ReplicaSet %s) has key %q, not its Deployment's (%v)", o.Name, owner.Name, key, deployments)
					}
				case *appsv1.ReplicaSet:
					sets++
					if key := shard.ReplicaSetKey(o, shard.Deployments); !deployments[key] {
						t.Errorf("ReplicaSet %s has key %q, not its Deployment's (%v)", o.Name, key, deployments)
					}
				}
			}
			if pods == 0 || sets == 0 {
				t.Fatalf("%d Pods and %d ReplicaSets of a Deployment in the capture", pods, sets)
			}
		})
	}
}

// TestKeys covers the owners the captures do not have.
func TestKeys(t *testing.T) {
	ctl := func(kind, name string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: types.UID("uid-" + name), Controller: ptr(true)}}
	}
	for _, tc := range []struct {
		name string
		got  string
		want string
	}{
		{"Argo Rollout's Pod (labels as the controller sets them)", shard.PodKey(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-7b9c9b7bb6-jwdw2",
			Labels: map[string]string{"app": "web", "rollouts-pod-template-hash": "7b9c9b7bb6"}, OwnerReferences: ctl("ReplicaSet", "web-7b9c9b7bb6")}},
			shard.Deployments, shard.Workload{Kind: "Rollout", TemplateHashLabel: "rollouts-pod-template-hash"}), "ns/Rollout/web"},
		{"Argo Rollout's ReplicaSet", shard.ReplicaSetKey(&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-7b9c9b7bb6", OwnerReferences: ctl("Rollout", "web")}},
			shard.Deployments, shard.Workload{Kind: "Rollout", TemplateHashLabel: "rollouts-pod-template-hash"}), "ns/Rollout/web"},
		{"bare Pod", shard.PodKey(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "solo"}}), "ns/Pod/solo"},
		{"StatefulSet Pod", shard.PodKey(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db-0", OwnerReferences: ctl("StatefulSet", "db")}}), "ns/StatefulSet/db"},
		{"DaemonSet Pod", shard.PodKey(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "agent-x7k2p", OwnerReferences: ctl("DaemonSet", "agent")}}), "ns/DaemonSet/agent"},
		{"bare ReplicaSet's Pod (no pod-template-hash)", shard.PodKey(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "rs-abcde", OwnerReferences: ctl("ReplicaSet", "rs")}}), "ns/ReplicaSet/rs"},
		{"pod-template-hash not the ReplicaSet's suffix", shard.PodKey(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "rs-abcde", Labels: map[string]string{"pod-template-hash": "zzz"}, OwnerReferences: ctl("ReplicaSet", "rs")}}), "ns/ReplicaSet/rs"},
		{"bare ReplicaSet", shard.ReplicaSetKey(&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "rs"}}), "ns/ReplicaSet/rs"},
		{"StatefulSet revision", shard.OwnedKey("ControllerRevision", &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db-7c9f", OwnerReferences: ctl("StatefulSet", "db")}}), "ns/StatefulSet/db"},
		{"Job Pod", shard.PodKey(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "j-x", OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "j", Controller: ptr(true)}}}}), "ns/Job/j"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: key %q, want %q", tc.name, tc.got, tc.want)
		}
	}
}

// TestOwnsPartitions checks that every key is owned by exactly one shard of any split, and
// that the split is roughly even.
func TestOwnsPartitions(t *testing.T) {
	for total := 1; total <= 5; total++ {
		count := make([]int, total)
		const keys = 5000
		for i := 0; i < keys; i++ {
			key := shard.WorkloadKey(fmt.Sprintf("ns-%d", i%7), "Deployment", fmt.Sprintf("web-%d", i))
			owners := 0
			for index := 0; index < total; index++ {
				s, err := shard.New(index, total)
				if err != nil {
					t.Fatal(err)
				}
				if s.Owns(key) {
					owners++
					count[index]++
				}
			}
			if owners != 1 {
				t.Fatalf("%d shards: %q owned by %d", total, key, owners)
			}
		}
		for index, n := range count {
			if want := keys / total; n < want*8/10 || n > want*12/10 {
				t.Errorf("%d shards: shard %d owns %d of %d keys, want about %d", total, index, n, keys, want)
			}
		}
	}
}

func TestNewRejects(t *testing.T) {
	for _, tc := range []struct{ index, total int }{{0, 0}, {-1, 2}, {2, 2}, {5, 3}} {
		if _, err := shard.New(tc.index, tc.total); err == nil {
			t.Errorf("shard %d of %d accepted", tc.index, tc.total)
		}
	}
	if s := (shard.Shard{}); s.Sharded() || !s.Owns("anything") {
		t.Error("the zero Shard must own everything")
	}
}

func ptr[T any](v T) *T { return &v }
