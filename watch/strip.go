package watch

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/readyspan/readyspan/tracecontext"
)

// The managedFields' field sets (fieldsV1) are about half the bytes of every object a watch
// sends, and nothing of readyspan reads them: Transform drops them. client-go copies each
// watch event twice before decoding it (the WatchEvent's RawExtension, then the Unknown
// envelope) and copies each field set once more while decoding, so dropping them from the
// protobuf stream before client-go reads it saves those copies, their garbage and their
// decoding. Of a Pod, the most frequent and largest object watched, what Transform drops of its
// spec and status (env, ports, resources, volume contents, tolerations, ...) is dropped as
// well. Only where each field is what the protobuf encoding of the API says; anything else
// passes through byte for byte.

// stripUnread wraps a transport so that the protobuf watch streams it returns come without
// the managedFields' field sets and, of Pods, without what their Transform drops.
func stripUnread(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err != nil || !isProtobufWatch(req, resp) {
			return resp, err
		}
		resp.Body = &frameStripper{in: resp.Body}
		resp.ContentLength = -1
		resp.Header.Del("Content-Length")
		return resp, nil
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// isProtobufWatch tells a protobuf watch stream (length-delimited WatchEvents): the answer to a
// watch, in protobuf (the apiserver says ";stream=watch", which client-go does not require).
func isProtobufWatch(req *http.Request, resp *http.Response) bool {
	if resp.StatusCode != http.StatusOK || resp.Body == nil {
		return false
	}
	mt, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || mt != runtime.ContentTypeProtobuf {
		return false
	}
	if params["stream"] == "watch" {
		return true
	}
	w := ""
	if req != nil && req.URL != nil {
		w = req.URL.Query().Get("watch")
	}
	return w == "true" || w == "1"
}

// maxStrippedFrame bounds the frames rewritten: a larger one (client-go refuses frames past
// 16 MiB anyway) passes through as it came, without being held whole.
const maxStrippedFrame = 4 << 20

// readAhead is the least the stripper asks of the stream at once. x/net's HTTP/2 client sends
// a WINDOW_UPDATE (a TLS record and a write to the socket) once 4 KiB are read since the last:
// reading what has arrived in one go, not each frame's length and then the frame, sends one
// for many frames when they come faster than they are decoded.
const readAhead = 32 << 10

// frameStripper reads a protobuf watch stream (each frame a 4-byte big-endian length and a
// WatchEvent) and hands on each frame without what nothing reads of its object.
type frameStripper struct {
	in   io.ReadCloser
	buf  []byte // read ahead: buf[r:w] is not taken yet; reused
	r, w int
	err  error  // what the stream said after the bytes read ahead
	out  []byte // what is left to hand on of the frame rewritten
	pass int64  // bytes of a frame too large to rewrite, still to pass through
	rw   []byte // the rewritten frame, reused
	re   rewriter
}

func (s *frameStripper) Read(p []byte) (int, error) {
	if len(s.out) == 0 && s.pass > 0 {
		if int64(len(p)) > s.pass {
			p = p[:s.pass]
		}
		n, err := s.in.Read(p)
		s.pass -= int64(n)
		if err == io.EOF && s.pass > 0 {
			err = io.ErrUnexpectedEOF
		}
		return n, err
	}
	if len(s.out) == 0 {
		if err := s.next(); err != nil {
			return 0, err
		}
	}
	n := copy(p, s.out)
	s.out = s.out[n:]
	return n, nil
}

// next reads one frame and readies its rewriting (or its passing through) to be handed on.
func (s *frameStripper) next() error {
	if err := s.fill(4); err != nil {
		return err
	}
	head := s.buf[s.r : s.r+4]
	n := binary.BigEndian.Uint32(head)
	if n > maxStrippedFrame {
		ahead := min(s.w-s.r-4, int(n))
		s.rw = append(s.rw[:0], s.buf[s.r:s.r+4+ahead]...)
		s.r += 4 + ahead
		s.out, s.pass = s.rw, int64(n)-int64(ahead)
		return nil
	}
	if err := s.fill(4 + int(n)); err != nil {
		return err
	}
	frame := s.buf[s.r+4 : s.r+4+int(n)]
	s.r += 4 + int(n)
	s.rw = s.re.strip(s.rw[:0], frame)
	s.out = s.rw
	return nil
}

// fill reads until k bytes are ahead, taking at each read as many as the stream has at hand.
func (s *frameStripper) fill(k int) error {
	for s.w-s.r < k {
		if s.err != nil {
			if s.err == io.EOF && s.w > s.r {
				return io.ErrUnexpectedEOF
			}
			return s.err
		}
		if len(s.buf)-s.r < k {
			buf := s.buf
			if len(buf) < k {
				buf = make([]byte, max(k, readAhead))
			}
			s.w, s.r, s.buf = copy(buf, s.buf[s.r:s.w]), 0, buf
		}
		var n int
		n, s.err = s.in.Read(s.buf[s.w:])
		s.w += n
	}
	return nil
}

func (s *frameStripper) Close() error { return s.in.Close() }

// stripFrame appends to dst the frame (its 4-byte length and the WatchEvent) without what its
// object's shape drops, or unchanged when its object is not one whose encoding is known.
func stripFrame(dst, event []byte) []byte {
	var r rewriter
	return r.strip(dst, event)
}

// strip is stripFrame with r's sizes reused: a stream rewrites every frame with one rewriter.
func (r *rewriter) strip(dst, event []byte) []byte {
	r.sizes, r.next = r.sizes[:0], 0
	size, ok := r.size(watchEvent, event)
	if !ok || size == len(event) {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(event)))
		return append(dst, event...)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(size))
	return r.write(dst, watchEvent, event)
}

