package phases

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Outcome is how a Pod's startup ended, as far as readyspan saw it.
type Outcome string

const (
	OutcomeReady   Outcome = "ready"   // Ready (and in its Services' endpoints)
	OutcomeFailed  Outcome = "failed"  // a persistent failure (pull, crash loop, sandbox, mount)
	OutcomeStuck   Outcome = "stuck"   // not Ready after the stuck deadline
	OutcomeDeleted Outcome = "deleted" // deleted before it was Ready
	// OutcomeCompleted is a Pod that ran to completion (phase Succeeded) without being seen
	// Ready: a Job's Pod whose container exits before the kubelet reports it Ready. Its trace
	// ends at Succeeded, with no error.
	OutcomeCompleted Outcome = "completed"
	// OutcomeInProgress is for one-shot reconstructions (explain, the end of a replay) of a
	// Pod that is still starting: its spans end at the last thing seen, without an error.
	OutcomeInProgress Outcome = "in-progress"
)

// Root says what started the chain that created the Pod: a workload of the chain (RootOf its
// Kind), another controller, or the client.
type Root string

const (
	RootController Root = "controller" // another controller, whose cause readyspan does not read
	RootBarePod    Root = "pod"        // the client created the Pod itself
)

// RootOf is the Root of a chain that a workload of the kind started: "deployment" for a
// Deployment's change, "replicaset" for a ReplicaSet that (re)created the Pod without one…
func RootOf(kind string) Root { return namesOf(kind).root }

// Controller is one workload of the chain of controllers that created a Pod, as data: every
// kind's step is drawn the same way (build_controllers.go), as the span ControllerStep(Kind)
// named by the attribute ControllerAttr(Kind).
type Controller struct {
	Kind string // as the API names it: Deployment, ReplicaSet, Job…
	Name string
	// Reached is when the controller above this one created or scaled it for the Pod (the
	// Deployment's ReplicaSet scaled up, the CronJob's Job created), and ReachedBy says which
	// ("scaled up", "created"); nil for the first of the chain.
	Reached   Times
	ReachedBy string
}

// ControllerStep is the span of a workload controller's step: controllers.<kind>.
func ControllerStep(kind string) string { return namesOf(kind).step }

// ControllerAttr is the attribute that names the Pod's workload of the kind: k8s.<kind>.name,
// as the OpenTelemetry semantic conventions name the built-in ones.
func ControllerAttr(kind string) string { return namesOf(kind).attr }

// kindNames are a workload kind's names in a trace. Build draws every Pod's chain by them, a
// few times each, so they are derived once per kind rather than each time (each derivation
// allocates). The memo keeps at most maxKindNames kinds: the kinds come from a registry, and
// past it a name is derived without being kept.
type kindNames struct {
	root       Root
	step, attr string
}

const maxKindNames = 64

var (
	kindNamesMemo  sync.Map // kind → kindNames
	kindNamesCount atomic.Int32
)

func namesOf(kind string) kindNames {
	if n, ok := kindNamesMemo.Load(kind); ok {
		return n.(kindNames)
	}
	lower := strings.ToLower(kind)
	n := kindNames{root: Root(lower), step: "controllers." + lower, attr: "k8s." + lower + ".name"}
	if kindNamesCount.Add(1) <= maxKindNames {
		kindNamesMemo.Store(kind, n)
	}
	return n
}

// Cause is what gave a workload controller reason to create a Pod.
type Cause string

const (
	CauseNone Cause = ""
	// CauseChange: the workload's creation or spec change (a scale included).
	CauseChange Cause = "change"
	// CauseSchedule: a CronJob's schedule came due.
	CauseSchedule Cause = "schedule"
	// CausePredecessorReady: an ordered StatefulSet's previous Pod turned Ready.
	CausePredecessorReady Cause = "predecessor_ready"
	// CauseNextCompletion: a Job's Pod succeeded and more completions are due.
	CauseNextCompletion Cause = "next_completion"
	// CauseReplacement: a Pod of the workload was deleted, evicted or failed (Replaces).
	CauseReplacement Cause = "replacement"
)

