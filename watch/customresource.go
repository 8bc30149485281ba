package watch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/readyspan/readyspan/safetext"
)

// A custom resource's objects are read into readyspan's own types, which hold only the fields
// it reads: the apiserver serves custom resources in JSON, and encoding/json skips every field
// the type does not declare (a Rollout's Pod template, its status' many fields) without
// building it. client-go's typed clients know only the built-in kinds, and its dynamic client
// builds every field as a map; neither is needed to list and watch one resource.

// CustomResource gives the calls that list and watch a custom resource (Kind.ListWatch), through
// the client's REST client and its JSON encoding (a custom resource's Kind is JSONOnly), decoding
// objects with newObject and lists with newList.
func CustomResource(gvr schema.GroupVersionResource, newObject, newList func() runtime.Object) func(kubernetes.Interface, string, Config) (ListFunc, WatchFunc) {
	return func(c kubernetes.Interface, ns string, _ Config) (ListFunc, WatchFunc) {
		rc := c.CoreV1().RESTClient()
		p := resourcePath(gvr, ns)
		list := func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			body, err := rc.Get().AbsPath(p).VersionedParams(&o, scheme.ParameterCodec).Do(ctx).Raw()
			if err != nil {
				return nil, err
			}
			l := newList()
			if err := json.Unmarshal(body, l); err != nil {
				return nil, fmt.Errorf("decode %s list: %w", gvr.Resource, err)
			}
			return l, nil
		}
		watchFn := func(ctx context.Context, o metav1.ListOptions) (apiwatch.Interface, error) {
			o.Watch = true
			body, err := rc.Get().AbsPath(p).VersionedParams(&o, scheme.ParameterCodec).Stream(ctx)
			if err != nil {
				return nil, err
			}
			return apiwatch.NewStreamWatcher(newEventDecoder(body, gvr.Resource, newObject), apierrors.NewClientErrorReporter(500, "GET", "ClientWatchDecoding")), nil
		}
		return list, watchFn
	}
}

// CustomList is a custom resource's list decoded from JSON into readyspan's own type of its
// objects, T (what it reads of them): one list type for every custom kind.
type CustomList[T any, PT interface {
	*T
	runtime.Object
}] struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []T `json:"items"`
}

// DeepCopyObject copies the list and each object (runtime.Object).
func (l *CustomList[T, PT]) DeepCopyObject() runtime.Object {
	out := &CustomList[T, PT]{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = make([]T, len(l.Items))
	for i := range l.Items {
		out.Items[i] = *PT(&l.Items[i]).DeepCopyObject().(PT)
	}
	return out
}

// GetCustomResource reads one object of a custom resource into obj (Kind.Get).
func GetCustomResource(ctx context.Context, c kubernetes.Interface, gvr schema.GroupVersionResource, ns, name string, obj metav1.Object) error {
	body, err := c.CoreV1().RESTClient().Get().AbsPath(resourcePath(gvr, ns), name).Do(ctx).Raw()
	if err != nil {
		return err
	}
	return json.Unmarshal(body, obj)
}

// resourcePath is the API path of a resource's collection in a namespace ("" for all).
func resourcePath(gvr schema.GroupVersionResource, ns string) string {
	if ns == metav1.NamespaceAll {
		return path.Join("/apis", gvr.Group, gvr.Version, gvr.Resource)
	}
	return path.Join("/apis", gvr.Group, gvr.Version, "namespaces", ns, gvr.Resource)
}

// maxCustomEvent bounds one watch event of a custom resource: the apiserver refuses an object
// over 1.5 MiB (etcd's request limit), so a longer line is not one of its events.
const maxCustomEvent = 3 << 20

// eventDecoder reads a watch's JSON stream: one metav1.WatchEvent after another.
type eventDecoder struct {
	body      io.ReadCloser
	dec       *json.Decoder
	resource  string
	newObject func() runtime.Object
}

func newEventDecoder(body io.ReadCloser, resource string, newObject func() runtime.Object) *eventDecoder {
	return &eventDecoder{body: body, dec: json.NewDecoder(&limitedPerEvent{r: body}), resource: resource, newObject: newObject}
}

// Decode returns the next event: its object decoded into the kind's type, or for an ERROR
// event the metav1.Status the apiserver sent (the reflector reads a 410 Gone from it).
func (d *eventDecoder) Decode() (apiwatch.EventType, runtime.Object, error) {
	var e metav1.WatchEvent
	if err := d.dec.Decode(&e); err != nil {
		return "", nil, err
	}
	t := apiwatch.EventType(e.Type)
	var obj runtime.Object
	switch t {
	case apiwatch.Added, apiwatch.Modified, apiwatch.Deleted, apiwatch.Bookmark:
		obj = d.newObject()
	case apiwatch.Error:
		obj = &metav1.Status{}
	default:
		return "", nil, fmt.Errorf("watch %s: unknown event type \"%s\"", d.resource, safetext.Cut(e.Type, 32))
	}
	if err := json.Unmarshal(e.Object.Raw, obj); err != nil {
		return "", nil, fmt.Errorf("watch %s: decode %s event: %w", d.resource, t, err)
	}
	return t, obj, nil
}

// Close closes the stream.
func (d *eventDecoder) Close() { _ = d.body.Close() }

// limitedPerEvent fails a stream that sends more than maxCustomEvent bytes without a newline:
// the apiserver ends each event with one.
type limitedPerEvent struct {
	r      io.Reader
	inLine int
}

var errEventTooLong = errors.New("watch event longer than the apiserver writes")

func (l *limitedPerEvent) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	for _, b := range p[:n] {
		if b == '\n' {
			l.inLine = 0
			continue
		}
		if l.inLine++; l.inLine > maxCustomEvent {
			return 0, errEventTooLong
		}
	}
	return n, err
}

// served tells whether the API serves gvr, from discovery: an Optional kind is watched only
// then. A discovery error other than "not found" is returned.
func served(c kubernetes.Interface, gvr schema.GroupVersionResource) (bool, error) {
	list, err := c.Discovery().ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, r := range list.APIResources {
		if r.Name == gvr.Resource {
			return true, nil
		}
	}
	return false, nil
}