// action is what becomes of one field of a message.
type action uint8

const (
	unlisted action = iota // in a shape's rules: what its others say
	keep
	drop    // left out
	empty   // kept, its message emptied: what is read of it is that it is there
	rewrite // its message rewritten by its own shape
	keepIf  // kept when the rule's test says so of its bytes, else left out
)

// shape says what becomes of each field of one message, by field number: its rules, and others
// for the numbers they do not list. prefix is what the message's bytes start with inside its
// field (the protobuf envelope's magic number); pick, when set, chooses the shape by the
// message itself (nil: the message passes as it came).
type shape struct {
	rules  []rule // by field number
	others action // keep or drop
	prefix []byte
	pick   func(msg []byte) *shape
}

type rule struct {
	act action
	sub *shape // the shape of a field rewritten
	// test says of a keepIf field, its value's bytes, whether it is kept.
	test func(value []byte) bool
}

func (s *shape) rule(n protowire.Number) rule {
	if int(n) < len(s.rules) && s.rules[n].act != unlisted {
		return s.rules[n]
	}
	return rule{act: s.others}
}

// rewriter rewrites one frame in two walks: size finds the length of every message rewritten,
// in the order write needs them, so that neither walk sizes a message twice.
type rewriter struct {
	sizes []int
	next  int
}

// size is the length of msg rewritten by sh; false when msg is not a valid encoding of what sh
// expects, and the frame then passes through as it came.
func (r *rewriter) size(sh *shape, msg []byte) (int, bool) {
	if sh.pick != nil {
		if sh = sh.pick(msg); sh == nil {
			return len(msg), true
		}
	}
	n := 0
	for b := msg; len(b) > 0; {
		num, typ, tn := protowire.ConsumeTag(b)
		if tn < 0 {
			return 0, false
		}
		vn := protowire.ConsumeFieldValue(num, typ, b[tn:])
		if vn < 0 {
			return 0, false
		}
		switch ru := sh.rule(num); ru.act {
		case keep:
			n += tn + vn
		case drop:
		case keepIf:
			if keptIf(ru, typ, b[tn:]) {
				n += tn + vn
			}
		default:
			if typ != protowire.BytesType {
				return 0, false // a message field that holds no message: the decoder says so
			}
			if ru.act == empty {
				n += tn + 1
				break
			}
			v, _ := protowire.ConsumeBytes(b[tn:])
			if !bytes.HasPrefix(v, ru.sub.prefix) {
				return 0, false
			}
			i := len(r.sizes)
			r.sizes = append(r.sizes, 0)
			child, ok := r.size(ru.sub, v[len(ru.sub.prefix):])
			if !ok {
				return 0, false
			}
			child += len(ru.sub.prefix)
			r.sizes[i] = child
			n += tn + protowire.SizeVarint(uint64(child)) + child
		}
		b = b[tn+vn:]
	}
	return n, true
}