// Replaced is a Pod a new one replaces, and why it went.
type Replaced struct {
	UID, Name string
	// Why is "deleted", "evicted" or "failed" (with the reason the status gives, when it does).
	Why string
	// Node is the node it ran on. DisruptedBy and Disruption say who evicted it to take that node
	// away, and why (Karpenter: Underutilized, Empty, Drifted…; cluster-autoscaler: ScaleDown),
	// when an Event about it said so; NodeTrace is the key of that node's startup trace
	// (NodeStartupKey) when it was traced.
	Node, DisruptedBy, Disruption, NodeTrace string
}

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
	UID       string
	Name      string
	Namespace string
	Node      string
	// Controllers is the chain of workloads that created the Pod, from the one a client
	// changes (a Deployment, a CronJob) to the Pod's own controller; empty for a bare Pod or a
	// controller readyspan does not read.
	Controllers []Controller
	// Workload names what the Pod belongs to, for the metrics' opt-in workload label: the
	// outermost workload of its chain (the Deployment of its ReplicaSet, the CronJob of its
	// Job), else its controller's name; "" for a bare Pod.
	Workload string
	Root     Root
	// Client is who sent the request that started the chain: the field manager of the
	// Deployment change (kubectl-client-side-apply, kubectl, helm…), or the Pod's creator.
	Client string
	// Scheduler is the scheduler the Pod asked for (spec.schedulerName), and NodeInfo what its
	// node said of itself when the trace was built: both are what comparisons of startups
	// split by (package compare), since the Pod's spans alone do not carry them.
	Scheduler string
	NodeInfo  NodeInfo

	// The root request: a Deployment's spec change, or the Pod itself for a bare Pod.
	// AuditReceived/AuditPersisted come from the apiserver audit log when readyspan reads it.
	AuditReceived  Times
	AuditPersisted Times
	RootPersisted  Times

	// Created is the Pod created, the end of its controller's step.
	Created Times

	// The workload controller's own cause (StatefulSet, DaemonSet, Job, CronJob): what gave
	// it reason to create the Pod, and when. Trigger is unobserved where nothing states it.
	Trigger Times
	Cause   Cause
	// CauseObject names the Pod the cause is about: the predecessor that turned Ready, the
	// Pod that finished before a Job's next one, the Pod replaced.
	CauseObject string
	// Replaces is the Pod this one replaces (self-healing), nil for none.
	Replaces *Replaced
	// TraceContext is the first valid tracing.k8s.io/traceparent the Pod itself carried
	// (source pod), else its rollout's context (source workload), which the rollout tracker
	// adds when it is handed the Pod's trace (tracker.PodTrace); the root links to it, never
	// as its child: a Pod's trace ID is its UID.
	TraceContext TraceContext

	// Scheduling.
	Scheduled         Times
	SchedulingFailure []Occurrence
	// Preempted are the scheduler's Preempted events about this Pod (it was a victim);
	// PreemptedBy is the Pod they name as the preemptor, when readyspan could read it.
	Preempted   []Occurrence
	PreemptedBy *PodRef
	// Gated: the Pod was first seen with spec.schedulingGates. GatesRemoved is when the last
	// was removed: the watch event that first showed none, and the managedFields time of the
	// manager whose write removed them, when that write changed its entry.
	Gated          bool
	GatesRemoved   Times
	GatesRemovedBy string
	// NominatedNode is status.nominatedNodeName as the Pod last showed it before its bind (the
	// scheduler's choice after preempting, or an autoscaler's), and NominatedAt when it was
	// first seen.
	NominatedNode string
	NominatedAt   Times
	// Autoscaler are the node autoscalers' events about the Pod: cluster-autoscaler's
	// TriggeredScaleUp and NotTriggerScaleUp, Karpenter's Nominated.
	Autoscaler []Occurrence
	// NewNode is the Node the Pod was bound to when that Node was created after the Pod: the
	// Pod waited for it.
	NewNode *NodeSeen
	// Victims are the Pods the scheduler preempted to make room for this one (their Preempted
	// events name it), at most MaxVictims.
	Victims []PodRef

	// Kubelet.
	KubeletStarted Times // status.startTime, first status written by the kubelet
	SandboxReady   Times // PodReadyToStartContainers=True
	// SandboxReadyLate: the watch first showed SandboxReady with a container already past its
	// sandbox, so the condition bounds the sandbox ready from above only (kubelets before 1.36
	// set it with the containers' status).
	SandboxReadyLate bool
	Initialized      Times        // Initialized=True
	PodWarnings      []Occurrence // FailedCreatePodSandBox, NetworkNotReady…
	// VolumeEvents are the events about the Pod's volumes, in order: the attach/detach
	// controller's SuccessfulAttachVolume and FailedAttachVolume, the kubelet's FailedMount
	// and FailedMapVolume.
	VolumeEvents []Occurrence
	// Claims are the PersistentVolumeClaims the Pod's volumes name, as the claims' watch showed
	// them.
	Claims          []Claim
	Containers      []Container
	ContainersReady Times

	// Status.
	Running        Times // phase Running reported
	Ready          Times // Ready=True reported
	EndpointsReady Times // the Pod's address ready in an EndpointSlice of a Service selecting it
	HasService     bool  // a Service selects the Pod, so endpoints are part of "serving"
	// Addresses are the Pod's IPs (status.podIPs): what kube-proxy's rules name.
	Addresses []string
	// Programming is each node's kube-proxy putting the Pod in its rules, when readyspan's node
	// component reports them; nil otherwise.
	Programming *Programming

	Deleted Times

	// Outcome and End are decided by the tracer: End is when the trace ends for outcomes other
	// than ready (the failure, the stuck deadline, the deletion). FailureReason names the cause.
	Outcome       Outcome
	End           time.Time
	FailureReason string
	StuckPhase    string
}

