package tracker

import (
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/readyspan/readyspan/tracecontext"
)

// SlimWorkload keeps of a workload's annotations and template only what the tracker reads, for
// an informer's Transform: the template's signature (views.go) in readyspan's own annotations,
// computed once per generation, the Deployment's revision and the trace context
// (tracing.k8s.io/traceparent, at most tracecontext.MaxLen+1 bytes of it).
func SlimWorkload(m metav1.Object, tmpl *corev1.PodTemplateSpec, om *metav1.ObjectMeta) {
	hash, restartedAt := signatures.of(m, tmpl, om)
	keep := map[string]string{annTemplateHash: hash}
	if restartedAt != "" {
		keep[annTemplateRestart] = restartedAt
	}
	if r, ok := m.GetAnnotations()[annDeploymentRevision]; ok {
		keep[annDeploymentRevision] = r
	}
	if tp, ok := m.GetAnnotations()[tracecontext.Annotation]; ok {
		keep[tracecontext.Annotation] = tracecontext.Bound(tp) // a hostile value kept bounded, to be counted
	}
	m.SetAnnotations(keep)
	*tmpl = corev1.PodTemplateSpec{}
}

// signatures are the template signatures Transform computed last, by workload: a workload's
// status changes with every replica that becomes available, its template only with its
// generation, and hashing the template of each such update was a fortieth of readyspan's CPU.
var signatures = signatureMemo{byUID: map[types.UID]signature{}}

// maxSignatures bounds the memo: past it, it starts again empty.
const maxSignatures = 4096

type signature struct {
	generation        int64
	hash, restartedAt string
}

type signatureMemo struct {
	mu    sync.Mutex
	byUID map[types.UID]signature
}

// of is templateSignature, from the memo when the workload's generation is the one it was
// computed for. An object without a UID or a generation (a test's) is always hashed.
func (s *signatureMemo) of(m metav1.Object, tmpl *corev1.PodTemplateSpec, om *metav1.ObjectMeta) (string, string) {
	uid, gen := m.GetUID(), m.GetGeneration()
	if uid == "" || gen == 0 {
		return templateSignature(om, tmpl)
	}
	s.mu.Lock()
	sig, ok := s.byUID[uid]
	s.mu.Unlock()
	if ok && sig.generation == gen {
		return sig.hash, sig.restartedAt
	}
	hash, restartedAt := templateSignature(om, tmpl)
	s.mu.Lock()
	if len(s.byUID) >= maxSignatures {
		clear(s.byUID)
	}
	s.byUID[uid] = signature{generation: gen, hash: hash, restartedAt: restartedAt}
	s.mu.Unlock()
	return hash, restartedAt
}

// KeepsAnnotation reports whether SlimWorkload keeps an annotation of that key.
func KeepsAnnotation(key string) bool {
	return key == annTemplateHash || key == annTemplateRestart || key == annDeploymentRevision || key == tracecontext.Annotation
}

// SlimReplicaSet keeps of a ReplicaSet's annotations only its Deployment's revision, and drops
// its template: a Deployment's rollout is read from the Deployment and its Pods.
func SlimReplicaSet(rs *appsv1.ReplicaSet) {
	rev, ok := rs.Annotations[annDeploymentRevision]
	rs.Annotations = nil
	if ok {
		rs.Annotations = map[string]string{annDeploymentRevision: rev}
	}
	rs.Spec.Template = corev1.PodTemplateSpec{}
}
