package tracer

import (
	"encoding/json"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/tracer/events"
	"github.com/readyspan/readyspan/tracer/objects"
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
}

func baseView(kind string, m *metav1.ObjectMeta, tmpl *corev1.PodTemplateSpec) workloadView {
	v := workloadView{
		ref:        rollout.Workload{Kind: kind, Name: m.Name, Namespace: m.Namespace, UID: string(m.UID)},
		generation: m.Generation, created: m.CreationTimestamp.Time, meta: m, template: tmpl,
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

// slimWorkload keeps of a workload's annotations and template only what rollouts read.
func slimWorkload(m metav1.Object, tmpl *corev1.PodTemplateSpec, om *metav1.ObjectMeta) {
	hash, restartedAt := signatures.of(m, tmpl, om)
	keep := map[string]string{annTemplateHash: hash}
	if restartedAt != "" {
		keep[annTemplateRestart] = restartedAt
	}
	if r, ok := m.GetAnnotations()[annDeploymentRevision]; ok {
		keep[annDeploymentRevision] = r
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

// stepOf reads a scaling action from a controller's Event about a workload, in the format its
// kind's registry entry knows (kind.step). ok is false when the event is not one; known is
// false for a message in a format readyspan does not know.
//
// After ten such messages about one object within ten minutes, client-go's recorder stops
// writing new Events and rewrites one, "(combined from similar events): " and the latest
// message, counting them: each rewrite is one more step.
func stepOf(e *events.Event) (st rollout.Step, ok, known bool) {
	msg := strings.TrimPrefix(e.Message, events.CombinedPrefix)
	st.From, st.To, st.Message = -1, -1, msg
	k := kindNamed(e.Regarding.APIVersion, e.Regarding.Kind)
	if k == nil || k.step == nil {
		return st, false, true
	}
	ok, known = k.step(&st, e.Reason, msg)
	return st, ok, known
}

// scaledReplicaSet reads a ReplicaSet's scaling as a workload controller states it, after the
// prefix that names the ReplicaSet: "NAME from 1 to 2" (the deployment controller) or
// "NAME (revision 2) from 1 to 2" (Argo Rollouts), with the direction the prefix gave.
func scaledReplicaSet(st *rollout.Step, up bool, rest string) (known bool) {
	f := strings.Fields(rest)
	if len(f) == 7 && strings.HasPrefix(f[1], "(revision") && strings.HasSuffix(f[2], ")") {
		f = append(f[:1], f[3:]...)
	}
	if len(f) != 5 || f[1] != "from" || f[3] != "to" {
		return false
	}
	// Unsigned: the controllers print replica counts with %d of values never below zero,
	// and a "-1" here would read as the "not a scale step" sentinel.
	from, err1 := strconv.ParseUint(f[2], 10, 31)
	to, err2 := strconv.ParseUint(f[4], 10, 31)
	if err1 != nil || err2 != nil {
		return false
	}
	st.Up, st.Target, st.From, st.To = up, f[0], int32(from), int32(to)
	return true
}

// scalingReplicaSet reads a ScalingReplicaSet Event's message, whose ReplicaSet follows one of
// the prefixes up or down ("Scaled up replica set ", "Scaled down replica set ").
func scalingReplicaSet(st *rollout.Step, reason, msg, up, down string) (ok, known bool) {
	if reason != "ScalingReplicaSet" {
		return false, true
	}
	if rest, found := strings.CutPrefix(msg, up); found {
		return true, scaledReplicaSet(st, true, rest)
	}
	if rest, found := strings.CutPrefix(msg, down); found {
		return true, scaledReplicaSet(st, false, rest)
	}
	return true, false
}
