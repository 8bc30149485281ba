// Package shard splits what readyspan traces between replicas that watch the same cluster, the
// way kube-state-metrics shards (--shard, --total-shards), so that one cluster's Pods need not
// fit in one process.
//
// The unit of the split is the workload, not the Pod: a rollout's trace is built from the Pods
// of its workload, their ReplicaSets or revisions and the workload's own Events, so all of these
// must be on one shard. Every object is given a key naming its workload
// ("namespace/Deployment/web") from the object alone, with no lookup that could arrive out of
// order: a Deployment's ReplicaSets are named after it and its Pods carry the ReplicaSet's
// pod-template-hash. A bare Pod is its own workload. The key's FNV-1a hash modulo the number of
// shards picks the shard. One workload is never split: a Deployment of 10,000 replicas is on one
// shard.
package shard

import (
	"fmt"
	"hash/fnv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Shard is one replica's part: Index of Total. The zero value (Total 0) and Total 1 own
// everything.
type Shard struct {
	Index, Total int
}

// New checks a shard given on the command line.
func New(index, total int) (Shard, error) {
	switch {
	case total < 1:
		return Shard{}, fmt.Errorf("--total-shards must be at least 1, got %d", total)
	case index < 0 || index >= total:
		return Shard{}, fmt.Errorf("--shard must be in [0, %d) for --total-shards=%d, got %d", total, total, index)
	}
	return Shard{Index: index, Total: total}, nil
}

// Sharded tells whether the cluster is split at all.
func (s Shard) Sharded() bool { return s.Total > 1 }

// String is "index/total", as logs and the readyspan.shard resource attribute say it.
func (s Shard) String() string {
	if !s.Sharded() {
		return "0/1"
	}
	return fmt.Sprintf("%d/%d", s.Index, s.Total)
}

// Owns tells whether the workload key is this shard's.
func (s Shard) Owns(key string) bool {
	if !s.Sharded() {
		return true
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	return h.Sum64()%uint64(s.Total) == uint64(s.Index)
}

// Kinds of object the keys name by themselves.
const (
	kindReplicaSet = "ReplicaSet"
	kindPod        = "Pod"
)

// Workload is a kind of workload as the keys know it: its Kind and, for a kind whose controller
// makes ReplicaSets named after it with a template hash (a Deployment's "web-7d4b9"), the label
// that holds the hash on those ReplicaSets and their Pods.
type Workload struct {
	Kind              string
	TemplateHashLabel string
}

// Deployments are the built-in workload that makes ReplicaSets.
var Deployments = Workload{Kind: "Deployment", TemplateHashLabel: appsv1.DefaultDeploymentUniqueLabelKey}

// WorkloadKey names a workload: its namespace, kind and name.
func WorkloadKey(namespace, kind, name string) string {
	return namespace + "/" + kind + "/" + name
}

// PodKey is the key of a Pod's workload: its controller's, through the ReplicaSet to the
// workload that made it when the ReplicaSet is one of the workloads' (named
// workload-<hash>, the hash in the Pod's label of that kind); a Pod without a controller is
// its own workload.
func PodKey(p *corev1.Pod, workloads ...Workload) string {
	owner := metav1.GetControllerOfNoCopy(p)
	if owner == nil {
		return WorkloadKey(p.Namespace, kindPod, p.Name)
	}
	if owner.Kind == kindReplicaSet {
		for _, w := range workloads {
			if w.TemplateHashLabel == "" {
				continue
			}
			if hash := p.Labels[w.TemplateHashLabel]; hash != "" {
				if name, ok := strings.CutSuffix(owner.Name, "-"+hash); ok && name != "" {
					return WorkloadKey(p.Namespace, w.Kind, name)
				}
			}
		}
	}
	return WorkloadKey(p.Namespace, owner.Kind, owner.Name)
}

// ReplicaSetKey is the key of a ReplicaSet's workload: that of the workload that made it (one
// of workloads with a template hash label), else its own.
func ReplicaSetKey(rs *appsv1.ReplicaSet, workloads ...Workload) string {
	if owner := metav1.GetControllerOfNoCopy(rs); owner != nil {
		for _, w := range workloads {
			if w.TemplateHashLabel != "" && owner.Kind == w.Kind {
				return WorkloadKey(rs.Namespace, w.Kind, owner.Name)
			}
		}
	}
	return WorkloadKey(rs.Namespace, kindReplicaSet, rs.Name)
}

// OwnedKey is the key of an object that belongs to its controller (a ControllerRevision to its
// StatefulSet or DaemonSet), or is itself the workload.
func OwnedKey(kind string, m metav1.Object) string {
	if owner := metav1.GetControllerOfNoCopy(m); owner != nil {
		return WorkloadKey(m.GetNamespace(), owner.Kind, owner.Name)
	}
	return WorkloadKey(m.GetNamespace(), kind, m.GetName())
}
