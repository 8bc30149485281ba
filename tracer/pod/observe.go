package pod

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/readyspan/readyspan/events"
	"github.com/readyspan/readyspan/objects"
	"github.com/readyspan/readyspan/phases"
)

// condTimes returns the observations of a condition turning True: its lastTransitionTime and
// the receive time of the watch event that first showed it.
func (s *State) condTimes(t corev1.PodConditionType) phases.Times {
	out := make(phases.Times, 0, 2)
	if c := objects.Condition(s.pod, t); c != nil && c.Status == corev1.ConditionTrue {
		out.Add(c.LastTransitionTime.Time, phases.SourceStatus)
	}
	out.Add(s.seen.at(change{seenCond, string(t)}), phases.SourceWatch)
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

// StuckReason is why a Pod stuck past --stuck-after was waiting: its containers' failure, or,
// not yet bound, the PodScheduled condition's reason (SchedulingGated: a gate nobody removed;
// Unschedulable: no node fits and none was added).
func (s *State) StuckReason() string {
	if s.failureReason != "" || s.pod.Spec.NodeName != "" {
		return s.failureReason
	}
	if cond := objects.Condition(s.pod, corev1.PodScheduled); cond != nil && cond.Status == corev1.ConditionFalse {
		return cond.Reason[:min(len(cond.Reason), maxReason)]
	}
	return ""
}

// maxReason bounds a condition's reason kept (the API allows 1,024 bytes; the known ones are
// a word).
const maxReason = 128

// Observe is what the Pod and its Events show of its startup, for phases.Build: its identity and
// creation, its scheduling gates, nomination and victims, its conditions, its containers and the
// Events about them, its deletion. What other objects say (its controllers, the node it waited
// for, its claims, its Services' endpoints, its preemptor's name) is the correlator's to add.
// unparsed is told of each Event whose message is in a format readyspan does not know.
func (s *State) Observe(unparsed func(*events.Event)) *phases.Pod {
	p := s.pod
	obs := &phases.Pod{
		UID:       string(p.UID),
		Name:      p.Name,
		Namespace: p.Namespace,
		Node:      p.Spec.NodeName,
		Created:   append(phases.Times(nil), s.created...),
		Addresses: objects.PodAddresses(p),
	}
	if e := s.createdEvent; e != nil {
		obs.Created.Add(e.NameTime.Time(), phases.SourceEventName)
	}
	s.observeScheduling(obs)
	s.observeStatus(obs)
	s.observeContainers(obs, unparsed)
	if !s.deletedAt.IsZero() {
		obs.Deleted.Add(s.deletedAt, phases.SourceWatch)
	}
	return obs
}

// observeScheduling: the scheduling gates, the node nominated, the victims.
func (s *State) observeScheduling(obs *phases.Pod) {
	if g := &s.gates; g.gated {
		obs.Gated = true
		obs.GatesRemoved.AddInstant(g.removedAt, phases.SourceWatch)
		obs.GatesRemoved.AddInstant(g.removedMeta, phases.SourceMetadata)
		obs.GatesRemovedBy = g.removedBy
	}
	if s.nominated != "" {
		obs.NominatedNode = s.nominated
		obs.NominatedAt.AddInstant(s.nominatedAt, phases.SourceWatch)
	}
	obs.Victims = s.victims
}

// observeStatus: the Pod's conditions, with the receive time of the version that first showed
// them.
func (s *State) observeStatus(obs *phases.Pod) {
	p := s.pod
	if cond := objects.Condition(p, corev1.PodScheduled); cond != nil && cond.Status == corev1.ConditionTrue {
		obs.Scheduled.Add(cond.LastTransitionTime.Time, phases.SourceStatus)
	}
	obs.Scheduled.Add(s.seen.at(change{what: seenNodeName}), phases.SourceWatch)
	if p.Status.StartTime != nil {
		obs.KubeletStarted.Add(p.Status.StartTime.Time, phases.SourceStatus)
	}
	obs.KubeletStarted.Add(s.seen.at(change{what: seenStart}), phases.SourceWatch)
	obs.SandboxReady = s.condTimes(corev1.PodReadyToStartContainers)
	obs.SandboxReadyLate = s.sandboxLate
	obs.Initialized = s.condTimes(corev1.PodInitialized)
	obs.ContainersReady = s.condTimes(corev1.ContainersReady)
	obs.Ready = s.condTimes(corev1.PodReady)
	obs.Running.Add(s.seen.at(change{what: seenRunning}), phases.SourceWatch)
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
func (s *State) observeContainers(obs *phases.Pod, unparsed func(*events.Event)) {
	p := s.pod
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
			if f, pull := s.containerStatus(&obs.Containers[i], cs); f != nil {
				statusFailures = append(statusFailures, statusFailure{*f, pull, i})
			}
		}
	}

	evs := s.eventsInOrder()
	for _, e := range evs {
		if !applyEvent(obs, idx, e) {
			unparsed(e)
		}
	}
	countFailedPulls(obs, idx, evs)
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

// containerFromSpec is a container as its Pod's spec declares it.
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
func (s *State) containerStatus(c *phases.Container, cs *corev1.ContainerStatus) (*phases.Occurrence, bool) {
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
			c.PostStartDone.Add(s.seen.at(change{seenCtrRun, cs.Name}), phases.SourceWatch)
		} else {
			c.Started.Add(s.seen.at(change{seenCtrRun, cs.Name}), phases.SourceWatch)
		}
	}
	if cs.RestartCount > 0 {
		// The latest run after a restart: its start as the runtime states it while it runs,
		// and the first watch that showed it running, kept after it stopped again.
		if r := cs.State.Running; r != nil {
			c.Restarted.Add(r.StartedAt.Time, phases.SourceStatus)
		}
		c.Restarted.Add(s.latestRerun(cs.Name, cs.RestartCount), phases.SourceWatch)
	}
	c.Finished.Add(s.seen.at(change{seenDone, cs.Name}), phases.SourceWatch)
	if cs.Ready {
		c.ReadyAt.Add(s.seen.at(change{seenReady, cs.Name}), phases.SourceWatch)
	}
	if cs.Started != nil && *cs.Started {
		c.StartupDone.Add(s.seen.at(change{seenStarted, cs.Name}), phases.SourceWatch)
	}
	if w := cs.State.Waiting; w != nil && failureReasons[w.Reason] {
		o := phases.Occurrence{Time: phases.Stamp{At: phases.InstantOf(s.firstFailure), Source: phases.SourceWatch}, Reason: w.Reason, Message: w.Message}
		if s.firstFailure.IsZero() {
			o.Time = phases.Stamp{}
		}
		return &o, pullReasons[w.Reason]
	}
	return nil, false
}
