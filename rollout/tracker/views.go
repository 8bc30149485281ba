package tracker

import (
	"encoding/json"
	"hash/fnv"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/readyspan/readyspan/objects"
	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/tracecontext"
	"github.com/readyspan/readyspan/watch"
)

// Annotations readyspan reads from workloads, and the two it writes into its own cached copies:
// Transform drops Pod templates (they are large and never read), so it first keeps what a
// rollout needs of them there.
const (
	annDeploymentRevision = "deployment.kubernetes.io/revision"
	annRestartedAt        = "kubectl.kubernetes.io/restartedAt"
	annTemplateHash       = "readyspan.dev/template-hash"
	annTemplateRestart    = "readyspan.dev/template-restarted-at"
)

// workloadView is one observation of a Deployment, StatefulSet or DaemonSet, in the terms a
// rollout needs, whatever its kind.
type workloadView struct {
	ref                rollout.Workload
	generation         int64
	observedGeneration int64
	templateHash       string // the Pod template without the restartedAt annotation
	restartedAt        string // the template's kubectl.kubernetes.io/restartedAt
	replicas           int32
	paused             bool
	strategy           rollout.Strategy
	revision           string
	// done is the controller's verdict that the current generation rolled out; failure is a
	// verdict that it cannot (ProgressDeadlineExceeded), with its message.
	done    bool
	doneAt  time.Time // when the status says it completed (1 s), where it says
	failure string
	// replicaFailure is the Deployment's ReplicaFailure condition (its new ReplicaSet's Pod
	// creates refused), when True.
	replicaFailure *deploymentCondition
	created        time.Time
	// changed is the newest managedFields time of a client's write (1 s, apiserver clock).
	changed time.Time
	client  string
	meta    *metav1.ObjectMeta
	// template is the Pod template templateHash and restartedAt are read from (sign): hashed
	// only when the generation is one the rollout tracker has not signed yet.
	template *corev1.PodTemplateSpec
	// traceparent is the workload's tracing.k8s.io/traceparent annotation as written
	// (bounded by SlimWorkload), "" for none.
	traceparent string
}

func baseView(kind string, m *metav1.ObjectMeta, tmpl *corev1.PodTemplateSpec) workloadView {
	v := workloadView{
		ref:        rollout.Workload{Kind: kind, Name: m.Name, Namespace: m.Namespace, UID: string(m.UID)},
		generation: m.Generation, created: m.CreationTimestamp.Time, meta: m, template: tmpl,
		traceparent: tracecontext.Bound(m.Annotations[tracecontext.Annotation]),
	}
	v.client, v.changed = objects.ClientChange(m)
	return v
}

func replicasOf(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

func intOrString(v *intstr.IntOrString) string {
	if v == nil {
		return ""
	}
	return v.String()
}

// sign fills templateHash and restartedAt: from known, the workload's view last seen, when it is
// of the same generation (the template changes only with the generation, and a workload's
// status changes with every replica that becomes available: hashing each of those is most of
// what a Deployment update costs), else from the template.
func (v *workloadView) sign(known *workloadView) {
	if known.generation == v.generation && v.generation != 0 && known.templateHash != "" {
		v.templateHash, v.restartedAt = known.templateHash, known.restartedAt
		return
	}
	v.templateHash, v.restartedAt = templateSignature(v.meta, v.template)
}

// templateSignature is a hash of the Pod template without its restartedAt annotation, and that
// annotation: a change of the first is an update, of the second alone a restart. Objects that
// went through Transform carry both in readyspan's own annotations.
func templateSignature(m *metav1.ObjectMeta, tmpl *corev1.PodTemplateSpec) (string, string) {
	if tmpl == nil || len(tmpl.Spec.Containers) == 0 {
		return m.Annotations[annTemplateHash], m.Annotations[annTemplateRestart]
	}
	restartedAt, restarted := tmpl.Annotations[annRestartedAt]
	t := *tmpl // a shallow copy: only its annotations differ, and Marshal only reads
	if restarted {
		t.Annotations = make(map[string]string, len(tmpl.Annotations)-1)
		for k, val := range tmpl.Annotations {
			if k != annRestartedAt {
				t.Annotations[k] = val
			}
		}
	}
	if len(t.Annotations) == 0 {
		t.Annotations = nil
	}
	b, _ := json.Marshal(&t) // struct fields in order and map keys sorted: deterministic
	h := fnv.New64a()
	_, _ = h.Write(b)
	return strconv.FormatUint(h.Sum64(), 16), restartedAt
}

// HandleDeployment follows a change of a Deployment.
func (r *Tracker) HandleDeployment(d *watch.Delta, dep *appsv1.Deployment) {
	r.handleWorkload(d, deploymentView(dep))
}

// HandleStatefulSet follows a change of a StatefulSet.
func (r *Tracker) HandleStatefulSet(d *watch.Delta, s *appsv1.StatefulSet) {
	r.handleWorkload(d, statefulSetView(s))
}

// HandleDaemonSet follows a change of a DaemonSet.
func (r *Tracker) HandleDaemonSet(d *watch.Delta, ds *appsv1.DaemonSet) {
	r.handleWorkload(d, daemonSetView(ds))
}

func deploymentView(d *appsv1.Deployment) workloadView {
	v := baseView(rollout.Deployment, &d.ObjectMeta, &d.Spec.Template)
	v.observedGeneration = d.Status.ObservedGeneration
	v.replicas = replicasOf(d.Spec.Replicas)
	v.paused = d.Spec.Paused
	v.revision = d.Annotations[annDeploymentRevision]
	v.strategy = rollout.Strategy{Type: string(d.Spec.Strategy.Type), MinReadySeconds: d.Spec.MinReadySeconds, Partition: -1}
	if d.Spec.ProgressDeadlineSeconds != nil {
		v.strategy.ProgressDeadlineSeconds = *d.Spec.ProgressDeadlineSeconds
	}
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil && d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		v.strategy.MaxSurge, v.strategy.MaxUnavailable = intOrString(ru.MaxSurge), intOrString(ru.MaxUnavailable)
	}
	s := &d.Status
	var progressing *appsv1.DeploymentCondition
	for i := range s.Conditions {
		if s.Conditions[i].Type == appsv1.DeploymentProgressing {
			progressing = &s.Conditions[i]
		}
	}
	// The deployment controller's own "complete": every replica updated and available, no
	// old replica left, and (when it tracks progress) Progressing=True NewReplicaSetAvailable.
	v.done = s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == v.replicas &&
		s.Replicas == v.replicas && s.AvailableReplicas == v.replicas &&
		(progressing == nil || progressing.Reason == "NewReplicaSetAvailable")
	if v.done && progressing != nil {
		v.doneAt = progressing.LastUpdateTime.Time
	}
	v.replicaFailure = replicaFailureOf(s.Conditions)
	if progressing != nil && progressing.Status == corev1.ConditionFalse && progressing.Reason == "ProgressDeadlineExceeded" {
		v.failure = "ProgressDeadlineExceeded: " + progressing.Message
	}
	return v
}

