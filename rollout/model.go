// Package rollout is the pure model of a workload rollout: what the tracer observed about one
// change of a Deployment's, StatefulSet's or DaemonSet's desired state (its scaling steps, the
// Pods it started and the Pods it removed) and how that becomes one trace with a critical path.
// Like phases, it reads no informer and knows no exporter.
package rollout

import (
	"strconv"
	"time"

	"github.com/readyspan/readyspan/phases"
)

// Kind says what changed.
type Kind string

const (
	KindCreate   Kind = "create"   // the workload was created
	KindUpdate   Kind = "update"   // the Pod template changed
	KindRestart  Kind = "restart"  // kubectl rollout restart: only the restartedAt annotation changed
	KindRollback Kind = "rollback" // the template went back to one an earlier revision had
	KindScale    Kind = "scale"    // only the replica count changed
)

// Kinds lists every Kind (bounded metric label values).
var Kinds = []Kind{KindCreate, KindUpdate, KindRestart, KindRollback, KindScale}

// Outcome is how a rollout ended.
type Outcome string

const (
	OutcomeComplete   Outcome = "complete"   // the controller's own verdict: all updated and available, old Pods gone
	OutcomeFailed     Outcome = "failed"     // ProgressDeadlineExceeded, or stuck past the stuck deadline
	OutcomeSuperseded Outcome = "superseded" // a newer rollout of the same workload began first
	OutcomePaused     Outcome = "paused"     // the Deployment was paused
	// OutcomeBlocked: the apiserver kept refusing the controller's Pod creates (quota, an
	// admission webhook, PodSecurity) and none was made for the blocked deadline; the
	// rejection is the Reason.
	OutcomeBlocked Outcome = "blocked"
	// OutcomeInProgress is for one-shot reconstructions (explain, the end of a replay).
	OutcomeInProgress Outcome = "in-progress"
)

// Outcomes lists every Outcome (bounded metric label values).
var Outcomes = []Outcome{OutcomeComplete, OutcomeFailed, OutcomeSuperseded, OutcomePaused, OutcomeBlocked, OutcomeInProgress}

// Workload kinds.
const (
	Deployment  = "Deployment"
	StatefulSet = "StatefulSet"
	DaemonSet   = "DaemonSet"
)

// Workload names the object that rolled out.
type Workload struct {
	Kind      string // Deployment, StatefulSet, DaemonSet
	Name      string
	Namespace string
	UID       string
}

// Strategy is the workload's update strategy as the rollout ran with it. Fields that do not
// apply to the workload kind stay empty (or -1 for Partition).
type Strategy struct {
	Type                    string // RollingUpdate, Recreate, OnDelete
	MaxSurge                string // as written: "25%", "1"
	MaxUnavailable          string
	MinReadySeconds         int32
	ProgressDeadlineSeconds int32 // 0: none (not a Deployment)
	Partition               int32 // StatefulSet rolling update partition; -1: none
	PodManagementPolicy     string
}

// Step is one scaling action of the controller: a Deployment's ScalingReplicaSet event
// ("Scaled up replica set web-7d4b9 from 1 to 2"), or a StatefulSet's or DaemonSet's create or
// delete of one Pod. It lasts from the action to its effect: the Pods it created available, or
// the Pods it removed gone.
type Step struct {
	Time    phases.Times
	Up      bool   // scale up (create Pods) or down (remove them)
	Target  string // the ReplicaSet scaled, or the Pod created or deleted
	From    int32  // replicas before and after (a Pod create or delete: -1, -1)
	To      int32
	Message string
	// Pods are the UIDs of the Pods the step created (Up) or removed, as the tracer matched them.
	Pods []string
}

// Count is how many Pods the step adds (positive) or removes (negative), when it says.
func (s *Step) Count() int32 {
	if s.From < 0 || s.To < 0 {
		if s.Up {
			return 1
		}
		return -1
	}
	return s.To - s.From
}

// NewPod is a Pod the rollout started.
type NewPod struct {
	UID, Name, Node string
	Created         phases.Times
	Ready           phases.Times
	// Available is Ready plus minReadySeconds: when the controller counts it available.
	Available time.Time
	// Trace is the Pod's own startup trace, once readyspan exported it; its six phase spans
	// are drawn under the rollout's Pod span, and its sub-steps feed the critical path.
	Trace *phases.Trace
}

// OldPod is a Pod the rollout removed.
type OldPod struct {
	UID, Name string
	Deleted   phases.Times // deletion requested: deletionTimestamp set (watch), or the delete event
	Gone      phases.Times // the Pod's deletion seen on the watch
	// GracePeriod is the Pod's deletionGracePeriodSeconds; PreStop says a container had a
	// preStop hook; Killed says a container was still running at the end of the grace period
	// and was killed (exit code 137 after the grace period).
	GracePeriod int64
	PreStop     bool
	Killed      bool
	// PreStopSleep is the longest preStop sleep its containers declared (a sleep hook's
	// seconds): their SIGTERM comes that long after the deletion. PreStopOther says a container
	// has an exec or httpGet preStop hook, whose end is not observable.
	PreStopSleep time.Duration
	PreStopOther bool
	// Addresses are the Pod's IPs, as kube-proxy's rules name them.
	Addresses []string
	// Rotation is each node's kube-proxy taking the Pod out of its Services' rotation, when
	// readyspan's node component reports them; nil otherwise. A node's At is when it did (zero:
	// not within the wait).
	Rotation *phases.Programming
}

