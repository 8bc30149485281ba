package tracer

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/readyspan/readyspan/watch"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/readyspan/readyspan/events"
	"github.com/readyspan/readyspan/objects"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout/tracker"
)

// Pods (core/v1): the object whose startup every trace follows; its state is pods.go's Correlator methods, its view slimPod.
const (
	ResourcePods watch.Resource = "pods"
	StreamPods   watch.Stream   = "pods"
)

// podState is everything readyspan holds for one in-flight Pod. The correlator owns it.
type podState struct {
	service serviceAnswer // whether a Service selects it, as last asked
	pod     *corev1.Pod   // last seen version (after the informer transform)
	creator string        // field manager that created the Pod
	created phases.Times
	// seen holds the receive time of the first watch event that showed each change, keyed
	// by what changed ({nodeName}, {cond Ready}, {running web}…). Only live watch events
	// count; an initial list does not witness when anything happened.
	seen seenChanges
	// events about this Pod, one per Event UID (its latest version), with the receive time of
	// their first version. A Pod has about a dozen: a list walked beats a map made per Pod.
	events []*events.Event
	// firstFailure is when a persistent failure (ErrImagePull, CrashLoopBackOff…) was first
	// seen in the Pod's status, or a volume failure (FailedMount…) in an event about it before
	// its sandbox was ready, for --fail-after.
	firstFailure  time.Time
	failureReason string
	readyAt       time.Time // local time Ready was first seen, for the endpoints wait
	deletedAt     time.Time
	// gone: the watch said the Pod is gone (its last delta), so nothing will take it out of the
	// correlator's done set once its trace is exported.
	gone         bool
	completeAt   time.Time     // when the trace was found complete, for Config.Settle
	createdEvent *events.Event // the replicaset controller's SuccessfulCreate for this Pod
	// due is when the clock alone could finish the trace; dueIndex is the Pod's place in the
	// Correlator's heap of due times, -1 when it is not in it.
	due      time.Time
	dueIndex int
	// phase is the phase the Pod is counted in for the in-flight gauges, "" when not counted.
	phase string
	// sandboxSeen: a version with PodReadyToStartContainers True was seen; sandboxLate: the
	// first such version showed a container already past its sandbox (sandboxReportedLate).
	sandboxSeen, sandboxLate bool
	// gates: the Pod was seen with scheduling gates (gated), then first without (removedSeen):
	// when the watch showed it (gatesRemovedAt) and the managedFields time and manager of the
	// write that removed them, when that write changed its manager's entry.
	gates gateState
	// nominated is status.nominatedNodeName as last seen before the bind, and when it was first
	// seen.
	nominated   string
	nominatedAt phases.Instant
	// victims are the Pods the scheduler preempted for this one (their Preempted events).
	victims []phases.PodRef
	// exported is set when its trace is exported, and it is no longer in flight.
	exported bool
}

// seenChanges is the receive time of each change, first seen. A Pod shows about a dozen (its
// conditions, and three or four per container), so a list walked costs less than a map made
// and grown for every Pod; every version of the Pod marks each change again. The times are
// Instants: a seenChange is 32 bytes, not 48, and the list is made once with room for a
// dozen and more (seenPerPod) rather than grown four times.
type seenChanges []seenChange

type seenChange struct {
	key change
	at  phases.Instant
}

// seenPerPod is the room made for a Pod's changes: eight for the Pod and its conditions, and
// four per container, for a Pod with two.
const seenPerPod = 16

// index is the change's place in the list, -1 if it was not seen.
func (sc seenChanges) index(key change) int {
	for i := range sc {
		if sc[i].key == key {
			return i
		}
	}
	return -1
}

// at is when the change was first seen, zero if it was not.
func (sc seenChanges) at(key change) time.Time {
	if i := sc.index(key); i >= 0 {
		return sc[i].at.Time()
	}
	return time.Time{}
}

// change is a change a watch event can show first: what changed and, for a condition or a
// container, which. A key of two parts, not one string joined, so that marking a change that was
// seen already allocates nothing: every version of every Pod marks each of them again.
type change struct {
	what podChange
	of   string // the condition type or container name, or ""
}

// podChange is what changed, for change.what: a number, so that telling two changes apart
// mostly compares no string.
type podChange uint8

const (
	seenNodeName podChange = iota
	seenStart              // status.startTime
	seenRunning            // phase Running
	seenCond               // a condition turned True
	seenCtrRun             // a container running or terminated
	seenStarted            // a container's startup probe passed
	seenReady              // a container ready
	seenDone               // a container exited 0
	seenRerun              // a container running again after a restart (of: name#restartCount)
)

func newPodState(p *corev1.Pod) *podState {
	ps := &podState{pod: p, dueIndex: -1}
	ps.created.Add(p.CreationTimestamp.Time, phases.SourceMetadata)
	for i := range p.ManagedFields {
		if f := &p.ManagedFields[i]; f.Operation == "Update" && f.Subresource == "" {
			ps.creator = f.Manager
			break
		}
	}
	return ps
}

