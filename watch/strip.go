package watch

import (
	"bytes"
	"encoding/binary"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
)

// The managedFields' field sets (fieldsV1) are about half the bytes of every object a watch
// sends, and nothing of readyspan reads them: Transform drops them. client-go copies each
// watch event twice before decoding it (the WatchEvent's RawExtension, then the Unknown
// envelope) and copies each field set once more while decoding, so dropping them from the
// protobuf stream before client-go reads it saves those copies, their garbage and their
// decoding. Only that one field is dropped, and only where the path to it is what the
// protobuf encoding of the API says; anything else passes through byte for byte.

// stripFieldSets wraps a transport so that the protobuf watch streams it returns come without
// the managedFields' field sets.
func stripFieldSets(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err != nil || !isProtobufWatch(req, resp) {
			return resp, err
		}
		resp.Body = &fieldSetStripper{in: resp.Body}
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

// fieldSetStripper reads a protobuf watch stream (each frame a 4-byte big-endian length and a
// WatchEvent) and hands on each frame without its objects' field sets.
type fieldSetStripper struct {
	in   io.ReadCloser
	buf  []byte // the frame read, reused
	out  []byte // what is left to hand on of the frame rewritten
	pass int64  // bytes of a frame too large to rewrite, still to pass through
	w    []byte // the rewritten frame, reused
}

func (s *fieldSetStripper) Read(p []byte) (int, error) {
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
func (s *fieldSetStripper) next() error {
	var head [4]byte
	if _, err := io.ReadFull(s.in, head[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(head[:])
	if n > maxStrippedFrame {
		s.w = append(s.w[:0], head[:]...)
		s.out, s.pass = s.w, int64(n)
		return nil
	}
	if cap(s.buf) < int(n) {
		s.buf = make([]byte, n)
	}
	frame := s.buf[:n]
	if _, err := io.ReadFull(s.in, frame); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	s.w = stripFrame(s.w[:0], frame)
	s.out = s.w
	return nil
}

func (s *fieldSetStripper) Close() error { return s.in.Close() }

// stripFrame appends to dst the frame (its 4-byte length and the WatchEvent) without its
// object's field sets, or unchanged when its object is not one whose encoding is known.
func stripFrame(dst, event []byte) []byte {
	size, ok := watchEventPath.size(event)
	if !ok || size == len(event) {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(event)))
		return append(dst, event...)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(size))
	return watchEventPath.write(dst, event)
}

// level is one message on the path from a WatchEvent down to the field sets: the field that
// holds the next message (with a prefix before it, the protobuf envelope's magic number), or
// the field dropped at the end. check, when set, says whether the message's next level is
// known to be what the path expects.
type level struct {
	field  protowire.Number
	prefix []byte
	next   *level
	drop   protowire.Number
	check  func(msg []byte) bool
}

// The path: WatchEvent.object (2) → RawExtension.raw (1) → "k8s\x00" + Unknown.raw (2) → the
// object's metadata (1) → ObjectMeta.managedFields (17, each entry) → fieldsV1 (7), dropped.
// TestStripPathMatchesTypes holds the numbers to the API's Go types.
var watchEventPath = &level{field: 2, next: &level{field: 1, prefix: []byte("k8s\x00"), next: &level{
	field: 2, check: objectMetaFirst, next: &level{field: 1, next: &level{field: 17, next: &level{drop: 7}}}}}}

// size is the length of msg rewritten; false when msg is not a valid encoding of what the path
// expects, which then passes through as it came.
func (l *level) size(msg []byte) (int, bool) {
	if l.check != nil && !l.check(msg) {
		return len(msg), true
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
		switch {
		case num == l.drop && l.drop != 0:
		case num == l.field && l.next != nil && typ == protowire.BytesType:
			v, _ := protowire.ConsumeBytes(b[tn:])
			if !bytes.HasPrefix(v, l.prefix) {
				return 0, false
			}
			child, ok := l.next.size(v[len(l.prefix):])
			if !ok {
				return 0, false
			}
			inner := len(l.prefix) + child
			n += tn + protowire.SizeVarint(uint64(inner)) + inner
		default:
			n += tn + vn
		}
		b = b[tn+vn:]
	}
	return n, true
}

// write appends msg rewritten to dst; msg is one size found valid.
func (l *level) write(dst, msg []byte) []byte {
	if l.check != nil && !l.check(msg) {
		return append(dst, msg...)
	}
	for b := msg; len(b) > 0; {
		num, typ, tn := protowire.ConsumeTag(b)
		vn := protowire.ConsumeFieldValue(num, typ, b[tn:])
		switch {
		case num == l.drop && l.drop != 0:
		case num == l.field && l.next != nil && typ == protowire.BytesType:
			v, _ := protowire.ConsumeBytes(b[tn:])
			child, _ := l.next.size(v[len(l.prefix):])
			dst = append(dst, b[:tn]...)
			dst = protowire.AppendVarint(dst, uint64(len(l.prefix)+child))
			dst = append(dst, l.prefix...)
			dst = l.next.write(dst, v[len(l.prefix):])
		default:
			dst = append(dst, b[:tn+vn]...)
		}
		b = b[tn+vn:]
	}
	return dst
}

// objectMetaFirst tells whether an Unknown envelope holds, in protobuf, an object of a type
// whose field 1 is its ObjectMeta: a Status (an ERROR event), a list or an encoding other than
// plain protobuf passes through.
func objectMetaFirst(unknown []byte) bool {
	var apiVersion, kind []byte
	for b := unknown; len(b) > 0; {
		num, typ, tn := protowire.ConsumeTag(b)
		if tn < 0 {
			return false
		}
		vn := protowire.ConsumeFieldValue(num, typ, b[tn:])
		if vn < 0 {
			return false
		}
		v, _ := protowire.ConsumeBytes(b[tn:])
		switch {
		case typ != protowire.BytesType:
		case num == 1: // typeMeta
			apiVersion, kind = typeMeta(v)
		case num == 3 && len(v) > 0: // contentEncoding
			return false
		case num == 4 && len(v) > 0 && string(v) != runtime.ContentTypeProtobuf: // contentType
			return false
		}
		b = b[tn+vn:]
	}
	return metaFirstKinds()[string(apiVersion)+"/"+string(kind)]
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
// ObjectMeta as protobuf field 1, the path's next level.
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
