package phases

import "time"

// Outcome is how a Pod's startup ended, as far as readyspan saw it.
type Outcome string

const (
	OutcomeReady   Outcome = "ready"   // Ready (and in its Services' endpoints)
	OutcomeFailed  Outcome = "failed"  // a persistent failure (pull, crash loop, sandbox, mount)
	OutcomeStuck   Outcome = "stuck"   // not Ready after the stuck deadline
	OutcomeDeleted Outcome = "deleted" // deleted before it was Ready
	// OutcomeInProgress is for one-shot reconstructions (explain, the end of a replay) of a
	// Pod that is still starting: its spans end at the last thing seen, without an error.
	OutcomeInProgress Outcome = "in-progress"
)

// Root says what started the chain that created the Pod.
type Root string

const (
	RootDeployment Root = "deployment" // a Deployment change created or scaled the ReplicaSet
	RootReplicaSet Root = "replicaset" // a ReplicaSet (re)created the Pod without a spec change
	RootJob        Root = "job"        // a Job's creation: the job controller created the Pod
	RootController Root = "controller" // another controller (StatefulSet, DaemonSet…)
	RootBarePod    Root = "pod"        // the client created the Pod itself
)

// Occurrence is one failure or warning seen on a step (FailedScheduling, ErrImagePull, Unhealthy…).
type Occurrence struct {
	Time    Stamp
	Reason  string
	Message string
	Count   int32 // how many times the API says it happened (core/v1 count or series.count)
	// Last is when it last happened, for repeated occurrences (lastTimestamp, series).
	Last time.Time
}

// Pod is everything readyspan observed about one Pod's startup. The tracer fills it from objects,
// events and watch receive times; Build turns it into spans. Each boundary holds every
// observation of it, with its source, and Build picks the best.
type Pod struct {
	UID        string
	Name       string
	Namespace  string
	Node       string
	Deployment string
	ReplicaSet string
	// Workload names what the Pod belongs to, for the metrics' opt-in workload label: the
	// Deployment of its ReplicaSet, else its controller's name; "" for a bare Pod.
	Workload string
	Root     Root
	// Client is who sent the request that started the chain: the field manager of the
	// Deployment change (kubectl-client-side-apply, kubectl, helm…), or the Pod's creator.
	Client string

	// The root request: a Deployment's spec change, or the Pod itself for a bare Pod.
	// AuditReceived/AuditPersisted come from the apiserver audit log when readyspan reads it.
	AuditReceived  Times
	AuditPersisted Times
	RootPersisted  Times

	// Controllers: the ReplicaSet created or scaled up for this Pod, then the Pod created.
	ReplicaSetScaled Times
	Created          Times

	// Scheduling.
	Scheduled         Times
	SchedulingFailure []Occurrence
	Preempted         []Occurrence

	// Kubelet.
	KubeletStarted  Times        // status.startTime, first status written by the kubelet
	SandboxReady    Times        // PodReadyToStartContainers=True
	Initialized     Times        // Initialized=True
	PodWarnings     []Occurrence // FailedMount, FailedCreatePodSandBox, NetworkNotReady…
	Containers      []Container
	ContainersReady Times

	// Status.
	Running        Times // phase Running reported
	Ready          Times // Ready=True reported
	EndpointsReady Times // the Pod's address ready in an EndpointSlice of a Service selecting it
	HasService     bool  // a Service selects the Pod, so endpoints are part of "serving"

	Deleted Times

	// Outcome and End are decided by the tracer: End is when the trace ends for outcomes other
	// than ready (the failure, the stuck deadline, the deletion). FailureReason names the cause.
	Outcome       Outcome
	End           time.Time
	FailureReason string
	StuckPhase    string
}

// Container is what was observed about one container, init containers and sidecars included.
type Container struct {
	Name    string
	Image   string
	Init    bool // in spec.initContainers
	Sidecar bool // an init container with restartPolicy Always

	HasPostStart      bool
	HasStartupProbe   bool
	HasReadinessProbe bool

	PullStarted  Times // Pulling
	PullFinished Times // Pulled
	// PullTransfer is the pure pull length and PullTotal the length including waiting in the
	// kubelet's pull queue, both as the Pulled message states them; 0 when not stated.
	PullTransfer time.Duration
	PullTotal    time.Duration
	ImageSize    int64
	// Cache is "cold" (pulled), "warm" (already present) or "" (unknown: no Pulled event).
	Cache        string
	PullFailures []Occurrence // Failed to pull, ErrImagePull, ImagePullBackOff
	// FailedPulls is how many pull attempts failed (back-off waits between attempts are not
	// attempts); the tracer counts them from the kubelet's events and their counts.
	FailedPulls int

	Created Times
	Started Times
	// PostStartDone is when the postStart hook returned: the kubelet's FailedPostStartHook
	// event for a hook that failed, and the first status showing the container running or
	// terminated, which the kubelet writes only after the hook returned (an upper bound).
	PostStartDone Times
	// StartupDone is when the startup probe passed (status started=true).
	StartupDone Times
	ReadyAt     Times
	Finished    Times // init containers: terminated with exit 0

	Restarts int32
	// Restarted is when the latest run after a restart started: its running state's startedAt
	// and the first watch that showed it running. The kills that caused restarts are Killing
	// occurrences in Failures.
	Restarted Times
	// Failures holds CrashLoopBackOff, RunContainerError, failed hooks; Unhealthy holds probe
	// failures.
	Failures  []Occurrence
	Unhealthy []Occurrence
}