func (ps *podState) mark(key change, at phases.Instant) {
	if ps.seen.index(key) >= 0 {
		return
	}
	if ps.seen == nil {
		ps.seen = make(seenChanges, 0, seenPerPod)
	}
	ps.seen = append(ps.seen, seenChange{key, at})
}

// gateState is what was seen of a Pod's scheduling gates.
type gateState struct {
	gated, removedSeen bool
	removedAt          phases.Instant // the receive time of the first version without gates
	removedMeta        phases.Instant // the remover's managedFields time (1 s)
	removedBy          string         // the remover's field manager
}

// maxNodeName bounds a node name kept from a Pod's status (the API allows 253 bytes).
const maxNodeName = 253

// update records which changes this version of the Pod shows for the first time.
func (ps *podState) update(p *corev1.Pod, recv time.Time) {
	prev := ps.pod
	ps.pod = p
	at := events.WallOf(recv) // once for the dozen changes this version may mark
	ps.gates.update(prev, p, at)
	if n := p.Status.NominatedNodeName; n != "" && p.Spec.NodeName == "" {
		if ps.nominated == "" {
			ps.nominatedAt = at
		}
		ps.nominated = n[:min(len(n), maxNodeName)]
	}
	if !ps.sandboxSeen && condTrue(p, corev1.PodReadyToStartContainers) {
		ps.sandboxSeen = true
		ps.sandboxLate = sandboxReportedLate(p)
	}
	if at.IsZero() { // a change seen is never marked at the zero time
		return
	}
	if p.Spec.NodeName != "" {
		ps.mark(change{what: seenNodeName}, at)
	}
	if p.Status.StartTime != nil {
		ps.mark(change{what: seenStart}, at)
	}
	if p.Status.Phase == corev1.PodRunning {
		ps.mark(change{what: seenRunning}, at)
	}
	for i := range p.Status.Conditions {
		if c := &p.Status.Conditions[i]; c.Status == corev1.ConditionTrue {
			ps.mark(change{seenCond, string(c.Type)}, at)
		}
	}
	for _, list := range [...][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for i := range list {
			cs := &list[i]
			if cs.State.Running != nil || cs.State.Terminated != nil {
				ps.mark(change{seenCtrRun, cs.Name}, at)
			}
			if cs.State.Running != nil && cs.RestartCount > 0 {
				ps.mark(change{seenRerun, rerunKey(cs.Name, cs.RestartCount)}, at)
			}
			if cs.Started != nil && *cs.Started {
				ps.mark(change{seenStarted, cs.Name}, at)
			}
			if cs.Ready {
				ps.mark(change{seenReady, cs.Name}, at)
			}
			if t := cs.State.Terminated; t != nil && t.ExitCode == 0 {
				ps.mark(change{seenDone, cs.Name}, at)
			}
		}
	}
}

// sandboxReportedLate reports whether the first version of a Pod showing
// PodReadyToStartContainers True shows a container already past its sandbox (started, ended, or
// waiting on its image or start) without the condition's second lying before that container's
// start: the kubelet did not report the sandbox ready before going on. Kubelets before 1.36 set
// the condition only with the containers' status; a newer one's report may also have been
// merged with the next by the time the watch saw it. Either way the condition then states no
// more than an upper bound of the sandbox ready.
func sandboxReportedLate(p *corev1.Pod) bool {
	cond := objects.Condition(p, corev1.PodReadyToStartContainers)
	if cond == nil {
		return false
	}
	for _, list := range [...][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for i := range list {
			st := &list[i].State
			switch {
			case st.Running != nil:
				if !cond.LastTransitionTime.Before(&st.Running.StartedAt) {
					return true
				}
			case st.Terminated != nil:
				if !cond.LastTransitionTime.Before(&st.Terminated.StartedAt) {
					return true
				}
			case st.Waiting != nil && st.Waiting.Reason != "" && st.Waiting.Reason != "ContainerCreating" && st.Waiting.Reason != "PodInitializing":
				return true // waiting on its image or its start: nothing dates it against the condition
			}
		}
	}
	return false
}

// update follows the gates from one version of the Pod (prev) to the next (p), received at.
func (g *gateState) update(prev, p *corev1.Pod, at phases.Instant) {
	if len(p.Spec.SchedulingGates) > 0 {
		g.gated = true
		return
	}
	if !g.gated || g.removedSeen {
		return
	}
	g.removedSeen, g.removedAt = true, at
	if prev != p {
		g.removedBy, g.removedMeta = changedManager(prev, p)
	}
}

