// Package events reads an Event in one shape, whichever API it came from, and the messages of
// the Events readyspan reads: the kubelet's image pulls, the scheduler's preemptions, the
// workload controllers' creations, each message format known or counted as unknown.
package events

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/readyspan/readyspan/phases"
)

// Event is an Event in one shape, whichever API it was read from. The apiserver keeps the Events
// of core/v1 and events.k8s.io/v1 in one store and converts on read, so every Event shows in
// both: one written through core/v1 (kubelet, controllers) reads through events.k8s.io/v1 with
// deprecatedFirstTimestamp, deprecatedLastTimestamp, deprecatedCount and note = message; one
// written through events.k8s.io/v1 (the scheduler) reads through core/v1 with its eventTime,
// series and reportingComponent, and null firstTimestamp and lastTimestamp.
type Event struct {
	UID       types.UID // the Event's own UID, to drop the second view of the same event
	Namespace string
	Regarding Ref
	Reason    string
	Message   string
	Type      string
	// Its times are Instants (WallOf).
	EventTime phases.Instant
	NameTime  phases.Instant // decoded from the name suffix; zero if the name has none
	First     phases.Instant // firstTimestamp / deprecatedFirstTimestamp (1 s)
	Last      phases.Instant // lastTimestamp, series.lastObservedTime
	Count     int32
	Recv      phases.Instant // readyspan's receive time (zero for initial lists and old recordings)
	RV        string
	// At is when the event first happened (When), once it is kept for a Pod: the Pod's events
	// are put in order by it each time its trace is drawn.
	At phases.Instant
	// heldSince is when the first Orphaned found the event held for a Pod not seen yet, when it
	// has no receive time to age it by.
	heldSince phases.Instant
}

// WallOf is an Event's time as an observation holds it (phases.Instant): an event is made for
// every Event that arrives, and its seven times as time.Times were half of it, each with a
// pointer to follow. A time outside what an int64 of nanoseconds spans (the years 1678 to 2262),
// which only a malformed Event states, is taken as none, like a missing one; one within it but
// beyond ±146 years of 1970 is held there, as every Instant is (phases.InstantOfNano).
func WallOf(t time.Time) phases.Instant {
	if t.IsZero() || t.Before(wallTimeMin) || t.After(wallTimeMax) {
		return 0
	}
	return phases.InstantOfNano(t.UnixNano())
}

// wallTimeMin and wallTimeMax bound the times WallOf keeps: the range of UnixNano.
var (
	wallTimeMin = time.Unix(0, math.MinInt64)
	wallTimeMax = time.Unix(0, math.MaxInt64)
)

// Orphaned reports whether an event held for a Pod readyspan has not seen has waited longer
// than after: since it was received or, for one from an initial list (no receive time), since
// the first prune that found it waiting. An initial list brings the Events of the last hour,
// most of them about Pods that are long Ready and will never be traced; without an age they
// were held until readyspan stopped.
func (e *Event) Orphaned(now time.Time, after time.Duration) bool {
	since := e.Recv
	if since.IsZero() {
		if e.heldSince.IsZero() {
			e.heldSince = WallOf(now)
		}
		since = e.heldSince
	}
	return now.Sub(since.Time()) > after
}

// Ref is what readyspan reads of the object an Event is about: an ObjectReference less
// its API version, namespace (the Event's own) and resourceVersion. An event is made for each
// Event that arrives; this is most of it.
type Ref struct {
	// APIVersion and Kind say what the object is: a Kind alone may be a custom resource's of
	// another group.
	APIVersion string
	Kind       string
	Name       string
	UID        types.UID
	FieldPath  string
}

func refOf(r *corev1.ObjectReference) Ref {
	return Ref{APIVersion: r.APIVersion, Kind: r.Kind, Name: r.Name, UID: r.UID, FieldPath: r.FieldPath}
}