// write appends msg rewritten by sh to dst; msg is one size found valid.
func (r *rewriter) write(dst []byte, sh *shape, msg []byte) []byte {
	if sh.pick != nil {
		if sh = sh.pick(msg); sh == nil {
			return append(dst, msg...)
		}
	}
	for b := msg; len(b) > 0; {
		num, typ, tn := protowire.ConsumeTag(b)
		vn := protowire.ConsumeFieldValue(num, typ, b[tn:])
		switch ru := sh.rule(num); ru.act {
		case keep:
			dst = append(dst, b[:tn+vn]...)
		case keepIf:
			if keptIf(ru, typ, b[tn:]) {
				dst = append(dst, b[:tn+vn]...)
			}
		case empty:
			dst = append(append(dst, b[:tn]...), 0)
		case rewrite:
			v, _ := protowire.ConsumeBytes(b[tn:])
			child := r.sizes[r.next]
			r.next++
			dst = protowire.AppendVarint(append(dst, b[:tn]...), uint64(child))
			dst = r.write(append(dst, ru.sub.prefix...), ru.sub, v[len(ru.sub.prefix):])
		}
		b = b[tn+vn:]
	}
	return dst
}

// The shapes: WatchEvent.object of an ADDED, MODIFIED or DELETED event → RawExtension.raw → "k8s\x00" + Unknown, whose kind picks the
// shape of Unknown.raw, the object. Of any object whose field 1 is its ObjectMeta, the
// managedFields' entries keep what Registry.Transform keeps of them (no field sets); of a Pod also what slimPod (package tracer, the Pods'
// Transform) drops, so that the Pod decoded from the frame rewritten is, once through
// Transform, the Pod decoded from the frame as sent (TestStripRealObjects, FuzzStripPod). The
// field numbers are read from the protobuf tags of the API's Go types, by field name.
var (
	watchEvent   = &shape{pick: objectEvent}
	objectEvents = shapeOf[metav1.WatchEvent](keep, rules{"Object": {act: rewrite, sub: rawExtension}})
	rawExtension = shapeOf[runtime.RawExtension](keep, rules{"Raw": {act: rewrite, sub: envelope}})
	envelope     = &shape{prefix: []byte("k8s\x00"), pick: objectShape}

	objectMeta = shapeOf[metav1.ObjectMeta](keep, rules{"ManagedFields": {act: rewrite, sub: managedField}})
	// Of an entry, what Registry.Transform keeps: not its apiVersion, field set or their type.
	managedField = shapeOf[metav1.ManagedFieldsEntry](drop, rules{"Manager": {act: keep}, "Operation": {act: keep},
		"Time": {act: keep}, "Subresource": {act: keep}})
	anyObject = &shape{rules: []rule{1: {act: rewrite, sub: objectMeta}}, others: keep} // metaFirstKinds: field 1

	podObject = shapeOf[corev1.Pod](keep, rules{"ObjectMeta": {act: rewrite, sub: podMeta}, "Spec": {act: rewrite, sub: podSpec}, "Status": {act: rewrite, sub: podStatus}})
	// Of a Pod's annotations, only the trace context's entry (slimPod keeps it alone).
	podMeta = shapeOf[metav1.ObjectMeta](keep, rules{"ManagedFields": {act: rewrite, sub: managedField},
		"Annotations": {act: keepIf, test: isTraceContextEntry}})
	// Of a Pod's spec, what is read: its node, its scheduler, its scheduling gates, its containers and volumes.
	podSpec = shapeOf[corev1.PodSpec](drop, rules{"NodeName": {act: keep}, "SchedulerName": {act: keep}, "SchedulingGates": {act: keep},
		"Volumes": {act: rewrite, sub: volume}, "InitContainers": {act: rewrite, sub: container}, "Containers": {act: rewrite, sub: container}})
	volume = shapeOf[corev1.Volume](keep, rules{"VolumeSource": {act: rewrite, sub: volumeSource}})
	// Of a volume, its kind is read (every source is a message) and a claim's name.
	volumeSource = shapeOf[corev1.VolumeSource](empty, rules{"PersistentVolumeClaim": {act: keep}})
	container    = shapeOf[corev1.Container](drop, rules{"Name": {act: keep}, "Image": {act: keep}, "RestartPolicy": {act: keep},
		"Lifecycle": {act: keep}, "LivenessProbe": {act: empty}, "ReadinessProbe": {act: empty}, "StartupProbe": {act: empty}})
	// Of its status, what is read: its phase, conditions, reason, start, nomination, addresses
	// and containers; not its QoS class, message or the rest.
	podStatus = shapeOf[corev1.PodStatus](drop, rules{"Phase": {act: keep}, "Conditions": {act: keep}, "Reason": {act: keep},
		"StartTime": {act: keep}, "NominatedNodeName": {act: keep}, "PodIP": {act: keep}, "PodIPs": {act: keep},
		"InitContainerStatuses": {act: rewrite, sub: containerStatus}, "ContainerStatuses": {act: rewrite, sub: containerStatus}})
	// Of a container's status, its state, readiness, start and restarts; not its image, IDs
	// or last state.
	containerStatus = shapeOf[corev1.ContainerStatus](drop, rules{"Name": {act: keep}, "State": {act: keep}, "Ready": {act: keep},
		"RestartCount": {act: keep}, "Started": {act: keep}})
)

