package tracer

import (
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/readyspan/readyspan/phases"
)

// Jobs (batch/v1): a Pod the job controller creates for a Job is rooted at the Job, as a
// Deployment's Pods are at the Deployment's change: the client's creation of the Job is the
// request that started its chain, and the job controller's work up to the Pod's creation is
// the controllers phase.
const (
	ResourceJobs Resource = "jobs"
	StreamJobs   Stream   = "jobs"
)

// job is what readyspan keeps of a Job: its creation, and how many of its Pods that creation
// started.
type job struct {
	name, namespace string
	client          string       // who created it (its field manager)
	persisted       phases.Times // its creation: metadata (1 s) and, seen created, the watch
	// wave is how many Pods the creation starts at once (parallelism, at most completions);
	// made counts the Pods traced as the creation's (jobRoot). Later Pods replace failed ones
	// or run later completions: they are the job controller's doing, not the client's.
	wave, made int32
}

type jobs = map[types.UID]*job

func (c *Correlator) jobs() jobs { return stateOf(c, ResourceJobs, func() jobs { return jobs{} }) }

// handleJob keeps a Job's creation the first time the Job is seen; what changes later is no
// new request (a Job's template cannot change).
func (c *Correlator) handleJob(d *Delta, j *batchv1.Job) {
	all := c.jobs()
	if d.Type == Deleted {
		delete(all, j.UID)
		return
	}
	if all[j.UID] != nil {
		return
	}
	cur := &job{name: j.Name, namespace: j.Namespace, wave: 1}
	if p := j.Spec.Parallelism; p != nil {
		cur.wave = *p
	}
	if n := j.Spec.Completions; n != nil && *n < cur.wave {
		cur.wave = *n
	}
	// Created suspended, or first seen with Pods already done: the Pods to come are not the
	// creation's.
	if ptr.Deref(j.Spec.Suspend, false) || j.Status.Succeeded+j.Status.Failed > 0 {
		cur.made = cur.wave
	}
	cur.persisted.Add(j.CreationTimestamp.Time, phases.SourceMetadata)
	if d.Type == Added {
		cur.persisted.Add(d.watchTime(), phases.SourceWatch)
	}
	cur.client = creator(&j.ObjectMeta)
	all[j.UID] = cur
}

// creator is the field manager that created the object: the oldest entry of a client (not the
// controller manager) on the main resource.
func creator(m *metav1.ObjectMeta) string {
	who, _ := clientEntry(m, false)
	return who
}

// jobRoot roots a Pod of the Job's first wave at the Job's creation; other Pods of the Job stay
// RootController.
func (c *Correlator) jobRoot(owner *metav1.OwnerReference, obs *phases.Pod) {
	j := c.jobs()[owner.UID]
	if j == nil || j.made >= j.wave || !atOrBefore(j.persisted, obs.Created) {
		return
	}
	j.made++
	obs.Root = phases.RootJob
	obs.RootPersisted = j.persisted
	obs.Client = j.client
	created, _ := obs.Created.Earliest()
	applyAudit(obs, c.auditFor(string(ResourceJobs), j.namespace, j.name, created.Time()))
}