// Stop is when an old Pod's containers were told to stop: its deletion plus its preStop
// sleep. Exact is false when an exec or httpGet hook runs first: the stop is then later by the
// hook's unobserved length, and the deletion plus the sleep only bounds it from below.
func (o *OldPod) Stop() (at time.Time, exact bool) {
	d, _ := o.Deleted.Resolve()
	if d.Time().IsZero() {
		return time.Time{}, false
	}
	return d.Time().Add(o.PreStopSleep), !o.PreStopOther
}

// Rollout is everything readyspan observed about one rollout. The tracer fills it; Build turns
// it into spans.
type Rollout struct {
	Workload   Workload
	Kind       Kind
	Generation int64  // metadata.generation of the change
	Revision   string // deployment.kubernetes.io/revision, or the ControllerRevision name
	Strategy   Strategy
	Replicas   int32 // desired replicas after the change (DaemonSet: desired number scheduled)
	// Start is the change: the audit log's request time, the watch receive time of the new
	// generation, the managedFields time of the update.
	Start phases.Times
	// Complete is when the controller's verdict was seen on the watch (or the failure, pause
	// or newer change, for the other outcomes).
	Complete     phases.Times
	Outcome      Outcome
	Reason       string
	SupersededBy phases.TraceID // set with OutcomeSuperseded
	// Rejections are the refusals of the controller's Pod creates while it ran, oldest first.
	Rejections []Rejection
	// Resumes is the trace this one continues: a rollout exported as blocked that went on once
	// its creates were let through is exported again, whole, under a trace of its own
	// (Attempt 1) that links to the blocked one.
	Resumes phases.TraceID
	Attempt int
	// TraceContext is the workload's tracing.k8s.io/traceparent that applies to the rollout
	// (docs/trace-context.md): its child when written for this rollout, linked when carried
	// over from before it; zero for none.
	TraceContext phases.TraceContext
	Steps        []Step
	NewPods      []NewPod
	OldPods      []OldPod
}

// TraceID is the rollout's trace ID, the one place it is decided: the trace of the context
// written for it when its root is that context's child (the CI job's trace), else its own
// (AttemptTraceIDFor). Everything that refers to a rollout's trace (its Pods' links, the link
// from the rollout it superseded, the UI's and terminal's links) reads it from here or from
// the Trace Build made.
func (r *Rollout) TraceID() phases.TraceID {
	if r.TraceContext.Relation == phases.TraceContextChild {
		return r.TraceContext.TraceID()
	}
	return AttemptTraceIDFor(r.Workload.UID, r.Generation, r.Attempt)
}

// TraceIDFor derives a rollout's trace ID from its workload's UID and the generation that
// started it, so a restarted or standby readyspan produces the same ID.
func TraceIDFor(workloadUID string, generation int64) phases.TraceID {
	return phases.TraceIDFor(rolloutKey(workloadUID, generation, 0))
}

// AttemptTraceIDFor is the trace ID of a rollout's export after it resumed from blocked
// (attempt 1); attempt 0 is TraceIDFor.
func AttemptTraceIDFor(workloadUID string, generation int64, attempt int) phases.TraceID {
	return phases.TraceIDFor(rolloutKey(workloadUID, generation, attempt))
}

// RootSpanIDFor is the span ID of a rollout's root span (Pod traces link to it).
func RootSpanIDFor(workloadUID string, generation int64, attempt int) phases.SpanID {
	return phases.SpanIDFor(rolloutKey(workloadUID, generation, attempt), RootSpanName)
}

func rolloutKey(workloadUID string, generation int64, attempt int) string {
	k := workloadUID + "/rollout/" + strconv.FormatInt(generation, 10)
	if attempt > 0 {
		k += "/resumed/" + strconv.Itoa(attempt)
	}
	return k
}

// Progress is the state of the rollouts in progress, for gauges.
type Progress struct {
	// InProgress counts rollouts by "workload kind/rollout kind" ("Deployment/update").
	InProgress map[string]int
	// PastDeadline counts, by workload kind, rollouts past their progress deadline.
	PastDeadline map[string]int
	// LongestWithoutStep is, by workload kind, the longest time since a rollout's last step.
	LongestWithoutStep map[string]time.Duration
	// Blocked counts rollouts whose Pod creates are being refused, none made since, by
	// "workload kind/rejection class" ("Deployment/quota").
	Blocked map[string]int
}

// RejectedCreates counts the controllers' refused Pod creates (FailedCreate occurrences), by
// RejectionClass. A Stats that implements it gets each as it is seen.
type RejectedCreates interface {
	PodCreatesRejected(class RejectionClass, n int)
}
