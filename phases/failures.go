package phases

import "slices"

// FailureReasons are the container waiting reasons that do not go away by themselves: a Pod
// whose status shows one for --fail-after is exported as failed with it as its
// FailureReason. The tracer reads failures from this list, and the failed-startups counter
// uses it as the values of its reason label, so the two cannot drift apart. Grouped as the
// alerts group them: image pulls, crash loops, container configuration.
var FailureReasons = []string{
	"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull",
	"RegistryUnavailable", "SignatureValidationFailed", "ImageInspectError",
	"CrashLoopBackOff", "RunContainerError", "PostStartHookError",
	"CreateContainerConfigError", "CreateContainerError",
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