// changedManager is the field manager whose managedFields entry the write that made cur from
// prev changed (a new entry or a later time), and that time; "" when none did. An Update changes
// its manager's time only when it set a field: a write that only removed fields (a gate) leaves
// every entry as it was, and then nothing says who made it or when.
func changedManager(prev, cur *corev1.Pod) (string, phases.Instant) {
	var by string
	var at phases.Instant
	for i := range cur.ManagedFields {
		f := &cur.ManagedFields[i]
		if f.Subresource != "" || f.Time == nil {
			continue
		}
		var before *metav1.Time
		for j := range prev.ManagedFields {
			if g := &prev.ManagedFields[j]; g.Manager == f.Manager && g.Operation == f.Operation && g.Subresource == f.Subresource {
				before = g.Time
			}
		}
		if before != nil && !f.Time.After(before.Time) {
			continue
		}
		if t := events.WallOf(f.Time.Time); t > at {
			by, at = f.Manager, t
		}
	}
	return by[:min(len(by), maxManager)], at
}

// maxManager bounds a field manager's name kept (the API allows 128 bytes).
const maxManager = 128

// rerunKey is the seen-change key of a container's run after its n-th restart.
func rerunKey(name string, n int32) string { return name + "#" + strconv.Itoa(int(n)) }

// latestRerun is when a watch first showed the container's latest run after a restart, at most
// its restart count now (0 if none was seen running).
func (ps *podState) latestRerun(name string, restarts int32) time.Time {
	for n := restarts; n > 0; n-- {
		if at := ps.seen.at(change{seenRerun, rerunKey(name, n)}); !at.IsZero() {
			return at
		}
	}
	return time.Time{}
}

func (ps *podState) addEvent(e *events.Event) {
	for i, prev := range ps.events {
		if prev.UID == e.UID {
			e.Recv = prev.Recv // the first version's receive time is when it happened
			if e.Count < prev.Count {
				return // an older version delivered late
			}
			e.At = e.When().At
			ps.events[i] = e
			return
		}
	}
	e.At = e.When().At
	if ps.events == nil {
		ps.events = make([]*events.Event, 0, eventsPerPod) // grown once, not at 1, 2, 4 and 8
	}
	ps.events = append(ps.events, e)
}

// eventsPerPod is the room made for a Pod's events: a startup has about a dozen (Scheduled, and
// Pulling, Pulled, Created and Started for each container).
const eventsPerPod = 16

// condTimes returns the observations of a condition turning True: its lastTransitionTime and
// the receive time of the watch event that first showed it.
func (ps *podState) condTimes(t corev1.PodConditionType) phases.Times {
	out := make(phases.Times, 0, 2)
	if c := objects.Condition(ps.pod, t); c != nil && c.Status == corev1.ConditionTrue {
		out.Add(c.LastTransitionTime.Time, phases.SourceStatus)
	}
	out.Add(ps.seen.at(change{seenCond, string(t)}), phases.SourceWatch)
	if len(out) == 0 {
		return nil // as observed: nothing
	}
	return out
}

// failureReasons are container waiting reasons that do not go away by themselves
// (phases.FailureReasons, which the failed-startups counter's reason label also uses).
var failureReasons = func() map[string]bool {
	m := make(map[string]bool, len(phases.FailureReasons))
	for _, r := range phases.FailureReasons {
		m[r] = true
	}
	return m
}()

var pullReasons = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true, "ErrImageNeverPull": true,
	"RegistryUnavailable": true, "SignatureValidationFailed": true, "ImageInspectError": true,
}

// pullAttemptErrors are the kubelet's errors for a pull it attempted and that failed. The other
// pull reasons fail before any pull (InvalidImageName, ErrImageNeverPull, ImageInspectError) or
// wait between attempts (ImagePullBackOff).
var pullAttemptErrors = map[string]bool{"ErrImagePull": true, "RegistryUnavailable": true, "SignatureValidationFailed": true}

// countFailedPulls sets each container's FailedPulls from its events. For every pull attempt
// that fails, the v1.37 kubelet records two Warning events with reason Failed on the container:
// `Failed to pull image "IMG": <error>` from its image manager, then `Error: ErrImagePull` (or
// RegistryUnavailable, SignatureValidationFailed) when the container cannot be created. Repeats
// of one message are merged into one Event whose count says how often it happened, so the counts
// of either kind add up to the attempts; the larger sum is used, since either kind can be lost.
// Back-off waits (`Back-off pulling image "IMG"`, `Error: ImagePullBackOff`) are not attempts.
func countFailedPulls(obs *phases.Pod, idx containerIndex, evs []*events.Event) {
	var pulls, errs []int // per container: "Failed to pull image" events, "Error: ErrImagePull" and the like
	for _, e := range evs {
		if e.Reason != "Failed" {
			continue
		}
		name, _, ok := events.ContainerFromFieldPath(e.Regarding.FieldPath)
		i, known := idx.of(name)
		if !ok || !known {
			continue
		}
		if pulls == nil {
			pulls, errs = make([]int, len(obs.Containers)), make([]int, len(obs.Containers))
		}
		n := int(max(e.Count, 1))
		msg := strings.TrimPrefix(e.Message, events.CombinedPrefix)
		switch {
		case strings.HasPrefix(msg, "Failed to pull image "):
			pulls[i] += n
		case strings.HasPrefix(msg, "Error: ") && pullAttemptErrors[strings.TrimPrefix(msg, "Error: ")]:
			errs[i] += n
		}
	}
	if pulls == nil {
		return // no failed attempt: FailedPulls stays 0
	}
	for i := range obs.Containers {
		obs.Containers[i].FailedPulls = max(pulls[i], errs[i])
	}
}