// keptIf says whether a keepIf field (at field, its value after the tag) is kept: a length-
// delimited one its rule's test accepts.
func keptIf(ru rule, typ protowire.Type, field []byte) bool {
	if typ != protowire.BytesType {
		return false
	}
	v, n := protowire.ConsumeBytes(field)
	return n >= 0 && ru.test(v)
}

// isTraceContextEntry tells the map entry of an object's annotations whose key (field 1 of a
// protobuf map entry) is tracing.k8s.io/traceparent.
func isTraceContextEntry(entry []byte) bool {
	key := ""
	for b := entry; len(b) > 0; {
		num, typ, tn := protowire.ConsumeTag(b)
		if tn < 0 {
			return false
		}
		vn := protowire.ConsumeFieldValue(num, typ, b[tn:])
		if vn < 0 {
			return false
		}
		if num == 1 && typ == protowire.BytesType {
			k, _ := protowire.ConsumeBytes(b[tn:])
			key = string(k) // the last one is the one decoded
		}
		b = b[tn+vn:]
	}
	return key == tracecontext.Annotation
}

// objectEvent is the shape of a WatchEvent whose object reaches the informers' Transform: an
// ADDED, MODIFIED or DELETED one. A BOOKMARK passes as it came: its object is read as it is
// (a Pod's annotation "k8s.io/initial-events-end" ends the initial list), never transformed.
func objectEvent(event []byte) *shape {
	var typ []byte
	for b := event; len(b) > 0; {
		num, wt, tn := protowire.ConsumeTag(b)
		if tn < 0 {
			return nil
		}
		vn := protowire.ConsumeFieldValue(num, wt, b[tn:])
		if vn < 0 {
			return nil
		}
		if num == eventType && wt == protowire.BytesType {
			typ, _ = protowire.ConsumeBytes(b[tn:]) // the last one is the one decoded
		}
		b = b[tn+vn:]
	}
	switch string(typ) {
	case string(apiwatch.Added), string(apiwatch.Modified), string(apiwatch.Deleted):
		return objectEvents
	}
	return nil
}

var eventType = protowire.Number(protobufNumber(reflect.TypeFor[metav1.WatchEvent](), "Type"))

// rules are what becomes of a message's fields, by their Go names.
type rules map[string]rule

