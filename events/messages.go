package events

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// PulledMessage is what the kubelet's Pulled event says. The kubelet's image manager
// (Kubernetes v1.37) writes one of three formats:
//
//	Successfully pulled image "IMG" in 4.778s (4.779s including waiting). Image size: 34704198 bytes.
//	Container image "IMG" already present on machine and can be accessed by the pod
//	Container image "IMG" already present on machine
//
// The first is a real pull: "in X" is the CRI PullImage plus ImageStatus time, truncated to the
// millisecond, and "(Y including waiting)" adds the time the pull waited behind other pulls on
// the node; both are printed as Go time.Duration values. The second is an image already on the
// node while the KubeletEnsureSecretPulledImages feature gate is on (beta, on by default since
// v1.35), the third the same with the gate off. The image is quoted with Go's %q.
type PulledMessage struct {
	Image    string
	Present  bool          // already present: no pull happened
	Transfer time.Duration // the CRI PullImage + ImageStatus time ("in X")
	Total    time.Duration // including time queued behind other pulls
	Size     int64         // bytes; 0 if not stated
}

// ErrUnknownMessage is returned for a message whose format readyspan does not know. Callers keep
// the event (as an occurrence) and count it; nothing is guessed from it.
var ErrUnknownMessage = errors.New("unknown message format")

// ParsePulledMessage parses the message of a kubelet Pulled event.
func ParsePulledMessage(msg string) (PulledMessage, error) {
	var out PulledMessage
	switch {
	case strings.HasPrefix(msg, "Successfully pulled image "):
		img, rest, ok := quoted(strings.TrimPrefix(msg, "Successfully pulled image "))
		if !ok {
			return out, fmt.Errorf("pulled message %q: %w", msg, ErrUnknownMessage)
		}
		out.Image = img
		rest, ok = strings.CutPrefix(rest, " in ")
		if !ok {
			return out, fmt.Errorf("pulled message %q: %w", msg, ErrUnknownMessage)
		}
		transfer, rest, ok := strings.Cut(rest, " (")
		if !ok {
			return out, fmt.Errorf("pulled message %q: %w", msg, ErrUnknownMessage)
		}
		total, rest, ok := strings.Cut(rest, " including waiting)")
		if !ok {
			return out, fmt.Errorf("pulled message %q: %w", msg, ErrUnknownMessage)
		}
		var err error
		if out.Transfer, err = parseDuration(transfer); err != nil {
			return out, fmt.Errorf("pulled message %q: %w", msg, err)
		}
		if out.Total, err = parseDuration(total); err != nil {
			return out, fmt.Errorf("pulled message %q: %w", msg, err)
		}
		if size, ok := strings.CutPrefix(strings.TrimSpace(rest), ". Image size: "); ok {
			size = strings.TrimSuffix(strings.TrimSuffix(size, "."), " bytes")
			n, err := strconv.ParseInt(size, 10, 64)
			if err != nil || n < 0 {
				return out, fmt.Errorf("pulled message %q: bad image size: %w", msg, ErrUnknownMessage)
			}
			out.Size = n
		}
		return out, nil
	case strings.HasPrefix(msg, "Container image "):
		img, rest, ok := quoted(strings.TrimPrefix(msg, "Container image "))
		if !ok || !strings.HasPrefix(rest, " already present on machine") {
			return out, fmt.Errorf("pulled message %q: %w", msg, ErrUnknownMessage)
		}
		out.Image, out.Present = img, true
		return out, nil
	}
	return out, fmt.Errorf("pulled message %q: %w", msg, ErrUnknownMessage)
}

// parseDuration parses a Go time.Duration string as the kubelet prints it, rejecting negative
// values (the kubelet never prints one; a negative here means the message is not ours).
func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("duration %q: %w", s, ErrUnknownMessage)
	}
	if d < 0 {
		return 0, fmt.Errorf("negative duration %q: %w", s, ErrUnknownMessage)
	}
	return d, nil
}