// failure returns the persistent failure the Pod's status shows now, if any.
func failure(p *corev1.Pod) string {
	for _, list := range [...][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for i := range list {
			if w := list[i].State.Waiting; w != nil && failureReasons[w.Reason] {
				return w.Reason
			}
		}
	}
	return ""
}

// stuckReason is why a Pod stuck past --stuck-after was waiting: its containers' failure, or,
// not yet bound, the PodScheduled condition's reason (SchedulingGated: a gate nobody removed;
// Unschedulable: no node fits and none was added).
func stuckReason(ps *podState) string {
	if ps.failureReason != "" || ps.pod.Spec.NodeName != "" {
		return ps.failureReason
	}
	if cond := objects.Condition(ps.pod, corev1.PodScheduled); cond != nil && cond.Status == corev1.ConditionFalse {
		return cond.Reason[:min(len(cond.Reason), maxReason)]
	}
	return ""
}

// maxReason bounds a condition's reason kept (the API allows 1,024 bytes; the known ones are
// a word).
const maxReason = 128

// observe assembles what was observed of the Pod for phases.Build.
func (c *Correlator) observe(ps *podState) *phases.Pod {
	p := ps.pod
	obs := &phases.Pod{
		UID:       string(p.UID),
		Name:      p.Name,
		Namespace: p.Namespace,
		Node:      p.Spec.NodeName,
		Created:   append(phases.Times(nil), ps.created...),
	}
	if e := ps.createdEvent; e != nil {
		obs.Created.Add(e.NameTime.Time(), phases.SourceEventName)
	}
	c.rootOf(ps, obs)
	if obs.Root == phases.RootBarePod {
		obs.RootPersisted = obs.Created
	}
	obs.Workload = workloadOf(&p.ObjectMeta, obs.Controllers)

	c.observeScheduling(ps, obs)
	observeStatus(ps, obs)
	c.observeContainers(ps, obs)
	c.claimsOf(p, obs)

	// Endpoints.
	obs.HasService = c.hasService(ps)
	if t, ok := c.endpointReady[p.UID]; ok {
		obs.EndpointsReady = t
	}
	if !ps.deletedAt.IsZero() {
		obs.Deleted.Add(ps.deletedAt, phases.SourceWatch)
	}
	return obs
}

// observeScheduling: the scheduling gates, the node nominated, the node the Pod waited for,
// its victims.
func (c *Correlator) observeScheduling(ps *podState, obs *phases.Pod) {
	if g := &ps.gates; g.gated {
		obs.Gated = true
		obs.GatesRemoved.AddInstant(g.removedAt, phases.SourceWatch)
		obs.GatesRemoved.AddInstant(g.removedMeta, phases.SourceMetadata)
		obs.GatesRemovedBy = g.removedBy
	}
	if ps.nominated != "" {
		obs.NominatedNode = ps.nominated
		obs.NominatedAt.AddInstant(ps.nominatedAt, phases.SourceWatch)
	}
	obs.NewNode = c.newNode(ps)
	obs.Victims = ps.victims
}

// observeStatus: the Pod's conditions, with the receive time of the version that first showed
// them.
func observeStatus(ps *podState, obs *phases.Pod) {
	p := ps.pod
	if cond := objects.Condition(p, corev1.PodScheduled); cond != nil && cond.Status == corev1.ConditionTrue {
		obs.Scheduled.Add(cond.LastTransitionTime.Time, phases.SourceStatus)
	}
	obs.Scheduled.Add(ps.seen.at(change{what: seenNodeName}), phases.SourceWatch)
	if p.Status.StartTime != nil {
		obs.KubeletStarted.Add(p.Status.StartTime.Time, phases.SourceStatus)
	}
	obs.KubeletStarted.Add(ps.seen.at(change{what: seenStart}), phases.SourceWatch)
	obs.SandboxReady = ps.condTimes(corev1.PodReadyToStartContainers)
	obs.SandboxReadyLate = ps.sandboxLate
	obs.Initialized = ps.condTimes(corev1.PodInitialized)
	obs.ContainersReady = ps.condTimes(corev1.ContainersReady)
	obs.Ready = ps.condTimes(corev1.PodReady)
	obs.Running.Add(ps.seen.at(change{what: seenRunning}), phases.SourceWatch)
	if cond := objects.Condition(p, corev1.PodScheduled); cond != nil && cond.Status == corev1.ConditionFalse && cond.Message != "" &&
		cond.Reason != corev1.PodReasonSchedulingGated { // the apiserver's, at creation: no attempt
		// The scheduler's own record of the last failed attempt, kept in case its events are lost.
		obs.SchedulingFailure = append(obs.SchedulingFailure, phases.Occurrence{
			Time: phases.Stamp{At: phases.InstantOf(cond.LastTransitionTime.Time), Source: phases.SourceStatus}, Reason: cond.Reason, Message: cond.Message, Count: 1,
		})
	}

}

