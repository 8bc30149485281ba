package rollout

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/readyspan/readyspan/phases"
)

// RejectionClass is why the apiserver refused a controller's Pod create, in a few bounded
// words (a metric label, the rollout's sentence).
type RejectionClass string

const (
	RejectQuota       RejectionClass = "quota"             // a ResourceQuota: exceeded, or a request it needs is missing
	RejectWebhook     RejectionClass = "admission_webhook" // an admission webhook denied the Pod, or could not be called
	RejectPodSecurity RejectionClass = "pod_security"      // the namespace's Pod Security level
	RejectOther       RejectionClass = "other"             // anything else (LimitRanger, a ValidatingAdmissionPolicy, …)
)

// RejectionClasses lists every RejectionClass (bounded metric label values).
var RejectionClasses = []RejectionClass{RejectQuota, RejectWebhook, RejectPodSecurity, RejectOther}

// RejectionLabel is the class as a metric label: one of RejectionClasses, other for any value
// that is not.
func RejectionLabel(c RejectionClass) RejectionClass {
	for _, k := range RejectionClasses {
		if c == k {
			return c
		}
	}
	return RejectOther
}

// ClassifyRejection reads the class from the apiserver's error, as a controller's FailedCreate
// Event ("Error creating: %v") or a ReplicaFailure condition quotes it. The formats, from the
// v1.37 admission plugins:
//
//	quota        pods "web-5d8f-x2k4f" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=1, limited: pods=1
//	             pods "web-5d8f-x2k4f" is forbidden: failed quota: compute: must specify limits.cpu for: app
//	webhook      admission webhook "deny.example.com" denied the request: …
//	             Internal error occurred: failed calling webhook "deny.example.com": … (failurePolicy Fail)
//	PodSecurity  pods "web-5d8f-x2k4f" is forbidden: violates PodSecurity "restricted:latest": …
func ClassifyRejection(message string) RejectionClass {
	switch {
	case strings.Contains(message, "exceeded quota: ") || strings.Contains(message, "failed quota: "):
		return RejectQuota
	case strings.Contains(message, "admission webhook \"") && strings.Contains(message, "\" denied the request"),
		strings.Contains(message, "failed calling webhook \""):
		return RejectWebhook
	case strings.Contains(message, "violates PodSecurity \""):
		return RejectPodSecurity
	}
	return RejectOther
}

// MaxRejectionMessage bounds a rejection's message as readyspan keeps it (bytes): the apiserver's
// errors quote webhooks' own messages, which may be long.
const MaxRejectionMessage = 1024

// BoundMessage cuts a cluster's message to MaxRejectionMessage bytes, on a rune boundary, with
// an ellipsis where it was cut.
func BoundMessage(s string) string {
	if len(s) <= MaxRejectionMessage {
		return s
	}
	cut := MaxRejectionMessage - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// Rejection is one way the controller's Pod creates were refused while the rollout ran: every
// FailedCreate of one owner with one class, however many Events (and occurrences of each) the
// controller's recorder wrote for them.
type Rejection struct {
	// Owner is the object whose controller was refused: the ReplicaSet (a Deployment's), the
	// StatefulSet or DaemonSet; empty when only the Deployment's ReplicaFailure condition said so.
	Owner   string
	Reason  string // FailedCreate (the Event's reason, or the condition's)
	Class   RejectionClass
	Message string // the latest message, bounded (BoundMessage), "Error creating: " dropped
	// Count is the occurrences the Events counted (a repeated Event's count, a series'); 0 when
	// only a condition stated the failure, which counts nothing.
	Count int32
	// First and Last are the first and the latest occurrence.
	First, Last time.Time
	// Cleared is when a Pod of the same owner was next created after Last: the rejection no
	// longer held. Zero while it still held when the rollout ended.
	Cleared time.Time
}

// Words is the rejection as the rollout's sentence and its error name it:
// "quota: pods "web-x" is forbidden: exceeded quota: …".
func (j *Rejection) Words() string { return string(j.Class) + ": " + j.Message }

// Blocked reports whether the rollout's creates were still refused at its end: a rejection that
// no Pod creation cleared.
func (r *Rollout) Blocked() *Rejection {
	var last *Rejection
	for i := range r.Rejections {
		j := &r.Rejections[i]
		if j.Cleared.IsZero() && (last == nil || j.Last.After(last.Last)) {
			last = j
		}
	}
	return last
}

// rejectionSpans draws each rejection as a span from its first occurrence to when it cleared
// (or to the rollout's end, still holding), under the step that scaled its owner up (the
// ReplicaSet's step), or the root; with an event at its first and at its latest occurrence.
func rejectionSpans(t *Trace, span spanMaker, rootID phases.SpanID, stepSpan []phases.SpanID, end time.Time) {
	r := t.Rollout
	for i := range r.Rejections {
		j := &r.Rejections[i]
		parent := rootID
		for k := len(r.Steps) - 1; k >= 0; k-- {
			s := &r.Steps[k]
			at, _ := s.Time.Resolve()
			if s.Up && j.Owner != "" && s.Target == j.Owner && !at.Time().After(j.First.Add(time.Second)) {
				parent = stepSpan[k]
				break
			}
		}
		to := j.Cleared
		if to.IsZero() {
			to = end
		}
		if to.Before(j.Last) {
			to = j.Last
		}
		sp := span(BlockedSpanName, fmt.Sprintf("blocked/%d", i), phases.ServiceController, parent, j.First, to)
		sp.Attrs = []phases.Attr{
			{Key: AttrRejectionClass, Value: string(j.Class)}, {Key: AttrRejectionReason, Value: j.Reason},
			{Key: AttrRejectionMessage, Value: j.Message}, {Key: AttrRejectionCount, Value: int64(j.Count)},
			{Key: AttrRejectionOwner, Value: j.Owner},
			{Key: AttrRejectionFirst, Value: j.First.UTC().Format(time.RFC3339Nano)},
			{Key: AttrRejectionLast, Value: j.Last.UTC().Format(time.RFC3339Nano)},
		}
		if !j.Cleared.IsZero() {
			sp.Attrs = append(sp.Attrs, phases.Attr{Key: AttrRejectionCleared, Value: j.Cleared.UTC().Format(time.RFC3339Nano)})
		} else {
			sp.Status, sp.StatusMessage = phases.StatusError, j.Words()
		}
		ev := []phases.Attr{{Key: AttrRejectionClass, Value: string(j.Class)}, {Key: AttrRejectionReason, Value: j.Reason}}
		sp.AddEvent(phases.Event{Name: "pod create rejected", Time: j.First, Attrs: ev})
		if j.Last.After(j.First) {
			sp.AddEvent(phases.Event{Name: "pod create rejected (latest)", Time: j.Last,
				Attrs: append(append([]phases.Attr(nil), ev...), phases.Attr{Key: AttrRejectionCount, Value: int64(j.Count)})})
		}
		t.Spans = append(t.Spans, sp)
	}
}
