package tracer

import (
	"github.com/readyspan/readyspan/watch"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/readyspan/readyspan/events"
)

// Events, read through core/v1 (every recorder's, the one view the watch reads) and, as recordings
// may hold them, events.k8s.io/v1: two streams of one resource, each Event kept once (by UID).
const (
	ResourceEvents   watch.Resource = "events"
	StreamEventsCore watch.Stream   = "events.core.v1"
	StreamEventsV1   watch.Stream   = "events.events.k8s.io.v1"
)

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
			c.handleEvent(&d, events.FromCore(o, d.WatchTime()), seen)
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
			c.handleEvent(&d, events.FromEventsV1(o, d.WatchTime()), seen)
		}
	},
}