// observeContainers: the containers from the spec, their statuses, then the Pod's Events, and
// what the status shows failed where no event said so.
func (c *Correlator) observeContainers(ps *podState, obs *phases.Pod) {
	p := ps.pod
	var statusFailures []statusFailure
	if n := len(p.Spec.InitContainers) + len(p.Spec.Containers); n > 0 {
		obs.Containers = make([]phases.Container, 0, n)
	}
	for i := range p.Spec.InitContainers {
		obs.Containers = append(obs.Containers, containerFromSpec(&p.Spec.InitContainers[i], true))
	}
	for i := range p.Spec.Containers {
		obs.Containers = append(obs.Containers, containerFromSpec(&p.Spec.Containers[i], false))
	}
	idx := containerIndex(obs.Containers)
	for _, list := range [...][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for j := range list {
			cs := &list[j]
			i, ok := idx.of(cs.Name)
			if !ok {
				continue
			}
			if f, pull := ps.containerStatus(&obs.Containers[i], cs); f != nil {
				statusFailures = append(statusFailures, statusFailure{*f, pull, i})
			}
		}
	}

	evs := ps.eventsInOrder()
	for _, e := range evs {
		if !applyEvent(obs, idx, e) {
			c.unparsed(e)
		}
	}
	countFailedPulls(obs, idx, evs)
	if obs.PreemptedBy != nil {
		c.preemptorOf(obs.PreemptedBy)
	}
	// A failure the status shows but no event reported (events lost or expired).
	for _, f := range statusFailures {
		c := &obs.Containers[f.container]
		if f.pull && len(c.PullFailures) == 0 {
			c.PullFailures = append(c.PullFailures, f.o)
		} else if !f.pull && len(c.Failures) == 0 {
			c.Failures = append(c.Failures, f.o)
		}
		if f.pull && c.FailedPulls == 0 && (pullAttemptErrors[f.o.Reason] || f.o.Reason == "ImagePullBackOff") {
			c.FailedPulls = 1 // the status shows that at least one attempt failed
		}
	}
}

// workloadOf names the workload a Pod belongs to (phases.Pod.Workload): the outermost of the
// chain the correlator found (a ReplicaSet's Deployment, a Job's CronJob, whose names last
// across rollouts and runs), else, for a ReplicaSet's Pod, the ReplicaSet's name without the
// pod-template-hash the deployment controller appends (its Deployment's name, known from the Pod
// alone, before or without the ReplicaSet), else its controller's name; "" for a bare Pod.
func workloadOf(m *metav1.ObjectMeta, chain []phases.Controller) string {
	if len(chain) > 1 {
		return chain[0].Name
	}
	owner := objects.ControllerOf(m)
	if owner == nil {
		return ""
	}
	if owner.Kind != "ReplicaSet" {
		return owner.Name
	}
	for _, k := range byIndex { // the registry, as init made it (kinds would be a cycle)
		if hash := m.Labels[k.TemplateHashLabel]; k.TemplateHashLabel != "" && hash != "" {
			if name, ok := strings.CutSuffix(owner.Name, "-"+hash); ok && name != "" {
				return name
			}
		}
	}
	return owner.Name
}

// eventsInOrder puts the Pod's events in the order they happened, by when they first happened
// (resolved once, when each was added) and then by resourceVersion, and returns them. They are
// sorted where they are kept: they mostly arrive in that order, and nothing else reads it.
func (ps *podState) eventsInOrder() []*events.Event {
	slices.SortFunc(ps.events, func(a, b *events.Event) int {
		if c := cmp.Compare(a.At, b.At); c != 0 {
			return c
		}
		return rvCompare(a.RV, b.RV)
	})
	return ps.events
}

// rvCompare is rvLess as a comparison, for sorting.
func rvCompare(a, b string) int {
	if len(a) != len(b) {
		return cmp.Compare(len(a), len(b))
	}
	return strings.Compare(a, b)
}

