package phases

import "slices"

// FailureReasons are the container waiting reasons that do not go away by themselves: a Pod
// whose status shows one for --fail-after is exported as failed with it as its
// FailureReason. The tracer reads failures from this list, and the failed-startups counter
// uses it as the values of its reason label, so the two cannot drift apart. Grouped as the
// alerts group them: image pulls, crash loops, container configuration, volumes.
var FailureReasons = []string{
	"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull",
	"RegistryUnavailable", "SignatureValidationFailed", "ImageInspectError",
	"CrashLoopBackOff", "RunContainerError", "PostStartHookError",
	"CreateContainerConfigError", "CreateContainerError",
	VolumeFailedMount, VolumeFailedAttach, VolumeFailedMap,
}

// The volume failures the tracer fails a Pod with when one persists for --fail-after before the
// sandbox is ready: the reasons of the kubelet's and the attach/detach controller's events (a
// container waits in ContainerCreating meanwhile, which names nothing).
const (
	VolumeFailedMount  = "FailedMount"
	VolumeFailedAttach = "FailedAttachVolume"
	VolumeFailedMap    = "FailedMapVolume"
)

// IsVolumeFailure reports whether reason is one of the volume failures.
func IsVolumeFailure(reason string) bool {
	return reason == VolumeFailedMount || reason == VolumeFailedAttach || reason == VolumeFailedMap
}

// FailureReasonOther stands for every reason not in FailureReasons in a bounded label.
const FailureReasonOther = "other"

// FailureLabel is reason as a bounded label value: reason itself when it is one of
// FailureReasons, else FailureReasonOther. A failed Pod's status.reason (Evicted,
// DeadlineExceeded…) and anything else free-form become "other".
func FailureLabel(reason string) string {
	if slices.Contains(FailureReasons, reason) {
		return reason
	}
	return FailureReasonOther
}
