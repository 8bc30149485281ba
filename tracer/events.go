package tracer

import (
	"math"
	"slices"
	"time"

	"github.com/readyspan/readyspan/watch"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/readyspan/readyspan/phases"
)

// Events, read through core/v1 (every recorder's, the one view the watch reads) and, as recordings
// may hold them, events.k8s.io/v1: two streams of one resource, each Event kept once (by UID).
const (
	ResourceEvents   watch.Resource = "events"
	StreamEventsCore watch.Stream   = "events.core.v1"
	StreamEventsV1   watch.Stream   = "events.events.k8s.io.v1"
)

// event is an Event in one shape, whichever API it was read from. The apiserver keeps the Events
// of core/v1 and events.k8s.io/v1 in one store and converts on read, so every Event shows in
// both: one written through core/v1 (kubelet, controllers) reads through events.k8s.io/v1 with
// deprecatedFirstTimestamp, deprecatedLastTimestamp, deprecatedCount and note = message; one
// written through events.k8s.io/v1 (the scheduler) reads through core/v1 with its eventTime,
// series and reportingComponent, and null firstTimestamp and lastTimestamp.
type event struct {
	UID       types.UID // the Event's own UID, to drop the second view of the same event
	Namespace string
	Regarding eventRef
	Reason    string
	Message   string
	Type      string
	// Its times are Instants (wallOf).
	EventTime phases.Instant
	NameTime  phases.Instant // decoded from the name suffix; zero if the name has none
	First     phases.Instant // firstTimestamp / deprecatedFirstTimestamp (1 s)
	Last      phases.Instant // lastTimestamp, series.lastObservedTime
	Count     int32
	Recv      phases.Instant // readyspan's receive time (zero for initial lists and old recordings)
	RV        string
	// heldSince is when prune first saw the event held for a Pod not seen yet, when it has no
	// receive time to age it by (orphaned).
	heldSince phases.Instant
	// at is when the event first happened (when), once it is kept for a Pod: the Pod's events
	// are put in order by it each time its trace is drawn.
	at phases.Instant
}

// wallOf is an Event's time as an observation holds it (phases.Instant): an event is made for
// every Event that arrives, and its seven times as time.Times were half of it, each with a
// pointer to follow. A time outside what an int64 of nanoseconds spans (the years 1678 to 2262),
// which only a malformed Event states, is taken as none, like a missing one; one within it but
// beyond ±146 years of 1970 is held there, as every Instant is (phases.InstantOfNano).
func wallOf(t time.Time) phases.Instant {
	if t.IsZero() || t.Before(wallTimeMin) || t.After(wallTimeMax) {
		return 0
	}
	return phases.InstantOfNano(t.UnixNano())
}

// wallTimeMin and wallTimeMax bound the times wallOf keeps: the range of UnixNano.
var (
	wallTimeMin = time.Unix(0, math.MinInt64)
	wallTimeMax = time.Unix(0, math.MaxInt64)
)

// orphaned reports whether an event held for a Pod readyspan has not seen has waited
// orphanAfter: since it was received or, for one from an initial list (no receive time), since
// the first prune that found it waiting. An initial list brings the Events of the last hour,
// most of them about Pods that are long Ready and will never be traced; without an age they
// were held until readyspan stopped.
func (e *event) orphaned(now time.Time) bool {
	since := e.Recv
	if since.IsZero() {
		if e.heldSince.IsZero() {
			e.heldSince = wallOf(now)
		}
		since = e.heldSince
	}
	return now.Sub(since.Time()) > orphanAfter
}

// eventRef is what readyspan reads of the object an Event is about: an ObjectReference less
// its API version, namespace (the Event's own) and resourceVersion. An event is made for each
// Event that arrives; this is most of it.
type eventRef struct {
	Kind      string
	Name      string
	UID       types.UID
	FieldPath string
}

func refOf(r *corev1.ObjectReference) eventRef {
	return eventRef{Kind: r.Kind, Name: r.Name, UID: r.UID, FieldPath: r.FieldPath}
}

func fromCoreEvent(e *corev1.Event, recv time.Time) *event {
	out := &event{
		UID:       e.UID,
		Namespace: e.Namespace,
		Regarding: refOf(&e.InvolvedObject),
		Reason:    e.Reason,
		Message:   e.Message,
		Type:      e.Type,
		EventTime: wallOf(e.EventTime.Time),
		First:     wallOf(e.FirstTimestamp.Time),
		Last:      wallOf(e.LastTimestamp.Time),
		Count:     e.Count,
		Recv:      wallOf(recv),
		RV:        e.ResourceVersion,
	}
	if e.Series != nil {
		out.Count = e.Series.Count
		out.Last = wallOf(e.Series.LastObservedTime.Time)
	}
	nameTime, _ := ParseEventName(e.Name)
	out.NameTime = wallOf(nameTime)
	return out
}