// rvLess orders resourceVersions: etcd revisions, compared as numbers when both are.
func rvLess(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

func containerFromSpec(ct *corev1.Container, init bool) phases.Container {
	c := phases.Container{
		Name:              ct.Name,
		Image:             ct.Image,
		Init:              init,
		Sidecar:           init && ct.RestartPolicy != nil && *ct.RestartPolicy == corev1.ContainerRestartPolicyAlways,
		HasPostStart:      ct.Lifecycle != nil && ct.Lifecycle.PostStart != nil,
		HasStartupProbe:   ct.StartupProbe != nil,
		HasReadinessProbe: ct.ReadinessProbe != nil,
	}
	return c
}

type statusFailure struct {
	o         phases.Occurrence
	pull      bool
	container int // index into the observation's containers
}

// containerIndex finds a container of an observation by name. A Pod has a few containers, so a
// walk beats a map built for every trace.
type containerIndex []phases.Container

func (ci containerIndex) of(name string) (int, bool) {
	for i := range ci {
		if ci[i].Name == name {
			return i, true
		}
	}
	return -1, false
}

// containerStatus folds a container status into the observation and returns the persistent
// failure it shows, if any, and whether it is a pull failure.
func (ps *podState) containerStatus(c *phases.Container, cs *corev1.ContainerStatus) (*phases.Occurrence, bool) {
	c.Restarts = cs.RestartCount
	// The first start is the one startup is about: a restarted container's first run is in
	// lastState, or gone; events keep the first Started.
	if r := cs.State.Running; r != nil && cs.RestartCount == 0 {
		c.Started.Add(r.StartedAt.Time, phases.SourceStatus)
	}
	if t := cs.State.Terminated; t != nil {
		if cs.RestartCount == 0 {
			c.Started.Add(t.StartedAt.Time, phases.SourceStatus)
		}
		if t.ExitCode == 0 {
			c.Finished.Add(t.FinishedAt.Time, phases.SourceStatus)
		}
	}
	if cs.RestartCount == 0 {
		if c.HasPostStart {
			// The kubelet reports a container running (or terminated) only once its postStart
			// hook has returned: the first such status bounds the hook's end, not the start.
			c.PostStartDone.Add(ps.seen.at(change{seenCtrRun, cs.Name}), phases.SourceWatch)
		} else {
			c.Started.Add(ps.seen.at(change{seenCtrRun, cs.Name}), phases.SourceWatch)
		}
	}
	if cs.RestartCount > 0 {
		// The latest run after a restart: its start as the runtime states it while it runs,
		// and the first watch that showed it running, kept after it stopped again.
		if r := cs.State.Running; r != nil {
			c.Restarted.Add(r.StartedAt.Time, phases.SourceStatus)
		}
		c.Restarted.Add(ps.latestRerun(cs.Name, cs.RestartCount), phases.SourceWatch)
	}
	c.Finished.Add(ps.seen.at(change{seenDone, cs.Name}), phases.SourceWatch)
	if cs.Ready {
		c.ReadyAt.Add(ps.seen.at(change{seenReady, cs.Name}), phases.SourceWatch)
	}
	if cs.Started != nil && *cs.Started {
		c.StartupDone.Add(ps.seen.at(change{seenStarted, cs.Name}), phases.SourceWatch)
	}
	if w := cs.State.Waiting; w != nil && failureReasons[w.Reason] {
		o := phases.Occurrence{Time: phases.Stamp{At: phases.InstantOf(ps.firstFailure), Source: phases.SourceWatch}, Reason: w.Reason, Message: w.Message}
		if ps.firstFailure.IsZero() {
			o.Time = phases.Stamp{}
		}
		return &o, pullReasons[w.Reason]
	}
	return nil, false
}

// applyEvent folds one Event about the Pod into the observation. It returns false when the
// message is in a format it does not know; the event is still kept as an occurrence where its
// reason says so, but nothing is read from its message.
func applyEvent(obs *phases.Pod, idx containerIndex, e *events.Event) bool {
	var c *phases.Container
	if name, _, ok := events.ContainerFromFieldPath(e.Regarding.FieldPath); ok {
		if i, ok := idx.of(name); ok {
			c = &obs.Containers[i]
		}
	}
	switch e.Reason {
	case "Scheduled":
		e.FirstStamps(&obs.Scheduled)
		return true
	case "FailedScheduling":
		// The scheduler's status condition duplicates the last attempt; events are better.
		obs.SchedulingFailure = dropStatusOccurrences(obs.SchedulingFailure)
		obs.SchedulingFailure = append(obs.SchedulingFailure, e.Occurrence())
		return true
	case "Preempted":
		obs.Preempted = append(obs.Preempted, e.Occurrence())
		uid, ok := events.ParsePreemptedMessage(e.Message)
		if ok && obs.PreemptedBy == nil {
			obs.PreemptedBy = &phases.PodRef{UID: uid}
		}
		return ok
	case "TriggeredScaleUp", "NotTriggerScaleUp", "Nominated":
		// A node autoscaler's: cluster-autoscaler's, Karpenter's.
		obs.Autoscaler = append(obs.Autoscaler, e.Occurrence())
		return true
	}
	if c == nil {
		// About the Pod, no container: its volumes', or a warning of the kubelet phase.
		if volumeEventReasons[e.Reason] {
			obs.VolumeEvents = append(obs.VolumeEvents, e.Occurrence())
			return true
		}
		if e.Type == corev1.EventTypeWarning {
			obs.PodWarnings = append(obs.PodWarnings, e.Occurrence())
		}
		return true
	}
	return applyContainerEvent(c, e)
}

// applyContainerEvent folds an Event about one of the Pod's containers into it; false as for
// applyEvent.
func applyContainerEvent(c *phases.Container, e *events.Event) bool {
	switch e.Reason {
	case "Pulling":
		e.FirstStamps(&c.PullStarted)
	case "Pulled":
		return applyPulled(c, e)
	case "Created":
		e.FirstStamps(&c.Created)
	case "Started":
		e.FirstStamps(&c.Started)
	case "Failed":
		reason := strings.TrimPrefix(e.Message, "Error: ")
		switch {
		case strings.HasPrefix(e.Message, "Failed to pull image"):
			c.PullFailures = append(c.PullFailures, occ(e, "ErrImagePull"))
		case pullReasons[reason]:
			c.PullFailures = append(c.PullFailures, occ(e, reason))
		default:
			c.Failures = append(c.Failures, occ(e, "Failed"))
			return events.KnownFailedMessage(e.Message)
		}
	case "BackOff":
		if strings.HasPrefix(e.Message, "Back-off pulling image") {
			c.PullFailures = append(c.PullFailures, occ(e, "ImagePullBackOff"))
		} else {
			c.Failures = append(c.Failures, occ(e, "CrashLoopBackOff"))
			return strings.HasPrefix(e.Message, "Back-off restarting failed container ")
		}
	case "Unhealthy", "ProbeWarning":
		c.Unhealthy = append(c.Unhealthy, e.Occurrence())
	case "FailedPostStartHook":
		// Emitted as soon as the hook returned an error, before the container is killed.
		e.FirstStamps(&c.PostStartDone)
		c.Failures = append(c.Failures, e.Occurrence())
	case "ErrImageNeverPull", "InspectFailed":
		c.Failures = append(c.Failures, e.Occurrence())
	case "Killing":
		// A kill that restarts the container: a failed probe (`Container app failed liveness
		// probe, will be restarted`) or hook (`FailedPostStartHook`); not a Pod being stopped.
		if strings.Contains(e.Message, "failed") || e.Message == "FailedPostStartHook" {
			c.Failures = append(c.Failures, e.Occurrence())
		}
	}
	return true
}

// applyPulled reads the kubelet's Pulled event: the image present (a warm start) or pulled, with
// the times and size it states; the first pull is the startup's.
func applyPulled(c *phases.Container, e *events.Event) bool {
	m, err := events.ParsePulledMessage(e.Message)
	if err != nil {
		e.FirstStamps(&c.PullFinished)
		return false
	}
	if m.Present {
		if c.Cache == "" {
			c.Cache = "warm"
		}
		if !c.PullFinished.Known() {
			e.FirstStamps(&c.PullFinished)
		}
		return true
	}
	if c.Cache == "cold" {
		return true // a later pull (after a restart); startup is about the first
	}
	c.Cache = "cold"
	c.PullFinished = nil
	e.FirstStamps(&c.PullFinished)
	c.PullTransfer, c.PullTotal, c.ImageSize = m.Transfer, m.Total, m.Size
	if m.Image != "" {
		c.Image = m.Image
	}
	return true
}

// volumeEventReasons are the events about a Pod's volumes (phases.Pod.VolumeEvents): the
// attach/detach controller's attach, the kubelet's failed mounts (and its own attach, when the
// controller's attach/detach is off).
var volumeEventReasons = map[string]bool{
	"SuccessfulAttachVolume": true, phases.VolumeFailedAttach: true,
	phases.VolumeFailedMount: true, phases.VolumeFailedMap: true,
}

// volumeFailure is the volume failure an event about a Pod reports, "" for none.
func volumeFailure(e *events.Event) string {
	if e.Type == corev1.EventTypeWarning && phases.IsVolumeFailure(e.Reason) {
		return e.Reason
	}
	return ""
}

func occ(e *events.Event, reason string) phases.Occurrence {
	o := e.Occurrence()
	o.Reason = reason
	return o
}

func dropStatusOccurrences(os []phases.Occurrence) []phases.Occurrence {
	out := os[:0]
	for _, o := range os {
		if o.Time.Source != phases.SourceStatus {
			out = append(out, o)
		}
	}
	return out
}

// noteVolumeFailure starts the --fail-after clock at a volume failure received at recv, while
// the sandbox is not ready (the volumes are mounted before it is made) and no other failure
// runs it. The failure lasts until the sandbox is ready (handlePod).
func (ps *podState) noteVolumeFailure(e *events.Event, recv time.Time) {
	f := volumeFailure(e)
	if f == "" || recv.IsZero() || ps.failureReason != "" || condTrue(ps.pod, corev1.PodReadyToStartContainers) {
		return
	}
	ps.failureReason, ps.firstFailure = f, recv
}

// podKind is the registry entry of Pods (kinds.go).
var podKind = &kind{
	Kind: &watch.Kind{
		Resource: ResourcePods, Stream: StreamPods, Kind: "Pod",
		GVR:       corev1.SchemeGroupVersion.WithResource("pods"),
		NewObject: func() runtime.Object { return &corev1.Pod{} },
		NewList:   func() runtime.Object { return &corev1.PodList{} },
		ListWatch: func(c kubernetes.Interface, ns string, cfg watch.Config) (watch.ListFunc, watch.WatchFunc) {
			pods := c.CoreV1().Pods(ns)
			return func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
					o.LabelSelector = cfg.Selector // Pods only: owners, events and endpoints are needed whole
					return pods.List(ctx, o)
				}, func(ctx context.Context, o metav1.ListOptions) (apiwatch.Interface, error) {
					o.LabelSelector = cfg.Selector
					return pods.Watch(ctx, o)
				}
		},
		Transform:     func(o runtime.Object) { slimPod(o.(*corev1.Pod)) },
		KeepsIdentity: true,
		// A bare Pod's creation is the root request of its chain.
		Audit: &watch.AuditedWrites{Verbs: []string{"create"}},
		// A Pod deleted while the watch was down still names its node.
		Identity: func(from, kept runtime.Object) {
			kept.(*corev1.Pod).Spec.NodeName = from.(*corev1.Pod).Spec.NodeName
		},
		Snapshot: watch.SnapshotPods, Verbs: watch.ReadVerbs,
		Explain: []string{"pod", "pods", "po"},
		Get: func(ctx context.Context, c kubernetes.Interface, ns, name string) (metav1.Object, error) {
			return c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		},
	},
	handle:  func(c *Correlator, d watch.Delta) { c.handlePod(&d, d.Object.(*corev1.Pod)) },
	rollout: func(r *tracker.Tracker, d watch.Delta) { r.HandlePod(&d, d.Object.(*corev1.Pod)) },
}

