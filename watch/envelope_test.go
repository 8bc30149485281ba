package watch_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/randfill"

	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/watch"
)

// TestEnvelopesDecodeAsClientGo: every whole object of the captures and the ceiling's recording,
// in every kind of watch event, as sent and stripped, decodes through the envelopes read in
// place to what client-go's decoder makes of it, exactly.
func TestEnvelopesDecodeAsClientGo(t *testing.T) {
	var objs []runtime.Object
	objs = append(objs, realNodeObjects(t)...)
	for _, list := range wholeObjects(t, 50) {
		objs = append(objs, list...)
	}
	objs = append(objs, &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Code: 410, Reason: metav1.StatusReasonExpired})
	var stream []byte
	for i, o := range objs {
		stream = append(stream, watchFrame(t, []string{"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"}[i%5], o)...)
	}
	for _, strip := range []bool{false, true} {
		read := func(info runtime.SerializerInfo) []runtime.Object {
			var body io.ReadCloser = io.NopCloser(bytes.NewReader(stream))
			if strip {
				body = stripped(t, runtime.ContentTypeProtobuf+";stream=watch", stream)
			}
			got, err := decodeWatch(info, body)
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		want, got := read(protobufInfo(t)), read(watch.ProtobufEnvelopes())
		if len(got) != len(objs) || len(want) != len(objs) {
			t.Fatalf("stripped %v: %d and %d objects decoded, want %d", strip, len(got), len(want), len(objs))
		}
		for i := range want {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Errorf("stripped %v: %T %d decodes in place as\n%#v\nwant\n%#v", strip, want[i], i, got[i], want[i])
			}
		}
	}
}

// FuzzEnvelopes feeds arbitrary bytes as a watch event: read in place or by client-go, it makes
// the same event type, the same object and the same error.
func FuzzEnvelopes(f *testing.F) {
	f.Add(watchFrame(f, "ADDED", randomPod(randfill.NewWithSeed(1)))[4:])
	f.Add(watchFrame(f, "MODIFIED", &corev1.Event{TypeMeta: metav1.TypeMeta{Kind: "Event", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "ns"}, Reason: "Pulled"})[4:])
	f.Add(watchFrame(f, "ERROR", &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Code: 410})[4:])
	f.Add(watchFrame(f, "BOOKMARK", &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{ResourceVersion: "7"}})[4:])
	f.Add(watchFrame(f, "DELETED", &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}})[4:])
	mine, theirs := watch.ProtobufEnvelopes(), protobufInfo(f)
	f.Fuzz(func(t *testing.T, event []byte) {
		frame := append(binary.BigEndian.AppendUint32(nil, uint32(len(event))), event...)
		got, want := decodeOne(mine, frame), decodeOne(theirs, frame)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("read in place:\n%#v\nclient-go:\n%#v", got, want)
		}
	})
}

// decoded is what client-go's watch decoder makes of one frame.
type decoded struct {
	Type   string
	Object runtime.Object
	Err    string
}

func decodeOne(info runtime.SerializerInfo, frame []byte) decoded {
	typ, obj, err := newWatchDecoder(info, io.NopCloser(bytes.NewReader(frame))).Decode()
	d := decoded{Type: string(typ), Object: obj}
	if err != nil {
		d.Err = fmt.Sprint(err)
	}
	return d
}

// BenchmarkWatchDecodeEnvelopes is BenchmarkWatchDecode's stream stripped, its envelopes read in
// place, as readyspan's protobuf client reads it.
func BenchmarkWatchDecodeEnvelopes(b *testing.B) {
	info := watch.ProtobufEnvelopes()
	var stream []byte
	pods := wholeObjects(b, 0)[tracer.StreamPods]
	for _, o := range pods {
		stream = append(stream, watchFrame(b, "MODIFIED", o)...)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(stream)))
	for b.Loop() {
		body := stripped(b, runtime.ContentTypeProtobuf+";stream=watch", stream)
		if objs, err := decodeWatch(info, body); err != nil || len(objs) != len(pods) {
			b.Fatalf("%d objects, %v", len(objs), err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(pods)), "ns/event")
}