// quoted reads a Go %q-quoted string at the start of s and returns it and the rest.
func quoted(s string) (string, string, bool) {
	if !strings.HasPrefix(s, `"`) {
		return "", "", false
	}
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			v, err := strconv.Unquote(s[:i+1])
			if err != nil {
				return "", "", false
			}
			return v, s[i+1:], true
		}
	}
	return "", "", false
}

// minEventNameTime and maxEventNameTime bound plausible event-name times: a hex suffix outside
// them is not a UnixNano stamp (the name fell back to a UUID, or was made by hand).
var (
	minEventNameTime = time.Date(2015, 1, 1, 0, 0, 0, 0, time.UTC)
	maxEventNameTime = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
)

// ParseEventName decodes the time client-go put in an Event's name. Both of client-go's event
// recorders (tools/record for core/v1, used by the kubelet and the controllers, and tools/events
// for events.k8s.io/v1, used by the scheduler) name a new Event "<regarding object's name>.<hex
// UnixNano>", taken from the emitting component's clock when it made the event, and fall back to
// a random name when that is not a valid DNS subdomain. Nanoseconds, where the Event's own
// timestamps have whole seconds (firstTimestamp) or microseconds (eventTime). Not an API contract:
// names that do not follow it return an error and the event's other timestamps are used.
func ParseEventName(name string) (time.Time, error) {
	i := strings.LastIndexByte(name, '.')
	if i < 0 || i == len(name)-1 {
		return time.Time{}, fmt.Errorf("event name %q has no time suffix", name)
	}
	suffix := name[i+1:]
	if len(suffix) < 15 || len(suffix) > 16 {
		return time.Time{}, fmt.Errorf("event name %q: suffix is not a hex UnixNano", name)
	}
	n, ok := parseHex(suffix)
	if !ok || n > 1<<63-1 {
		return time.Time{}, fmt.Errorf("event name %q: suffix is not a hex UnixNano", name)
	}
	t := time.Unix(0, int64(n)).UTC()
	if t.Before(minEventNameTime) || t.After(maxEventNameTime) {
		return time.Time{}, fmt.Errorf("event name %q: suffix time %s out of range", name, t.Format(time.RFC3339))
	}
	return t, nil
}

// parseHex reads up to 16 hex digits, either case, as strconv.ParseUint(s, 16, 64) does, without
// its generality: every Event's name is read once, and ParseUint was most of reading it. Each
// digit's value is read from a table (hexValues), not found by comparisons.
func parseHex(s string) (uint64, bool) {
	if len(s) == 0 || len(s) > 16 {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		v := hexValues[s[i]]
		if v > 0xf {
			return 0, false
		}
		n = n<<4 | uint64(v)
	}
	return n, true
}

// hexValues is each hex digit's value, either case; 0x10 or more for any other byte.
var hexValues = func() (t [256]uint8) {
	for c := range t {
		switch {
		case '0' <= c && c <= '9':
			t[c] = uint8(c - '0')
		case 'a' <= c && c <= 'f', 'A' <= c && c <= 'F':
			t[c] = uint8(c|0x20-'a') + 10
		default:
			t[c] = 0x10
		}
	}
	return t
}()

// ContainerFromFieldPath returns the container a kubelet event is about and whether it is an
// init container: "spec.containers{web}", "spec.initContainers{init}".
func ContainerFromFieldPath(fp string) (name string, init bool, ok bool) {
	for _, p := range []struct {
		prefix string
		init   bool
	}{{"spec.containers{", false}, {"spec.initContainers{", true}, {"spec.ephemeralContainers{", false}} {
		if rest, found := strings.CutPrefix(fp, p.prefix); found && strings.HasSuffix(rest, "}") {
			return strings.TrimSuffix(rest, "}"), p.init, true
		}
	}
	return "", false, false
}

