package tracer

import (
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/readyspan/readyspan/objects"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/watch"
)

// EndpointSlices (discovery/v1): when a Pod's address turned ready behind its Services
// (status.endpoints).
const (
	ResourceEndpointSlices watch.Resource = "endpointslices"
	StreamEndpointSlices   watch.Stream   = "endpointslices"
)

// endpointSliceKind is the registry entry of EndpointSlices.
var endpointSliceKind = &kind{
	Kind: &watch.Kind{
		Resource: ResourceEndpointSlices, Stream: StreamEndpointSlices, Kind: "EndpointSlice",
		GVR:       discoveryv1.SchemeGroupVersion.WithResource("endpointslices"),
		NewObject: func() runtime.Object { return &discoveryv1.EndpointSlice{} },
		NewList:   func() runtime.Object { return &discoveryv1.EndpointSliceList{} },
		ListWatch: watch.Namespaced(func(c kubernetes.Interface, ns string) watch.Lister[*discoveryv1.EndpointSliceList] {
			return c.DiscoveryV1().EndpointSlices(ns)
		}),
		Transform: func(o runtime.Object) {
			es := o.(*discoveryv1.EndpointSlice)
			es.Annotations = nil
			for i := range es.Endpoints {
				es.Endpoints[i].Hints, es.Endpoints[i].DeprecatedTopology = nil, nil
			}
		},
		KeepsIdentity: true,
		Snapshot:      watch.SnapshotEndpointSlices, Verbs: watch.ReadVerbs,
	},
	handle: func(c *Correlator, d watch.Delta) { c.handleSlice(&d, d.Object.(*discoveryv1.EndpointSlice)) },
}

func (c *Correlator) handleSlice(d *watch.Delta, s *discoveryv1.EndpointSlice) {
	if d.Type == watch.Deleted {
		return
	}
	var fallback time.Time // no receive time: the controller's last write to the slice (1 s)
	for i := range s.ManagedFields {
		if f := &s.ManagedFields[i]; f.Manager == objects.ControllerManager && f.Time != nil && f.Time.After(fallback) {
			fallback = f.Time.Time
		}
	}
	for i := range s.Endpoints {
		ep := &s.Endpoints[i]
		if ep.TargetRef == nil || ep.TargetRef.Kind != "Pod" {
			continue
		}
		uid := ep.TargetRef.UID
		if _, done := c.done[uid]; done {
			continue
		}
		c.inSlice[uid] = true
		if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
			if _, ok := c.endpointReady[uid]; !ok {
				var t phases.Times
				if w := d.WatchTime(); !w.IsZero() {
					t.Add(w, phases.SourceWatch)
				} else {
					t.Add(fallback, phases.SourceMetadata)
				}
				c.endpointReady[uid] = t
			}
		}
		if ps := c.pods[uid]; ps != nil {
			c.check(ps, d.Recv)
		}
	}
}