// slimPod keeps of a Pod what the correlator reads: no annotations, no env, args or commands
// (never copied into spans), no volume contents.
func slimPod(o *corev1.Pod) {
	o.Annotations = nil
	slimContainers(o.Spec.InitContainers)
	slimContainers(o.Spec.Containers)
	o.Spec.EphemeralContainers = nil
	for i := range o.Spec.Volumes {
		o.Spec.Volumes[i].VolumeSource = slimVolume(o.Spec.Volumes[i].VolumeSource)
	}
	o.Spec.Affinity, o.Spec.Tolerations, o.Spec.ImagePullSecrets = nil, nil, nil
	for _, list := range [][]corev1.ContainerStatus{o.Status.InitContainerStatuses, o.Status.ContainerStatuses} {
		for i := range list {
			list[i].VolumeMounts, list[i].Resources, list[i].AllocatedResources, list[i].User = nil, nil, nil, nil
		}
	}
}

func slimContainers(cs []corev1.Container) {
	for i := range cs {
		c := &cs[i]
		keep := corev1.Container{Name: c.Name, Image: c.Image, RestartPolicy: c.RestartPolicy}
		if c.ReadinessProbe != nil {
			keep.ReadinessProbe = &corev1.Probe{}
		}
		if c.StartupProbe != nil {
			keep.StartupProbe = &corev1.Probe{}
		}
		if c.LivenessProbe != nil {
			keep.LivenessProbe = &corev1.Probe{}
		}
		if c.Lifecycle != nil && (c.Lifecycle.PostStart != nil || c.Lifecycle.PreStop != nil) {
			keep.Lifecycle = &corev1.Lifecycle{}
			if c.Lifecycle.PostStart != nil {
				keep.Lifecycle.PostStart = &corev1.LifecycleHandler{}
			}
			if c.Lifecycle.PreStop != nil {
				keep.Lifecycle.PreStop = &corev1.LifecycleHandler{} // rollouts say whether a preStop hook ran
			}
		}
		*c = keep
	}
}

// slimVolume keeps only the kind of a volume (the SLI excludes "stateful" kinds) and a claim's name.
func slimVolume(v corev1.VolumeSource) corev1.VolumeSource {
	var out corev1.VolumeSource
	switch {
	case v.Secret != nil:
		out.Secret = &corev1.SecretVolumeSource{}
	case v.ConfigMap != nil:
		out.ConfigMap = &corev1.ConfigMapVolumeSource{}
	case v.DownwardAPI != nil:
		out.DownwardAPI = &corev1.DownwardAPIVolumeSource{}
	case v.EmptyDir != nil:
		out.EmptyDir = &corev1.EmptyDirVolumeSource{}
	case v.Projected != nil:
		out.Projected = &corev1.ProjectedVolumeSource{}
	case v.PersistentVolumeClaim != nil:
		// Its claim, whose binding the Pod may wait for (claims.go).
		out.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: v.PersistentVolumeClaim.ClaimName}
	case v.Ephemeral != nil:
		out.Ephemeral = &corev1.EphemeralVolumeSource{} // its claim is named after the Pod and the volume
	default:
		out.HostPath = &corev1.HostPathVolumeSource{} // any other kind: stateful
	}
	return out
}
