package fakeapi

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/watch"
)

// Resource is one API resource the server answers list and watch for.
type Resource struct {
	GVR        schema.GroupVersionResource
	Kind       string // the objects' Kind; a List of them is <Kind>List
	Namespaced bool
	// Stream is the recording file its watch events are read from (watch.<stream>.jsonl);
	// empty for a resource no recording holds: it is served empty.
	Stream watch.Stream
}

// Path is the resource's collection path in a namespace ("" for all of them, or a cluster-scoped
// resource).
func (r Resource) Path(ns string) string {
	p := "/apis/" + r.GVR.Group + "/" + r.GVR.Version
	if r.GVR.Group == "" {
		p = "/api/" + r.GVR.Version
	}
	if ns != "" && r.Namespaced {
		p += "/namespaces/" + ns
	}
	return p + "/" + r.GVR.Resource
}

// streamOf names the recorded stream of a resource, as readyspan's recordings name them: the
// resource, but the Events of each API apart.
func streamOf(gvr schema.GroupVersionResource) watch.Stream {
	switch gvr {
	case schema.GroupVersionResource{Version: "v1", Resource: "events"}:
		return tracer.StreamEventsCore
	case schema.GroupVersionResource{Group: "events.k8s.io", Version: "v1", Resource: "events"}:
		return tracer.StreamEventsV1
	}
	return watch.Stream(gvr.Resource)
}

// clusterScoped are the built-in kinds that belong to no namespace, among those a watcher of
// Pods' startups reads (the scheme does not say which are).
var clusterScoped = map[string]bool{
	"Node": true, "Namespace": true, "PersistentVolume": true, "StorageClass": true,
	"PriorityClass": true, "RuntimeClass": true, "CSINode": true, "CSIDriver": true,
	"VolumeAttachment": true, "ClusterRole": true, "ClusterRoleBinding": true,
	"ValidatingWebhookConfiguration": true, "MutatingWebhookConfiguration": true,
	"CustomResourceDefinition": true, "APIService": true, "CertificateSigningRequest": true,
	"FlowSchema": true, "PriorityLevelConfiguration": true, "IngressClass": true,
	"ComponentStatus": true, "ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true,
	"DeviceClass": true, "ResourceSlice": true,
}

// resources are every built-in resource of client-go's scheme that has a List kind: whatever
// readyspan's registry of kinds watches today or adds later (Leases when it is elected), the
// server answers it, from the recording when the recording holds its stream.
var resources = func() map[schema.GroupVersionResource]*Resource {
	out := map[schema.GroupVersionResource]*Resource{}
	for gvk := range scheme.Scheme.AllKnownTypes() {
		if !strings.HasSuffix(gvk.Kind, "List") || gvk.Version == runtime.APIVersionInternal {
			continue
		}
		item := gvk.GroupVersion().WithKind(strings.TrimSuffix(gvk.Kind, "List"))
		if !scheme.Scheme.Recognizes(item) {
			continue
		}
		gvr, _ := meta.UnsafeGuessKindToResource(item)
		out[gvr] = &Resource{GVR: gvr, Kind: item.Kind, Namespaced: !clusterScoped[item.Kind], Stream: streamOf(gvr)}
	}
	return out
}()

// Lookup returns the resource of a group, version and plural name.
func Lookup(gvr schema.GroupVersionResource) (*Resource, bool) {
	r, ok := resources[gvr]
	return r, ok
}

func mustLookup(group, version, resource string) Resource {
	r, ok := Lookup(schema.GroupVersionResource{Group: group, Version: version, Resource: resource})
	if !ok {
		panic("fakeapi: no resource " + group + "/" + version + "/" + resource)
	}
	return *r
}

// Recorded are the streams `ceiling record` writes: what the scale test bed's load makes and
// readyspan reads of it (its fake nodes, and each Deployment's Service, ReplicaSet, Pods, Events
// and EndpointSlice).
var Recorded = []Resource{
	mustLookup("", "v1", "pods"),
	mustLookup("apps", "v1", "replicasets"),
	mustLookup("apps", "v1", "deployments"),
	mustLookup("", "v1", "events"),
	mustLookup("discovery.k8s.io", "v1", "endpointslices"),
	mustLookup("", "v1", "services"),
	mustLookup("", "v1", "nodes"),
}
