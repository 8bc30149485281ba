package pod

import (
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/readyspan/readyspan/events"
	"github.com/readyspan/readyspan/objects"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/watch"
)

// State is what readyspan holds of one in-flight Pod: its last version and Events, and when
// the watch first showed each change. It is fed only through Apply and AddEvent, and read
// through Observe and a few accessors.
type State struct {
	pod     *corev1.Pod // last seen version (after the informer transform)
	creator string      // field manager that created the Pod
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
	readyAt       time.Time     // local time Ready was first seen, for the endpoints wait
	deletedAt     time.Time     // local time the deletion was first seen
	createdEvent  *events.Event // its controller's SuccessfulCreate, naming the create's time
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

// New starts the state of a Pod first seen in d.
func New(d *watch.Delta, p *corev1.Pod) State {
	s := State{pod: p}
	s.created.Add(p.CreationTimestamp.Time, phases.SourceMetadata)
	if d.Type == watch.Added {
		s.created.Add(d.WatchTime(), phases.SourceWatch)
	}
	for i := range p.ManagedFields {
		if f := &p.ManagedFields[i]; f.Operation == "Update" && f.Subresource == "" {
			s.creator = f.Manager
			break
		}
	}
	return s
}

// Apply folds in a version of the Pod that d delivered: the changes it shows first, and the
// clocks a failure, Ready and the deletion start.
func (s *State) Apply(d *watch.Delta, p *corev1.Pod) {
	s.update(p, d.WatchTime())
	if phases.IsVolumeFailure(s.failureReason) && objects.ConditionTrue(p, corev1.PodReadyToStartContainers) {
		// The volumes mounted: the sandbox is made only once they are. A container's failure
		// shown in the same version starts its own clock below.
		s.firstFailure, s.failureReason = time.Time{}, ""
	}
	ready := objects.IsReady(p)
	if f := failure(p); f != "" {
		if s.failureReason == "" {
			s.firstFailure, s.failureReason = d.Recv, f
		}
	} else if s.failureReason != "" && ready {
		s.firstFailure, s.failureReason = time.Time{}, ""
	}
	if ready && s.readyAt.IsZero() {
		s.readyAt = d.Recv
	}
	if (d.Type == watch.Deleted || p.DeletionTimestamp != nil) && s.deletedAt.IsZero() {
		s.deletedAt = d.Recv
		if d.Recv.IsZero() && p.DeletionTimestamp != nil {
			s.deletedAt = p.DeletionTimestamp.Time
		}
	}
}

// Pod is the Pod's last version seen.
func (s *State) Pod() *corev1.Pod { return s.pod }

// Creator is the field manager that created the Pod.
func (s *State) Creator() string { return s.creator }

// Created is the Pod's creation as its metadata and the watch show it.
func (s *State) Created() phases.Times { return s.created }

// CreatedBy keeps the controller's SuccessfulCreate Event for the Pod, whose name dates the
// create more finely than the Pod's metadata.
func (s *State) CreatedBy(e *events.Event) { s.createdEvent = e }

// Failure is the persistent failure the Pod shows, "" for none, and when it was first seen.
func (s *State) Failure() (reason string, since time.Time) { return s.failureReason, s.firstFailure }

// ReadyAt is when Ready was first seen (local time), zero if it was not.
func (s *State) ReadyAt() time.Time { return s.readyAt }

// DeletedAt is when the deletion was first seen (local time), zero if it was not.
func (s *State) DeletedAt() time.Time { return s.deletedAt }

// AddVictim adds a Pod the scheduler preempted for this one, once, at most phases.MaxVictims;
// its strings, an Event's and so anyone's who may write Events, bounded as the API bounds a Pod's.
func (s *State) AddVictim(ref phases.PodRef) {
	if len(s.victims) >= phases.MaxVictims {
		return
	}
	ref.Namespace, ref.Name, ref.UID = ref.Namespace[:min(len(ref.Namespace), maxNodeName)], ref.Name[:min(len(ref.Name), maxNodeName)], ref.UID[:min(len(ref.UID), events.MaxUID)]
	for _, v := range s.victims {
		if v.UID == ref.UID {
			return
		}
	}
	s.victims = append(s.victims, ref)
}

// AwaitsPreempted reports whether the scheduler preempted the Pod (its DisruptionTarget
// condition says so) and its Preempted event has not arrived yet.
func (s *State) AwaitsPreempted() bool {
	cond := objects.Condition(s.pod, corev1.DisruptionTarget)
	if cond == nil || cond.Status != corev1.ConditionTrue || cond.Reason != corev1.PodReasonPreemptionByScheduler {
		return false
	}
	for _, e := range s.events {
		if e.Reason == "Preempted" {
			return false
		}
	}
	return true
}

func (s *State) mark(key change, at phases.Instant) {
	if s.seen.index(key) >= 0 {
		return
	}
	if s.seen == nil {
		s.seen = make(seenChanges, 0, seenPerPod)
	}
	s.seen = append(s.seen, seenChange{key, at})
}

// maxNodeName bounds a node name kept from a Pod's status (the API allows 253 bytes).
const maxNodeName = 253

// update records which changes this version of the Pod shows for the first time.
func (s *State) update(p *corev1.Pod, recv time.Time) {
	prev := s.pod
	s.pod = p
	at := events.WallOf(recv) // once for the dozen changes this version may mark
	s.gates.update(prev, p, at)
	if n := p.Status.NominatedNodeName; n != "" && p.Spec.NodeName == "" {
		if s.nominated == "" {
			s.nominatedAt = at
		}
		s.nominated = n[:min(len(n), maxNodeName)]
	}
	if !s.sandboxSeen && objects.ConditionTrue(p, corev1.PodReadyToStartContainers) {
		s.sandboxSeen = true
		s.sandboxLate = sandboxReportedLate(p)
	}
	if at.IsZero() { // a change seen is never marked at the zero time
		return
	}
	if p.Spec.NodeName != "" {
		s.mark(change{what: seenNodeName}, at)
	}
	if p.Status.StartTime != nil {
		s.mark(change{what: seenStart}, at)
	}
	if p.Status.Phase == corev1.PodRunning {
		s.mark(change{what: seenRunning}, at)
	}
	for i := range p.Status.Conditions {
		if c := &p.Status.Conditions[i]; c.Status == corev1.ConditionTrue {
			s.mark(change{seenCond, string(c.Type)}, at)
		}
	}
	for _, list := range [...][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for i := range list {
			cs := &list[i]
			if cs.State.Running != nil || cs.State.Terminated != nil {
				s.mark(change{seenCtrRun, cs.Name}, at)
			}
			if cs.State.Running != nil && cs.RestartCount > 0 {
				s.mark(change{seenRerun, rerunKey(cs.Name, cs.RestartCount)}, at)
			}
			if cs.Started != nil && *cs.Started {
				s.mark(change{seenStarted, cs.Name}, at)
			}
			if cs.Ready {
				s.mark(change{seenReady, cs.Name}, at)
			}
			if t := cs.State.Terminated; t != nil && t.ExitCode == 0 {
				s.mark(change{seenDone, cs.Name}, at)
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

// rerunKey is the seen-change key of a container's run after its n-th restart.
func rerunKey(name string, n int32) string { return name + "#" + strconv.Itoa(int(n)) }

// latestRerun is when a watch first showed the container's latest run after a restart, at most
// its restart count now (0 if none was seen running).
func (s *State) latestRerun(name string, restarts int32) time.Time {
	for n := restarts; n > 0; n-- {
		if at := s.seen.at(change{seenRerun, rerunKey(name, n)}); !at.IsZero() {
			return at
		}
	}
	return time.Time{}
}
