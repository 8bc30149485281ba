package tracer

import (
	"context"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/readyspan/readyspan/events"
	"github.com/readyspan/readyspan/objects"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout/tracker"
	"github.com/readyspan/readyspan/watch"
)

// Jobs (batch/v1): a Pod the job controller creates for a Job is rooted at the Job, as a
// Deployment's Pods are at the Deployment's change: the client's creation of the Job is the
// request that started its chain, and the job controller's work up to the Pod's creation is
// the controllers phase.
const (
	ResourceJobs watch.Resource = "jobs"
	StreamJobs   watch.Stream   = "jobs"
)

// job is what readyspan keeps of a Job: its creation, and how many of its Pods that creation
// started.
type job struct {
	name, namespace string
	client          string       // who created it (its field manager)
	persisted       phases.Times // its creation: metadata (1 s) and, seen created, the watch
	// wave is how many Pods the creation starts at once (parallelism, at most completions);
	// made counts the Pods traced as the creation's (jobRoot). Later Pods replace failed ones
	// or run later completions: the job controller's doing, each after a Pod that went.
	wave, made int32
	// cronJob is the CronJob that made the Job, and scheduled the time it was due (the
	// annotation batch.kubernetes.io/cronjob-scheduled-timestamp, whole seconds, exact: the
	// schedule's time, not a clock's reading); empty for a Job a client created.
	cronJob   string
	scheduled phases.Times
}

type jobs = map[types.UID]*job

func (c *Correlator) jobs() jobs { return stateOf(c, ResourceJobs, func() jobs { return jobs{} }) }

// handleJob keeps a Job's creation the first time the Job is seen; what changes later is no
// new request (a Job's template cannot change).
func (c *Correlator) handleJob(d *watch.Delta, j *batchv1.Job) {
	all := c.jobs()
	if d.Type == watch.Deleted {
		delete(all, j.UID)
		delete(c.owners, j.UID)
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
	if d.Type == watch.Added {
		cur.persisted.Add(d.WatchTime(), phases.SourceWatch)
	}
	cur.client = objects.Creator(&j.ObjectMeta)
	if ref := objects.ControllerOf(&j.ObjectMeta); ref != nil && ref.Kind == "CronJob" {
		cur.cronJob = ref.Name
		cur.client = ""
		// RFC 3339 in the CronJob's time zone (cronjob/utils.go, getJobFromTemplate2).
		if at, err := time.Parse(time.RFC3339, j.Annotations[batchv1.CronJobScheduledTimestampAnnotation]); err == nil {
			cur.scheduled.Add(at, phases.SourceMetadata)
		}
	}
	if cur.cronJob != "" {
		c.cronJobCreated(cur)
	}
	all[j.UID] = cur
}

// slimJob keeps of a Job what its view reads: no template, and of its annotations only the
// CronJob's schedule time.
func slimJob(j *batchv1.Job) {
	at, ok := j.Annotations[batchv1.CronJobScheduledTimestampAnnotation]
	j.Annotations = nil
	if ok && len(at) <= maxTimestampLen {
		j.Annotations = map[string]string{batchv1.CronJobScheduledTimestampAnnotation: at}
	}
	j.Spec.Template = corev1.PodTemplateSpec{}
}

// maxTimestampLen bounds an annotation kept as a time: RFC 3339 with a zone is 25 bytes.
const maxTimestampLen = 64

// jobRoot roots a Pod of the Job's first wave at the Job's creation. A later Pod follows one of
// the Job's that went: a succeeded one (the next completion) or a failed, evicted or deleted one
// (its replacement, which links to it); one that follows none readyspan saw stays
// RootController. A CronJob's Job roots its Pods at the schedule time, the Job's creation
// between the two.
func (c *Correlator) jobRoot(owner *metav1.OwnerReference, obs *phases.Pod) {
	obs.Controllers = append(obs.Controllers, phases.Controller{Kind: owner.Kind, Name: owner.Name})
	j := c.jobs()[owner.UID]
	if j == nil || !phases.AtOrBefore(j.persisted, obs.Created) {
		return
	}
	first := j.made < j.wave
	var went *endedPod
	if !first {
		went = c.owners[owner.UID].followed(obs, func(*endedPod) bool { return true })
		if went == nil {
			return // neither the creation's nor after a Pod that went: the cause is not seen
		}
	}
	if first {
		j.made++
	}
	obs.Root = phases.RootOf(owner.Kind)
	obs.RootPersisted = j.persisted
	obs.Client = j.client
	obs.Cause, obs.Trigger = phases.CauseChange, j.persisted
	if j.cronJob != "" && len(j.scheduled) > 0 {
		obs.Root = phases.RootOf(cronJobKind.Kind.Kind)
		obs.Controllers = []phases.Controller{{Kind: cronJobKind.Kind.Kind, Name: j.cronJob},
			{Kind: owner.Kind, Name: owner.Name, Reached: j.persisted, ReachedBy: reachedCreated}}
		obs.RootPersisted = j.scheduled
		obs.Cause, obs.Trigger = phases.CauseSchedule, nil // controllers.job starts at JobCreated
	}
	if went != nil {
		obs.Cause, obs.CauseObject, obs.Trigger = phases.CauseNextCompletion, went.name, went.at
		if !went.succeeded {
			obs.Cause = phases.CauseReplacement
			obs.Replaces = &phases.Replaced{UID: string(went.uid), Name: went.name, Why: went.why, Node: went.node}
		}
	}
	if j.cronJob == "" {
		created, _ := obs.Created.Earliest()
		applyAudit(obs, c.auditFor(string(ResourceJobs), j.namespace, j.name, created.Time()))
	}
}

// jobKind is the registry entry of Jobs: a Job's Pods are rooted at its creation.
var jobKind = &kind{
	Kind: &watch.Kind{
		Resource: ResourceJobs, Stream: StreamJobs, Kind: "Job",
		GVR:       batchv1.SchemeGroupVersion.WithResource("jobs"),
		NewObject: func() runtime.Object { return &batchv1.Job{} },
		NewList:   func() runtime.Object { return &batchv1.JobList{} },
		ListWatch: watch.Namespaced(func(c kubernetes.Interface, ns string) watch.Lister[*batchv1.JobList] {
			return c.BatchV1().Jobs(ns)
		}),
		// The view reads the Job's counts, status and schedule time, never its template.
		Transform:     func(o runtime.Object) { slimJob(o.(*batchv1.Job)) },
		KeepsIdentity: true, Workload: true,
		Audit:    &watch.AuditedWrites{Verbs: []string{"create"}},
		Snapshot: watch.SnapshotWorkloads, Verbs: watch.ReadVerbs,
		Explain: []string{"job", "jobs"},
		Get: func(ctx context.Context, c kubernetes.Interface, ns, name string) (metav1.Object, error) {
			return c.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		},
	},
	handle: func(c *Correlator, d watch.Delta) { c.handleJob(&d, d.Object.(*batchv1.Job)) },
	// The job controller's SuccessfulCreate is the replicaset controller's: "Created pod: NAME".
	events:        func(c *Correlator, e *events.Event) bool { return c.handleCreatedEvent(e) },
	rolloutEvents: func(r *tracker.Tracker, e *events.Event) bool { return r.HandleRejection(e) }, // FailedCreate: counted
	root: func(c *Correlator, owner *metav1.OwnerReference, obs *phases.Pod, _ *corev1.Pod) {
		c.jobRoot(owner, obs)
	},
}