// Claim is what was observed of one PersistentVolumeClaim a Pod's volume names.
type Claim struct {
	Name   string
	Volume string // the PersistentVolume it is bound to (spec.volumeName), once bound
	// Seen is false when the claim was never seen (no watch of claims, or it does not exist):
	// nothing below is known then.
	Seen bool
	// Phase is the claim's phase as last seen: Pending, Bound or Lost.
	Phase string
	// Created is the claim's creationTimestamp, with the receive time of its creation when
	// the watch saw it created.
	Created Times
	// Bound is when the watch first showed the claim Bound; unknown (empty) for a claim
	// already Bound when readyspan first saw it.
	Bound Times
	// SelectedNode is when the watch first showed the scheduler's
	// volume.kubernetes.io/selected-node annotation on it: the scheduler picked a node and
	// asked for the claim to be provisioned there (WaitForFirstConsumer, dynamic provisioning).
	SelectedNode Times
}

// MaxVictims bounds the victims a Pod's trace links to: the scheduler may preempt many Pods for
// one, and each link is kept until the trace is exported.
const MaxVictims = 32

// PodRef names another Pod, whose trace a span links to.
type PodRef struct {
	Namespace, Name, UID string
}

// NodeSeen is what was observed of a Node added for a Pod: its creation, its Ready condition
// turning True, its network and startup taints, and the provisioner's record of it.
// NodeInfo is what a Node says of itself that may explain its Pods' startups: its kubelet's
// version and its container runtime (status.nodeInfo), and the node pool its labels name. Empty
// fields are unknown (readyspan does not read Nodes when it watches some namespaces only).
type NodeInfo struct {
	KubeletVersion string
	RuntimeName    string
	RuntimeVersion string
	Pool           string
}

type NodeSeen struct {
	Name, UID string
	// Traced says the Node's startup has a trace of its own (package node), which the Pod's
	// wait links to.
	Traced  bool
	Created Times // creationTimestamp, and the receive time of the watch event that added it
	Ready   Times // Ready's lastTransitionTime (the kubelet's clock), and the watch receive time
	// NetworkReady is NetworkUnavailable turning False (its lastTransitionTime and the receive
	// time), where the Node reports that condition (a cloud's route controller, some CNIs).
	NetworkReady Times
	// TaintsRemoved is the receive time of the first version of the Node Ready without a startup
	// taint, after one was seen (the node lifecycle controller's not-ready, Karpenter's
	// unregistered, its NodeClaim's startupTaints): a taint has no time of its own.
	TaintsRemoved Times
	// Claim is Karpenter's NodeClaim for the Node, nil where no NodeClaim made it.
	Claim *NodeClaimSeen
}

// NodeRootSpanName is the root span of a node's startup trace (package node), which a Pod's wait
// for the node links to, as LinkNodeStartup.
const (
	NodeRootSpanName  = "node.startup"
	LinkNodeStartup   = "node_startup"
	LinkDisruptedNode = "disrupted_node"
)

// NodeStartupKey is what a node's startup trace is keyed by, its trace and span IDs derived
// from: its NodeClaim's UID where Karpenter made it (the claim exists before the Node), else the
// Node's.
func NodeStartupKey(claimUID, nodeUID string) string {
	if claimUID != "" {
		return claimUID
	}
	return nodeUID
}

// startupKey is NodeStartupKey of the Node.
func (n *NodeSeen) startupKey() string {
	var claim string
	if n.Claim != nil {
		claim = n.Claim.UID
	}
	return NodeStartupKey(claim, n.UID)
}

// NodeClaimSeen is what was observed of a Karpenter NodeClaim: its creation (the provisioner's
// decision) and its conditions turning True, each the lastTransitionTime Karpenter wrote (its
// clock, 1 s) and the receive time of the version that first showed it.
type NodeClaimSeen struct {
	Name, UID, NodePool string
	Created             Times // creationTimestamp, and the receive time of its creation
	Launched            Times // the cloud provider's create returned
	Registered          Times // a Node with its provider ID joined; Karpenter synced it
	Initialized         Times // the Node Ready, without startup taints, its resources registered
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
