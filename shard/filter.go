package shard

import (
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// Filter decides, object by object, what one shard's watch hands on: workloads (the kinds
// NewFilter is given), their ReplicaSets, revisions and Pods by their workload's key; Events by
// what they are about (a Pod's by the Pod, a workload's or ReplicaSet's by the workload);
// EndpointSlices without the endpoints of other shards' Pods. Services and other Events pass:
// they are shared and few.
//
// An Event can name a Pod by UID only, so the Filter remembers the Pods it saw to be another
// shard's (a UID each) until they are deleted; an Event about a Pod not seen yet passes, and
// the correlator holds it for a while as it holds any early Event.
// Its methods are called from every resource's watch at once.
type Filter struct {
	shard Shard
	// workloads are the kinds whose objects are their Pods' workload: each goes by its own
	// key, and so do the Events about it.
	workloads map[string]bool
	// makers are the workloads that make ReplicaSets, for the keys of those and their Pods.
	makers []Workload

	mu          sync.Mutex
	foreignPods map[types.UID]struct{} // Pods seen as another shard's, until deleted
	replicaSets map[string]string      // "namespace/name" → workload key, for their Events
}

// NewFilter returns the filter for one shard; nil for an unsharded readyspan. workloads are the
// kinds that are workloads of their own (the watch's registry of kinds says which: Deployment,
// StatefulSet, DaemonSet, Job…); their objects are admitted by AdmitWorkload.
func NewFilter(s Shard, workloads ...Workload) *Filter {
	if !s.Sharded() {
		return nil
	}
	f := &Filter{shard: s, workloads: map[string]bool{}, foreignPods: map[types.UID]struct{}{}, replicaSets: map[string]string{}}
	for _, w := range workloads {
		f.workloads[w.Kind] = true
		if w.TemplateHashLabel != "" {
			f.makers = append(f.makers, w)
		}
	}
	return f
}

// AdmitWorkload tells whether to hand on a workload of the given kind that was added or
// changed: by its own key, or because it was handed on before (known).
func (f *Filter) AdmitWorkload(m metav1.Object, kind string, known bool) bool {
	return f == nil || known || f.shard.Owns(WorkloadKey(m.GetNamespace(), kind, m.GetName()))
}

// Admit returns what to hand on of an object that was added or changed, and false for none.
// known marks an object handed on before: it stays this shard's even if its key changes (a
// Pod orphaned mid-startup), so that its trace ends where it began. Workloads go through
// AdmitWorkload: their kind is the registry's to say, not the object's type.
func (f *Filter) Admit(obj runtime.Object, known bool) (runtime.Object, bool) {
	if f == nil {
		return obj, true
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		mine := known || f.shard.Owns(PodKey(o, f.makers...))
		f.mu.Lock()
		if mine {
			delete(f.foreignPods, o.UID)
		} else {
			f.foreignPods[o.UID] = struct{}{}
		}
		f.mu.Unlock()
		return obj, mine
	case *appsv1.ReplicaSet:
		key := ReplicaSetKey(o, f.makers...)
		f.mu.Lock()
		f.replicaSets[o.Namespace+"/"+o.Name] = key
		f.mu.Unlock()
		return obj, known || f.shard.Owns(key)
	case *appsv1.ControllerRevision:
		return obj, known || f.shard.Owns(OwnedKey("ControllerRevision", o))
	case *corev1.Event:
		return obj, known || f.admitEvent(o)
	case *discoveryv1.EndpointSlice:
		return f.withoutForeign(o), true
	}
	return obj, true
}

// admitEvent tells whether an Event is about this shard's objects.
func (f *Filter) admitEvent(e *corev1.Event) bool {
	about := e.InvolvedObject
	switch about.Kind {
	case kindPod:
		f.mu.Lock()
		_, foreign := f.foreignPods[about.UID]
		f.mu.Unlock()
		return !foreign
	case kindReplicaSet:
		f.mu.Lock()
		key, seen := f.replicaSets[e.Namespace+"/"+about.Name]
		f.mu.Unlock()
		return !seen || f.shard.Owns(key)
	}
	if f.workloads[about.Kind] {
		return f.shard.Owns(WorkloadKey(e.Namespace, about.Kind, about.Name))
	}
	return true
}

// withoutForeign returns the slice without the endpoints of Pods known as another shard's:
// the correlator would keep their readiness for Pods it never traces.
func (f *Filter) withoutForeign(s *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	f.mu.Lock()
	defer f.mu.Unlock()
	foreign := func(ep *discoveryv1.Endpoint) bool {
		if ep.TargetRef == nil || ep.TargetRef.Kind != kindPod {
			return false
		}
		_, ok := f.foreignPods[ep.TargetRef.UID]
		return ok
	}
	n := 0
	for i := range s.Endpoints {
		if foreign(&s.Endpoints[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	out := *s
	out.Endpoints = make([]discoveryv1.Endpoint, 0, len(s.Endpoints)-n)
	for i := range s.Endpoints {
		if !foreign(&s.Endpoints[i]) {
			out.Endpoints = append(out.Endpoints, s.Endpoints[i])
		}
	}
	return &out
}

// Deleted is told of every deletion, and tells whether to hand it on: only what was handed on
// before (known) is.
func (f *Filter) Deleted(obj runtime.Object, known bool) bool {
	if f == nil {
		return true
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		f.mu.Lock()
		delete(f.foreignPods, o.UID)
		f.mu.Unlock()
	case *appsv1.ReplicaSet:
		f.mu.Lock()
		delete(f.replicaSets, o.Namespace+"/"+o.Name)
		f.mu.Unlock()
	}
	return known
}
