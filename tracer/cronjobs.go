package tracer

import (
	"context"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/readyspan/readyspan/events"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/watch"
)

// CronJobs (batch/v1): a CronJob's Pods are rooted at the time its schedule came due, which the
// cronjob controller writes on the Job it creates (jobs.go); the controller's SuccessfulCreate
// ("Created job NAME", cronjob_controllerv2.go) stamps the Job's creation with its nanosecond
// clock, taken right after the create returned.
const (
	ResourceCronJobs watch.Resource = "cronjobs"
	StreamCronJobs   watch.Stream   = "cronjobs"
)

// cronJobs is what readyspan keeps of CronJobs: the SuccessfulCreate of each Job not yet seen,
// by the Job's name (the Event can come before the Job).
type cronJobs struct {
	names   map[types.UID]string
	created map[objectName]*events.Event
}

func (c *Correlator) cronJobs() *cronJobs {
	return stateOf(c, ResourceCronJobs, func() *cronJobs {
		return &cronJobs{names: map[types.UID]string{}, created: map[objectName]*events.Event{}}
	})
}

// handleCronJob keeps which CronJobs exist, so that their Events are read only while they do.
func (c *Correlator) handleCronJob(d *watch.Delta, cj *batchv1.CronJob) {
	st := c.cronJobs()
	if d.Type == watch.Deleted {
		delete(st.names, cj.UID)
		return
	}
	st.names[cj.UID] = cj.Name
}

// handleCronJobEvent reads "Created job NAME": the Job's creation, stamped by the controller.
// It returns false for a SuccessfulCreate in another format.
func (c *Correlator) handleCronJobEvent(e *events.Event) bool {
	if e.Reason != "SuccessfulCreate" {
		return true
	}
	name, ok := strings.CutPrefix(e.Message, "Created job ")
	if !ok || name == "" || strings.ContainsRune(name, ' ') {
		return false
	}
	if e.Count > 1 {
		return true // a rewrite: its stamps are the first occurrence's, another Job's
	}
	key := objectName{e.Namespace, name}
	for _, j := range c.jobs() {
		if j.name == name && j.namespace == e.Namespace {
			j.persisted.AddInstant(e.NameTime, phases.SourceEventName)
			return true
		}
	}
	st := c.cronJobs()
	if len(st.created) >= maxPendingEvents {
		c.stats.Dropped("pending_events_cap")
		return true
	}
	st.created[key] = e
	return true
}

// cronJobCreated takes the pending SuccessfulCreate of a Job just seen.
func (c *Correlator) cronJobCreated(j *job) {
	st := c.cronJobs()
	key := objectName{j.namespace, j.name}
	if e := st.created[key]; e != nil {
		j.persisted.AddInstant(e.NameTime, phases.SourceEventName)
		delete(st.created, key)
	}
}

// cronJobKind is the registry entry of CronJobs: a CronJob's Pods are rooted at its schedule.
var cronJobKind = &kind{
	Kind: &watch.Kind{
		Resource: ResourceCronJobs, Stream: StreamCronJobs, Kind: "CronJob",
		GVR:       batchv1.SchemeGroupVersion.WithResource("cronjobs"),
		NewObject: func() runtime.Object { return &batchv1.CronJob{} },
		NewList:   func() runtime.Object { return &batchv1.CronJobList{} },
		ListWatch: watch.Namespaced(func(c kubernetes.Interface, ns string) watch.Lister[*batchv1.CronJobList] {
			return c.BatchV1().CronJobs(ns)
		}),
		// Nothing reads the Job template.
		Transform: func(o runtime.Object) {
			cj := o.(*batchv1.CronJob)
			cj.Annotations = nil
			cj.Spec.JobTemplate = batchv1.JobTemplateSpec{}
		},
		KeepsIdentity: true, Workload: true,
		Snapshot: watch.SnapshotWorkloads, Verbs: watch.ReadVerbs,
		Explain: []string{"cronjob", "cronjobs", "cj"},
		Get: func(ctx context.Context, c kubernetes.Interface, ns, name string) (metav1.Object, error) {
			return c.BatchV1().CronJobs(ns).Get(ctx, name, metav1.GetOptions{})
		},
	},
	handle: func(c *Correlator, d watch.Delta) { c.handleCronJob(&d, d.Object.(*batchv1.CronJob)) },
	events: func(c *Correlator, e *events.Event) bool { return c.handleCronJobEvent(e) },
}