// KnownFailedMessage reports whether the message of a kubelet Failed event about a container is
// in a format readyspan knows. The v1.37 kubelet writes `Failed to pull image "IMG": <error>`
// (image manager), `Error: <error>` when the container cannot be created or started, and
// `Internal PreCreateContainer hook failed: <error>` / `Internal PreStartContainer hook failed:
// <error>`.
func KnownFailedMessage(msg string) bool {
	for _, prefix := range []string{"Failed to pull image ", "Error: ", "Internal PreCreateContainer hook failed: ", "Internal PreStartContainer hook failed: "} {
		if strings.HasPrefix(msg, prefix) {
			return true
		}
	}
	return false
}

// MessageShape is what stays of a message when its variable parts are blanked: quoted strings
// become "…", words with digits #, and only the first words count. Unknown formats are logged
// once per reason and shape, not once per event.
func MessageShape(msg string) string {
	const maxWords = 5
	var words []string
	for rest := strings.TrimSpace(msg); rest != "" && len(words) < maxWords; rest = strings.TrimSpace(rest) {
		if rest[0] == '"' {
			if _, after, ok := quoted(rest); ok {
				words = append(words, `"…"`)
				rest = after
				continue
			}
		}
		word, after, _ := strings.Cut(rest, " ")
		if strings.ContainsAny(word, "0123456789") {
			word = "#"
		}
		words = append(words, word)
		rest = after
	}
	return strings.Join(words, " ")
}

// ParsePreemptedMessage reads the preemptor's UID from the scheduler's Preempted event about a
// victim (Kubernetes v1.37, pkg/scheduler/framework/preemption/executor.go):
// `Preempted by pod <preemptor UID> on node <node>`, with ` (in kube-scheduler memory).` after it
// when the victim was only waiting or in pre-bind. ok is false for another preemptor type (a Pod
// group) or another wording.
func ParsePreemptedMessage(msg string) (uid string, ok bool) {
	rest, found := strings.CutPrefix(msg, "Preempted by pod ")
	if !found {
		return "", false
	}
	uid, _, found = strings.Cut(rest, " on node ")
	if !found || uid == "" || len(uid) > MaxUID || strings.ContainsAny(uid, " \t\n") {
		return "", false
	}
	return uid, true
}

// Disruption is who evicted a Pod to take its node away, and why, as an Event about the Pod says.
type Disruption struct {
	By, Cause string
}

// ParseDisruption reads a node autoscaler's Event about a Pod it evicted to remove its node:
// Karpenter's `Evicted` (v1.15, pkg/controllers/node/termination/terminator/events):
// `Evicted pod: <reason>`, the reason its NodeClaim's DisruptionReason (Underutilized, Empty,
// Drifted, Unhealthy) or `Forceful Termination`; cluster-autoscaler's `ScaleDown`: `deleting pod
// for node scale down`. ok is false for another reason or wording (the kubelet's own Evicted, for
// node pressure, is not a node going away).
func ParseDisruption(reason, msg string) (d Disruption, ok bool) {
	switch {
	case reason == "Evicted":
		cause, found := strings.CutPrefix(msg, "Evicted pod: ")
		if !found || cause == "" || len(cause) > maxCause || strings.ContainsAny(cause, "\n\t") {
			return Disruption{}, false
		}
		return Disruption{By: "karpenter", Cause: cause}, true
	case reason == "ScaleDown" && msg == "deleting pod for node scale down":
		return Disruption{By: "cluster-autoscaler", Cause: "ScaleDown"}, true
	}
	return Disruption{}, false
}

// maxCause bounds a disruption's cause read from a message (Karpenter's are a word or two).
const maxCause = 64

// MaxUID bounds a UID read from a message: a UUID is 36 bytes.
const MaxUID = 64

// CombinedPrefix starts the message of an event client-go's recorder made by combining similar
// events (after 10 distinct messages with one reason about one object within 10 minutes).
const CombinedPrefix = "(combined from similar events): "