func statefulSetView(s *appsv1.StatefulSet) workloadView {
	v := baseView(rollout.StatefulSet, &s.ObjectMeta, &s.Spec.Template)
	v.observedGeneration = s.Status.ObservedGeneration
	v.replicas = replicasOf(s.Spec.Replicas)
	v.revision = s.Status.UpdateRevision
	v.strategy = rollout.Strategy{Type: string(s.Spec.UpdateStrategy.Type), MinReadySeconds: s.Spec.MinReadySeconds,
		Partition: -1, PodManagementPolicy: string(s.Spec.PodManagementPolicy)}
	if v.strategy.PodManagementPolicy == "" {
		v.strategy.PodManagementPolicy = string(appsv1.OrderedReadyPodManagement)
	}
	want := v.replicas
	if ru := s.Spec.UpdateStrategy.RollingUpdate; ru != nil {
		if ru.Partition != nil {
			v.strategy.Partition = *ru.Partition
			want = max(0, v.replicas-*ru.Partition)
		}
		if ru.MaxUnavailable != nil {
			v.strategy.MaxUnavailable = intOrString(ru.MaxUnavailable)
		}
	}
	st := &s.Status
	// The statefulset controller's "rolled out": the update revision is current (or, with a
	// partition, the Pods at or above it are updated) and every replica ready and available.
	revisionDone := st.CurrentRevision == st.UpdateRevision || v.strategy.Partition > 0 && st.UpdatedReplicas >= want
	v.done = st.ObservedGeneration >= s.Generation && revisionDone && st.Replicas == v.replicas &&
		st.ReadyReplicas == v.replicas && st.AvailableReplicas == v.replicas && st.UpdatedReplicas >= want
	return v
}

func daemonSetView(d *appsv1.DaemonSet) workloadView {
	v := baseView(rollout.DaemonSet, &d.ObjectMeta, &d.Spec.Template)
	st := &d.Status
	v.observedGeneration = st.ObservedGeneration
	v.replicas = st.DesiredNumberScheduled
	v.strategy = rollout.Strategy{Type: string(d.Spec.UpdateStrategy.Type), MinReadySeconds: d.Spec.MinReadySeconds, Partition: -1}
	if ru := d.Spec.UpdateStrategy.RollingUpdate; ru != nil {
		v.strategy.MaxSurge, v.strategy.MaxUnavailable = intOrString(ru.MaxSurge), intOrString(ru.MaxUnavailable)
	}
	// The daemonset controller's "rolled out" (kubectl rollout status reads the same fields).
	v.done = st.ObservedGeneration >= d.Generation && st.UpdatedNumberScheduled == st.DesiredNumberScheduled &&
		st.NumberAvailable == st.DesiredNumberScheduled && st.NumberUnavailable == 0
	return v
}