// shapeOf is the shape of T's protobuf encoding: rs by the numbers of the fields they name,
// others for the rest. A name T has not, or without a protobuf tag, is a mistake: it panics.
func shapeOf[T any](others action, rs rules) *shape {
	t := reflect.TypeFor[T]()
	s := &shape{others: others}
	for name, r := range rs {
		n := protobufNumber(t, name)
		if n <= 0 {
			panic(fmt.Sprintf("watch: %s has no protobuf field %s", t, name))
		}
		for len(s.rules) <= n {
			s.rules = append(s.rules, rule{})
		}
		s.rules[n] = r
	}
	return s
}

// protobufNumber is the field number of t's Go field name in its protobuf tag
// (`protobuf:"bytes,2,opt,name=spec"`), or 0.
func protobufNumber(t reflect.Type, name string) int {
	f, ok := t.FieldByName(name)
	if !ok || len(f.Index) != 1 {
		return 0
	}
	parts := strings.Split(f.Tag.Get("protobuf"), ",")
	if len(parts) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(parts[1])
	return n
}

// unknownShapes are the shapes of the Unknown envelope by the "apiVersion/Kind" it holds: its
// raw bytes (the object) rewritten by the object's shape.
var unknownShapes = sync.OnceValue(func() map[string]*shape {
	out := map[string]*shape{}
	anyKind := shapeOf[runtime.Unknown](keep, rules{"Raw": {act: rewrite, sub: anyObject}})
	for k := range metaFirstKinds() {
		out[k] = anyKind
	}
	out["v1/Pod"] = shapeOf[runtime.Unknown](keep, rules{"Raw": {act: rewrite, sub: podObject}})
	return out
})

// objectShape is the shape of an Unknown envelope that holds, in protobuf, an object of a type
// whose field 1 is its ObjectMeta; nil for a Status (an ERROR event), a list or an encoding
// other than plain protobuf, which pass through as they came.
func objectShape(unknown []byte) *shape {
	var apiVersion, kind []byte
	for b := unknown; len(b) > 0; {
		num, typ, tn := protowire.ConsumeTag(b)
		if tn < 0 {
			return nil
		}
		vn := protowire.ConsumeFieldValue(num, typ, b[tn:])
		if vn < 0 {
			return nil
		}
		v, _ := protowire.ConsumeBytes(b[tn:])
		switch {
		case typ != protowire.BytesType:
		case num == 1: // typeMeta
			apiVersion, kind = typeMeta(v)
		case num == 3 && len(v) > 0: // contentEncoding
			return nil
		case num == 4 && len(v) > 0 && string(v) != runtime.ContentTypeProtobuf: // contentType
			return nil
		}
		b = b[tn+vn:]
	}
	return unknownShapes()[string(apiVersion)+"/"+string(kind)]
}

// typeMeta reads a TypeMeta's apiVersion (1) and kind (2).
func typeMeta(b []byte) (apiVersion, kind []byte) {
	for len(b) > 0 {
		num, typ, tn := protowire.ConsumeTag(b)
		if tn < 0 {
			return nil, nil
		}
		vn := protowire.ConsumeFieldValue(num, typ, b[tn:])
		if vn < 0 {
			return nil, nil
		}
		if typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(b[tn:])
			switch num {
			case 1:
				apiVersion = v
			case 2:
				kind = v
			}
		}
		b = b[tn+vn:]
	}
	return apiVersion, kind
}

// metaFirstKinds are the "apiVersion/Kind"s of client-go's scheme whose Go type holds its
// ObjectMeta as protobuf field 1.
var metaFirstKinds = sync.OnceValue(func() map[string]bool {
	out := map[string]bool{}
	objectMeta := reflect.TypeFor[metav1.ObjectMeta]()
	for gvk, t := range scheme.Scheme.AllKnownTypes() {
		if t.Kind() != reflect.Struct {
			continue
		}
		f, ok := t.FieldByName("ObjectMeta")
		if ok && f.Type == objectMeta && len(f.Index) == 1 && strings.HasPrefix(f.Tag.Get("protobuf"), "bytes,1,opt,name=metadata") {
			out[gvk.GroupVersion().String()+"/"+gvk.Kind] = true
		}
	}
	return out
})
