package watch

import (
	"bytes"

	"google.golang.org/protobuf/encoding/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	appsv1 "k8s.io/client-go/kubernetes/typed/apps/v1"
	batchv1 "k8s.io/client-go/kubernetes/typed/batch/v1"
	corev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	discoveryv1 "k8s.io/client-go/kubernetes/typed/discovery/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// client-go decodes a protobuf watch event in three copies before its object: the
// WatchEvent's RawExtension copies the object's bytes out of the frame, then the Unknown
// envelope around the object copies them again, and only then is the object decoded (its
// strings copied once more, as they must be). The envelopes are read once and dropped, so
// those two copies are garbage made for every event watched. The decoders here read both
// envelopes where they lie and decode the object from the frame itself; anything but the plain
// layout (a field twice, one unknown, a content encoding) goes to client-go's decoder, so the
// object, or the error, is the same either way (FuzzEnvelopes).

// envelopes is client-go's serializer for its typed clients, with the protobuf WatchEvent and
// Unknown envelopes read in place.
type envelopes struct {
	runtime.NegotiatedSerializer
	infos []runtime.SerializerInfo
}

func newEnvelopes() envelopes {
	ns := rest.CodecFactoryForGeneratedClient(scheme.Scheme, scheme.Codecs).WithoutConversion()
	infos := append([]runtime.SerializerInfo(nil), ns.SupportedMediaTypes()...)
	for i := range infos {
		info := &infos[i]
		if info.MediaType != runtime.ContentTypeProtobuf {
			continue
		}
		info.Serializer = objectDecoder{info.Serializer}
		if info.StreamSerializer != nil {
			stream := *info.StreamSerializer
			stream.Serializer = watchEventDecoder{stream.Serializer}
			info.StreamSerializer = &stream
		}
	}
	return envelopes{NegotiatedSerializer: ns, infos: infos}
}

func (e envelopes) SupportedMediaTypes() []runtime.SerializerInfo { return e.infos }

// protobufMagic starts every object the protobuf serializer encodes in an Unknown envelope.
var protobufMagic = []byte("k8s\x00")

// objectDecoder decodes an object from its Unknown envelope, without copying the envelope's
// bytes, when it is asked for a new object of the kind the envelope names.
type objectDecoder struct{ runtime.Serializer }

func (d objectDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if into != nil || defaults != nil {
		return d.Serializer.Decode(data, defaults, into)
	}
	unknown, ok := bytes.CutPrefix(data, protobufMagic)
	if !ok {
		return d.Serializer.Decode(data, defaults, into)
	}
	gvk, raw, ok := readUnknown(unknown)
	if !ok || gvk.Kind == "" || gvk.Version == "" {
		return d.Serializer.Decode(data, defaults, into)
	}
	obj, err := scheme.Scheme.New(gvk)
	if err != nil {
		return d.Serializer.Decode(data, defaults, into)
	}
	u, ok := obj.(interface{ Unmarshal([]byte) error })
	if !ok {
		return d.Serializer.Decode(data, defaults, into)
	}
	if err := u.Unmarshal(raw); err != nil {
		return nil, &gvk, err
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return obj, &gvk, nil
}

// The fields of runtime.Unknown and of its TypeMeta, as the protobuf encoding numbers them.
const (
	unknownTypeMeta        = 1
	unknownRaw             = 2
	unknownContentEncoding = 3
	unknownContentType     = 4
	typeMetaAPIVersion     = 1
	typeMetaKind           = 2
)

// readUnknown reads an Unknown envelope: the kind it names and its raw bytes, in place. false
// for anything but each field at most once, as bytes, and no content encoding.
func readUnknown(b []byte) (schema.GroupVersionKind, []byte, bool) {
	var fields [unknownContentType + 1][]byte
	if !readFields(b, fields[:]) || len(fields[unknownContentEncoding]) > 0 {
		return schema.GroupVersionKind{}, nil, false
	}
	var tm [typeMetaKind + 1][]byte
	if !readFields(fields[unknownTypeMeta], tm[:]) {
		return schema.GroupVersionKind{}, nil, false
	}
	gv, err := schema.ParseGroupVersion(string(tm[typeMetaAPIVersion]))
	if err != nil {
		return schema.GroupVersionKind{}, nil, false
	}
	return gv.WithKind(string(tm[typeMetaKind])), fields[unknownRaw], true
}

// readFields reads a message whose fields, numbered 1 to len(into)-1, are each bytes and each
// there at most once, into into (in place); false for any other message.
func readFields(b []byte, into [][]byte) bool {
	var seen uint64
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || typ != protowire.BytesType || num < 1 || int(num) >= len(into) || seen&(1<<num) != 0 {
			return false
		}
		v, vn := protowire.ConsumeBytes(b[n:])
		if vn < 0 {
			return false
		}
		seen |= 1 << num
		into[num] = v
		b = b[n+vn:]
	}
	return true
}

// watchEventDecoder reads a WatchEvent with its object's bytes left in the frame: client-go's watch
// decodes the object from them before it reads the next frame into the same buffer.
type watchEventDecoder struct{ runtime.Serializer }

// The fields of metav1.WatchEvent and of its RawExtension.
const (
	watchEventType   = 1
	watchEventObject = 2
	rawExtensionRaw  = 1
)

func (d watchEventDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	ev, ok := into.(*metav1.WatchEvent)
	if !ok || defaults != nil {
		return d.Serializer.Decode(data, defaults, into)
	}
	var fields [watchEventObject + 1][]byte
	var raw [rawExtensionRaw + 1][]byte
	if len(data) == 0 || !readFields(data, fields[:]) || !readFields(fields[watchEventObject], raw[:]) {
		return d.Serializer.Decode(data, defaults, into)
	}
	*ev = metav1.WatchEvent{Type: eventTypeOf(fields[watchEventType]), Object: runtime.RawExtension{Raw: raw[rawExtensionRaw]}}
	return ev, &schema.GroupVersionKind{}, nil
}

// eventTypeOf is a watch event's type, without a string made for each of the known ones.
func eventTypeOf(b []byte) string {
	for _, t := range [...]apiwatch.EventType{apiwatch.Added, apiwatch.Modified, apiwatch.Deleted, apiwatch.Bookmark, apiwatch.Error} {
		if string(b) == string(t) {
			return string(t)
		}
	}
	return string(b)
}

// clientset is client-go's Clientset with the groups readyspan watches in bulk (Pods, Events,
// Services, workloads, EndpointSlices) read through envelopes; the others as client-go makes
// them.
type clientset struct {
	*kubernetes.Clientset
	core      *corev1.CoreV1Client
	apps      *appsv1.AppsV1Client
	batch     *batchv1.BatchV1Client
	discovery *discoveryv1.DiscoveryV1Client
}

func (c *clientset) CoreV1() corev1.CoreV1Interface                { return c.core }
func (c *clientset) AppsV1() appsv1.AppsV1Interface                { return c.apps }
func (c *clientset) BatchV1() batchv1.BatchV1Interface             { return c.batch }
func (c *clientset) DiscoveryV1() discoveryv1.DiscoveryV1Interface { return c.discovery }

// newEnvelopeClient is the Clientset of cfg whose watched groups read protobuf envelopes in
// place; every group shares one HTTP client and one rate limiter, as kubernetes.NewForConfig's.
func newEnvelopeClient(cfg *rest.Config) (kubernetes.Interface, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.RateLimiter == nil && cfg.QPS > 0 && cfg.Burst > 0 {
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	}
	h, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfigAndClient(cfg, h)
	if err != nil {
		return nil, err
	}
	ns := newEnvelopes()
	group := func(gv schema.GroupVersion, apiPath string) (*rest.RESTClient, error) {
		c := *cfg
		c.GroupVersion, c.APIPath, c.NegotiatedSerializer = &gv, apiPath, ns
		if c.UserAgent == "" {
			c.UserAgent = rest.DefaultKubernetesUserAgent()
		}
		return rest.RESTClientForConfigAndClient(&c, h)
	}
	out := &clientset{Clientset: cs}
	for _, g := range []struct {
		gv   schema.GroupVersion
		path string
		set  func(rest.Interface)
	}{
		{schema.GroupVersion{Version: "v1"}, "/api", func(r rest.Interface) { out.core = corev1.New(r) }},
		{schema.GroupVersion{Group: "apps", Version: "v1"}, "/apis", func(r rest.Interface) { out.apps = appsv1.New(r) }},
		{schema.GroupVersion{Group: "batch", Version: "v1"}, "/apis", func(r rest.Interface) { out.batch = batchv1.New(r) }},
		{schema.GroupVersion{Group: "discovery.k8s.io", Version: "v1"}, "/apis", func(r rest.Interface) { out.discovery = discoveryv1.New(r) }},
	} {
		rc, err := group(g.gv, g.path)
		if err != nil {
			return nil, err
		}
		g.set(rc)
	}
	return out, nil
}
