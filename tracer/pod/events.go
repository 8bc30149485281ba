package pod

import (
	"cmp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/readyspan/readyspan/events"
	"github.com/readyspan/readyspan/objects"
	"github.com/readyspan/readyspan/phases"
)

// AddEvent folds in a version of an Event about the Pod, received at recv (its first version's
// receive time, for an Event that came before the Pod).
func (s *State) AddEvent(e *events.Event, recv time.Time) {
	s.addEvent(e)
	s.noteVolumeFailure(e, recv)
}

// addEvent keeps the Event's latest version, with its first version's receive time.
func (s *State) addEvent(e *events.Event) {
	for i, prev := range s.events {
		if prev.UID == e.UID {
			e.Recv = prev.Recv // the first version's receive time is when it happened
			if e.Count < prev.Count {
				return // an older version delivered late
			}
			e.At = e.When().At
			s.events[i] = e
			return
		}
	}
	e.At = e.When().At
	if s.events == nil {
		s.events = make([]*events.Event, 0, eventsPerPod) // grown once, not at 1, 2, 4 and 8
	}
	s.events = append(s.events, e)
}

// eventsPerPod is the room made for a Pod's events: a startup has about a dozen (Scheduled, and
// Pulling, Pulled, Created and Started for each container).
const eventsPerPod = 16

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

// eventsInOrder puts the Pod's events in the order they happened, by when they first happened
// (resolved once, when each was added) and then by resourceVersion, and returns them. They are
// sorted where they are kept: they mostly arrive in that order, and nothing else reads it.
func (s *State) eventsInOrder() []*events.Event {
	slices.SortFunc(s.events, func(a, b *events.Event) int {
		if c := cmp.Compare(a.At, b.At); c != 0 {
			return c
		}
		return events.CompareVersions(a.RV, b.RV)
	})
	return s.events
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
// runs it. The failure lasts until the sandbox is ready (Apply).
func (s *State) noteVolumeFailure(e *events.Event, recv time.Time) {
	f := volumeFailure(e)
	if f == "" || recv.IsZero() || s.failureReason != "" || objects.ConditionTrue(s.pod, corev1.PodReadyToStartContainers) {
		return
	}
	s.failureReason, s.firstFailure = f, recv
}