// FromCore is a core/v1 Event received at recv (zero for an initial list).
func FromCore(e *corev1.Event, recv time.Time) *Event {
	out := &Event{
		UID:       e.UID,
		Namespace: e.Namespace,
		Regarding: refOf(&e.InvolvedObject),
		Reason:    e.Reason,
		Message:   e.Message,
		Type:      e.Type,
		EventTime: WallOf(e.EventTime.Time),
		First:     WallOf(e.FirstTimestamp.Time),
		Last:      WallOf(e.LastTimestamp.Time),
		Count:     e.Count,
		Recv:      WallOf(recv),
		RV:        e.ResourceVersion,
	}
	if e.Series != nil {
		out.Count = e.Series.Count
		out.Last = WallOf(e.Series.LastObservedTime.Time)
	}
	nameTime, _ := ParseEventName(e.Name)
	out.NameTime = WallOf(nameTime)
	return out
}

// FromEventsV1 is an events.k8s.io/v1 Event received at recv (zero for an initial list).
func FromEventsV1(e *eventsv1.Event, recv time.Time) *Event {
	out := &Event{
		UID:       e.UID,
		Namespace: e.Namespace,
		Regarding: refOf(&e.Regarding),
		Reason:    e.Reason,
		Message:   e.Note,
		Type:      e.Type,
		EventTime: WallOf(e.EventTime.Time),
		First:     WallOf(e.DeprecatedFirstTimestamp.Time),
		Last:      WallOf(e.DeprecatedLastTimestamp.Time),
		Count:     e.DeprecatedCount,
		Recv:      WallOf(recv),
		RV:        e.ResourceVersion,
	}
	if e.Series != nil {
		out.Count = e.Series.Count
		out.Last = WallOf(e.Series.LastObservedTime.Time)
	}
	nameTime, _ := ParseEventName(e.Name)
	out.NameTime = WallOf(nameTime)
	return out
}

// FirstObserved are every observation of when the event first happened: its eventTime (µs), the
// time in its name (ns), its firstTimestamp (1 s) and the receive time of its first version (only
// while it has one version); a zero Time where there is none.
func (e *Event) FirstObserved() [4]phases.Stamp {
	out := [4]phases.Stamp{
		{At: e.EventTime, Source: phases.SourceEventTime},
		{At: e.NameTime, Source: phases.SourceEventName},
		{At: e.First, Source: phases.SourceEventSeconds},
	}
	if e.Count <= 1 {
		out[3] = phases.Stamp{At: e.Recv, Source: phases.SourceWatch}
	}
	return out
}

// FirstStamps adds FirstObserved to t: the receive time only if t has none yet (the first
// version's).
func (e *Event) FirstStamps(t *phases.Times) {
	*t = slices.Grow(*t, 4) // room for the four at once, rather than growing for each
	for _, s := range e.FirstObserved() {
		if s.Source == phases.SourceWatch {
			t.AddFirstInstant(s.At, s.Source)
		} else {
			t.AddInstant(s.At, s.Source)
		}
	}
}

// When is the best single stamp of the event's first occurrence, for span events and for
// ordering events: FirstObserved resolved, gathered on the stack (it runs for every event of
// every Pod trace), each source once, so there is nothing for Times.Add to merge.
func (e *Event) When() phases.Stamp {
	var buf [4]phases.Stamp
	t := buf[:0]
	for _, s := range e.FirstObserved() {
		if !s.At.IsZero() {
			t = append(t, s)
		}
	}
	s, _ := phases.Times(t).Resolve()
	return s
}

// Occurrence is the event as an observation holds it.
func (e *Event) Occurrence() phases.Occurrence {
	o := phases.Occurrence{Time: e.When(), Reason: e.Reason, Message: e.Message, Count: e.Count}
	if e.Count > 1 {
		o.Last = e.Last.Time()
	}
	return o
}

// VersionLess orders resourceVersions: etcd revisions, compared as numbers when both are.
func VersionLess(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

// CompareVersions is VersionLess as a comparison, for sorting.
func CompareVersions(a, b string) int {
	if len(a) != len(b) {
		return cmp.Compare(len(a), len(b))
	}
	return strings.Compare(a, b)
}