func fromEventsV1(e *eventsv1.Event, recv time.Time) *event {
	out := &event{
		UID:       e.UID,
		Namespace: e.Namespace,
		Regarding: refOf(&e.Regarding),
		Reason:    e.Reason,
		Message:   e.Note,
		Type:      e.Type,
		EventTime: wallOf(e.EventTime.Time),
		First:     wallOf(e.DeprecatedFirstTimestamp.Time),
		Last:      wallOf(e.DeprecatedLastTimestamp.Time),
		Count:     e.DeprecatedCount,
		Recv:      wallOf(recv),
		RV:        e.ResourceVersion,
	}
	if e.Series != nil {
		out.Count = e.Series.Count
		out.Last = wallOf(e.Series.LastObservedTime.Time)
	}
	nameTime, _ := ParseEventName(e.Name)
	out.NameTime = wallOf(nameTime)
	return out
}

// firstObserved are every observation of when the event first happened: its eventTime (µs), the
// time in its name (ns), its firstTimestamp (1 s) and the receive time of its first version (only
// while it has one version); a zero Time where there is none.
func (e *event) firstObserved() [4]phases.Stamp {
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

// firstStamps adds firstObserved to t: the receive time only if t has none yet (the first
// version's).
func (e *event) firstStamps(t *phases.Times) {
	*t = slices.Grow(*t, 4) // room for the four at once, rather than growing for each
	for _, s := range e.firstObserved() {
		if s.Source == phases.SourceWatch {
			t.AddFirstInstant(s.At, s.Source)
		} else {
			t.AddInstant(s.At, s.Source)
		}
	}
}

// when is the best single stamp of the event's first occurrence, for span events and for
// ordering events: firstObserved resolved, gathered on the stack (it runs for every event of
// every Pod trace), each source once, so there is nothing for Times.Add to merge.
func (e *event) when() phases.Stamp {
	var buf [4]phases.Stamp
	t := buf[:0]
	for _, s := range e.firstObserved() {
		if !s.At.IsZero() {
			t = append(t, s)
		}
	}
	s, _ := phases.Times(t).Resolve()
	return s
}

func (e *event) occurrence() phases.Occurrence {
	o := phases.Occurrence{Time: e.when(), Reason: e.Reason, Message: e.Message, Count: e.Count}
	if e.Count > 1 {
		o.Last = e.Last.Time()
	}
	return o
}

// coreEventKind reads the Events the watch reads: every recorder's, through the core API.
var coreEventKind = &kind{
	Kind: &watch.Kind{
		Resource: ResourceEvents, Stream: StreamEventsCore, Kind: "Event",
		GVR:       corev1.SchemeGroupVersion.WithResource("events"),
		NewObject: func() runtime.Object { return &corev1.Event{} },
		NewList:   func() runtime.Object { return &corev1.EventList{} },
		ListWatch: watch.Namespaced(func(c kubernetes.Interface, ns string) watch.Lister[*corev1.EventList] {
			return c.CoreV1().Events(ns)
		}),
		ShardAfterOthers: true,
		Snapshot:         watch.SnapshotEvents, Verbs: watch.ReadVerbs,
	},
	handle: func(c *Correlator, d watch.Delta) {
		// Each Event arrives through both Events APIs: the second view is dropped before
		// it is converted.
		o := d.Object.(*corev1.Event)
		if seen, fresh := c.eventVersion(&d, o.UID, o.ResourceVersion); fresh {
			c.handleEvent(&d, fromCoreEvent(o, d.WatchTime()), seen)
		}
	},
}

// eventsV1EventKind reads the same Events through events.k8s.io/v1, as recordings may hold them. Not
// watched: one view is enough.
var eventsV1EventKind = &kind{
	Kind: &watch.Kind{
		Resource: ResourceEvents, Stream: StreamEventsV1, Kind: "Event",
		GVR:              eventsv1.SchemeGroupVersion.WithResource("events"),
		NewObject:        func() runtime.Object { return &eventsv1.Event{} },
		NewList:          func() runtime.Object { return &eventsv1.EventList{} },
		ShardAfterOthers: true,
		Snapshot:         watch.SnapshotEvents, Verbs: watch.ReadVerbs,
	},
	handle: func(c *Correlator, d watch.Delta) {
		o := d.Object.(*eventsv1.Event)
		if seen, fresh := c.eventVersion(&d, o.UID, o.ResourceVersion); fresh {
			c.handleEvent(&d, fromEventsV1(o, d.WatchTime()), seen)
		}
	},
}
