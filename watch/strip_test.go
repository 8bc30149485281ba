package watch_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	restwatch "k8s.io/client-go/rest/watch"
	"sigs.k8s.io/randfill"

	"github.com/readyspan/readyspan/internal/captures"
	"github.com/readyspan/readyspan/tracecontext"
	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/watch"
)

// wholeObjects are the objects of the ceiling's recording (test/scale/fakeapi), whole as the
// apiserver sent them, managedFields and their field sets included, by stream: the first
// perStream of each, or all for 0.
func wholeObjects(t testing.TB, perStream int) map[watch.Stream][]runtime.Object {
	t.Helper()
	f, err := openRecording()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[watch.Stream][]runtime.Object{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(h.Name)
		if !strings.HasPrefix(name, "watch.") || !strings.HasSuffix(name, ".jsonl") {
			continue
		}
		stream := watch.Stream(strings.TrimSuffix(strings.TrimPrefix(name, "watch."), ".jsonl"))
		sc := bufio.NewScanner(tr)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() && (perStream == 0 || len(out[stream]) < perStream) {
			var l struct{ Object json.RawMessage }
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Fatal(err)
			}
			obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(l.Object, nil, nil)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			out[stream] = append(out[stream], obj)
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func openRecording() (io.ReadCloser, error) {
	f, err := os.Open(filepath.Join("..", "test", "scale", "fakeapi", "testdata", "kwok-25.tar.gz"))
	if err != nil {
		return nil, err
	}
	z, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{z, f}, nil
}

// watchFrame is one event of a protobuf watch stream as the apiserver writes it.
func watchFrame(t testing.TB, typ string, obj runtime.Object) []byte {
	t.Helper()
	info := protobufInfo(t)
	raw, err := runtime.Encode(info.Serializer, obj)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := (&metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: raw}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(ev))), ev...)
}

func protobufInfo(t testing.TB) runtime.SerializerInfo {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	if !ok {
		t.Fatal("no protobuf serializer in client-go's scheme")
	}
	return info
}

// decodeWatch reads a protobuf watch stream as client-go's watch does.
func decodeWatch(info runtime.SerializerInfo, stream io.ReadCloser) ([]runtime.Object, error) {
	dec := newWatchDecoder(info, stream)
	var out []runtime.Object
	for {
		_, obj, err := dec.Decode()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, obj)
	}
}

// newWatchDecoder is client-go's watch decoder of a stream, with info's decoders.
func newWatchDecoder(info runtime.SerializerInfo, stream io.ReadCloser) *restwatch.Decoder {
	return restwatch.NewDecoder(streaming.NewDecoder(info.StreamSerializer.Framer.NewFrameReader(stream), info.StreamSerializer.Serializer), info.Serializer)
}

// slimManagedFields is obj with its managedFields' entries as Transform keeps them (manager,
// operation, time, subresource; no field set), and nothing else changed.
func slimManagedFields(obj runtime.Object) runtime.Object {
	c := obj.DeepCopyObject()
	if m, err := meta.Accessor(c); err == nil {
		mf := m.GetManagedFields()
		for i, f := range mf {
			mf[i] = metav1.ManagedFieldsEntry{Manager: f.Manager, Operation: f.Operation, Time: f.Time, Subresource: f.Subresource}
		}
	}
	return c
}

// stripped runs a watch stream through the transport wrapper, as the response to a watch.
func stripped(t testing.TB, contentType string, stream []byte) io.ReadCloser {
	t.Helper()
	rt := watch.StripUnread(roundTrip(func(*http.Request) (*http.Response, error) {
		h := http.Header{}
		h.Set("Content-Type", contentType)
		return &http.Response{StatusCode: http.StatusOK, Header: h, Body: io.NopCloser(bytes.NewReader(stream))}, nil
	}))
	resp, err := rt.RoundTrip(&http.Request{URL: &url.URL{Path: "/api/v1/pods"}})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Body
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// realNodeObjects are the whole objects of the real node's captures (tracer/testdata/real-node/run*:
// lists and, of one run, the watch streams, as kubectl and the apiserver gave them), each with
// its kind set as the apiserver sends it.
func realNodeObjects(t testing.TB) []runtime.Object {
	t.Helper()
	files, err := filepath.Glob(captures.Path("run*/*.json*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no real-node captures: %v", err)
	}
	var out []runtime.Object
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var raws [][]byte
		if strings.HasSuffix(f, ".jsonl") {
			for line := range bytes.Lines(b) {
				var l struct{ Object json.RawMessage }
				if err := json.Unmarshal(line, &l); err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				raws = append(raws, l.Object)
			}
		} else if filepath.Base(f) != "apiserver-version.json" {
			raws = append(raws, b)
		}
		for _, raw := range raws {
			out = append(out, decodeWhole(t, f, raw)...)
		}
	}
	return out
}

// decodeWhole decodes an object, or a list's items, with each one's kind set.
func decodeWhole(t testing.TB, file string, raw []byte) []runtime.Object {
	t.Helper()
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(raw, nil, nil)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	objs := []runtime.Object{obj}
	if meta.IsListType(obj) {
		if objs, err = meta.ExtractList(obj); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	for _, o := range objs {
		gvks, _, err := scheme.Scheme.ObjectKinds(o)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		o.GetObjectKind().SetGroupVersionKind(gvks[0])
	}
	return objs
}

// TestStripRealObjects runs every whole object of the real captures, in the protobuf the
// apiserver sends, through the stripping and client-go's watch decoder: each must decode to
// what Transform keeps of the object as sent, exactly, and but for a Pod (whose unread spec
// is dropped too) to the object with its managedFields as Transform keeps them and nothing
// else changed.
func TestStripRealObjects(t *testing.T) {
	info := protobufInfo(t)
	var stream []byte
	var want []runtime.Object
	for _, objs := range wholeObjects(t, 0) {
		want = append(want, objs...)
	}
	want = append(want, realNodeObjects(t)...)
	for _, o := range want {
		stream = append(stream, watchFrame(t, "MODIFIED", o)...)
	}
	// What must pass through as it came: an ERROR event's Status; a bookmark, whose annotation
	// ends the initial list.
	status := &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired}
	stream = append(stream, watchFrame(t, "ERROR", status)...)
	want = append(want, status)
	bookmark := &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{ResourceVersion: "7", Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
	stream = append(stream, watchFrame(t, "BOOKMARK", bookmark)...)
	want = append(want, bookmark)

	got, err := decodeWatch(info, stripped(t, runtime.ContentTypeProtobuf+";stream=watch", stream))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("decoded %d objects, want %d", len(got), len(want))
	}
	withFieldSets, pods, kinds := 0, 0, map[string]bool{}
	for i := range want {
		kinds[fmt.Sprintf("%T", want[i])] = true
		if m, err := meta.Accessor(want[i]); err == nil {
			for _, f := range m.GetManagedFields() {
				if f.FieldsV1 != nil {
					withFieldSets++
					break
				}
			}
		}
		if _, ok := want[i].(*corev1.Pod); ok && i < len(want)-1 {
			pods++
		} else if !apiequality.Semantic.DeepEqual(got[i], slimManagedFields(want[i])) {
			t.Fatalf("object %d (%T) differs once stripped:\nwant %s\ngot  %s", i, want[i], jsonText(slimManagedFields(want[i])), jsonText(got[i]))
		}
		a, _ := tracer.Kinds.Transform(got[i].DeepCopyObject())
		b, _ := tracer.Kinds.Transform(want[i].DeepCopyObject())
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("object %d (%T): Transform keeps something else once stripped:\nwant %s\ngot  %s", i, want[i], jsonText(b.(runtime.Object)), jsonText(a.(runtime.Object)))
		}
	}
	if withFieldSets < len(want)/2 || pods < 1000 || len(kinds) < 8 {
		t.Fatalf("%d of %d objects had field sets, %d Pods, %d kinds: not the captures meant", withFieldSets, len(want), pods, len(kinds))
	}
	t.Logf("%d objects (%d Pods) of %d kinds", len(want), pods, len(kinds))
	if got := got[len(got)-1].(*corev1.Pod).Annotations; got[metav1.InitialEventsAnnotationKey] != "true" {
		t.Errorf("the bookmark's annotations became %v", got)
	}

	// The bytes client-go reads shrink by the field sets and the unread parts of the Pods.
	out, _ := io.ReadAll(stripped(t, runtime.ContentTypeProtobuf+";stream=watch", stream))
	t.Logf("the stream's %d bytes stripped to %d", len(stream), len(out))
	if len(out) > len(stream)*3/4 {
		t.Errorf("stripped stream is %d bytes of %d", len(out), len(stream))
	}
	// Not a protobuf watch: as it came.
	for _, ct := range []string{runtime.ContentTypeProtobuf, runtime.ContentTypeJSON + ";stream=watch"} {
		same, _ := io.ReadAll(stripped(t, ct, stream))
		if !bytes.Equal(same, stream) {
			t.Errorf("%s: the response changed", ct)
		}
	}
}

// TestStripFramePassesThrough: what is not on the path as the API's encoding lays it out is
// handed on byte for byte.
func TestStripFramePassesThrough(t *testing.T) {
	pod := wholeObjects(t, 1)[tracer.StreamPods][0]
	frame := watchFrame(t, "ADDED", pod)
	var ev metav1.WatchEvent
	if err := ev.Unmarshal(frame[4:]); err != nil {
		t.Fatal(err)
	}
	var unk runtime.Unknown
	if err := unk.Unmarshal(ev.Object.Raw[4:]); err != nil {
		t.Fatal(err)
	}
	for name, change := range map[string]func(ev *metav1.WatchEvent, unk *runtime.Unknown){
		"JSON inside":           func(_ *metav1.WatchEvent, u *runtime.Unknown) { u.ContentType = runtime.ContentTypeJSON },
		"compressed":            func(_ *metav1.WatchEvent, u *runtime.Unknown) { u.ContentEncoding = "gzip" },
		"a kind not in scheme":  func(_ *metav1.WatchEvent, u *runtime.Unknown) { u.Kind = "Widget" },
		"a list":                func(_ *metav1.WatchEvent, u *runtime.Unknown) { u.Kind = "PodList" },
		"no envelope":           func(ev *metav1.WatchEvent, u *runtime.Unknown) { ev.Object.Raw = u.Raw },
		"a truncated object":    func(_ *metav1.WatchEvent, u *runtime.Unknown) { u.Raw = u.Raw[:len(u.Raw)/3] },
		"a truncated envelope?": func(ev *metav1.WatchEvent, _ *runtime.Unknown) { ev.Object.Raw = ev.Object.Raw[:40] },
	} {
		e, u := ev, unk
		u.Raw = append([]byte(nil), unk.Raw...)
		ub, _ := u.Marshal()
		e.Object.Raw = append([]byte("k8s\x00"), ub...)
		change(&e, &u)
		if name != "no envelope" && name != "a truncated envelope?" {
			ub, _ = u.Marshal()
			e.Object.Raw = append([]byte("k8s\x00"), ub...)
		}
		b, _ := e.Marshal()
		got := watch.StripFrame(nil, b)
		if !bytes.Equal(got[4:], b) || binary.BigEndian.Uint32(got) != uint32(len(b)) {
			if name == "a truncated object" || name == "a truncated envelope?" {
				continue // invalid: what comes out need only not be longer; the fuzz target holds it
			}
			t.Errorf("%s: rewritten", name)
		}
	}
}

// TestStripperReads: the stripper hands on the same bytes however the stream comes in pieces,
// a frame too large to rewrite included, and a stream cut inside a frame ends in
// io.ErrUnexpectedEOF after the whole frames before it.
func TestStripperReads(t *testing.T) {
	var stream []byte
	for _, o := range wholeObjects(t, 0)[tracer.StreamPods][:200] {
		stream = append(stream, watchFrame(t, "MODIFIED", o)...)
	}
	big := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "big"}, Data: map[string]string{"k": strings.Repeat("x", 5<<20)}}
	stream = append(stream, watchFrame(t, "ADDED", big)...)
	last := watchFrame(t, "MODIFIED", wholeObjects(t, 1)[tracer.StreamPods][0])
	stream = append(stream, last...)
	want, err := io.ReadAll(stripped(t, runtime.ContentTypeProtobuf+";stream=watch", stream))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(want, []byte(big.Data["k"])) {
		t.Fatal("the large frame did not pass through")
	}
	body := func(r io.Reader) io.ReadCloser {
		rt := watch.StripUnread(roundTrip(func(*http.Request) (*http.Response, error) {
			h := http.Header{}
			h.Set("Content-Type", runtime.ContentTypeProtobuf+";stream=watch")
			return &http.Response{StatusCode: http.StatusOK, Header: h, Body: io.NopCloser(r)}, nil
		}))
		resp, err := rt.RoundTrip(&http.Request{URL: &url.URL{Path: "/api/v1/pods"}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Body
	}
	for name, r := range map[string]io.Reader{
		"one byte at a time":  iotest.OneByteReader(bytes.NewReader(stream)),
		"half of each read":   iotest.HalfReader(bytes.NewReader(stream)),
		"EOF with the data":   iotest.DataErrReader(bytes.NewReader(stream)),
		"a byte at a time, 2": iotest.DataErrReader(iotest.OneByteReader(bytes.NewReader(stream))),
	} {
		got, err := io.ReadAll(body(r))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes of %d, %v", name, len(got), len(want), err)
		}
	}
	cut := len(stream) - 100
	got, err := io.ReadAll(body(iotest.HalfReader(bytes.NewReader(stream[:cut]))))
	if err != io.ErrUnexpectedEOF {
		t.Errorf("cut inside a frame: %v", err)
	}
	if whole := len(want) - len(watch.StripFrame(nil, last[4:])); len(got) != whole {
		t.Errorf("cut inside a frame: handed on %d bytes, want the %d of the whole frames", len(got), whole)
	}
}

// TestNewClientsStripsFieldSets: the client readyspan watches through hands the informers
// objects without field sets, and the JSON one objects as sent.
func TestNewClientsStripsFieldSets(t *testing.T) {
	objects := capturedObjects(t)
	objects[tracer.StreamPods] = wholeObjects(t, 20)[tracer.StreamPods]
	for _, enc := range []watch.Encoding{watch.EncodingProtobuf, watch.EncodingJSON} {
		srv := newEncodingServer(t, objects, true, false)
		client, jsonClient, err := watch.NewClients(&rest.Config{Host: srv.URL}, enc)
		if err != nil {
			t.Fatal(err)
		}
		w := watch.NewWatcher(client, tracer.Kinds, watch.Config{Encoding: enc, JSONClient: jsonClient}, nil, nil)
		var mu sync.Mutex
		fieldSets := 0
		w.SetTransform(func(obj any) (any, error) {
			if m, err := meta.Accessor(obj); err == nil {
				for _, f := range m.GetManagedFields() {
					if f.FieldsV1 != nil {
						mu.Lock()
						fieldSets++
						mu.Unlock()
					}
				}
			}
			return tracer.Kinds.Transform(obj)
		})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		w.Start(ctx)
		if err := w.WaitForSync(ctx); err != nil {
			cancel()
			t.Fatal(err)
		}
		cancel()
		mu.Lock()
		if enc == watch.EncodingProtobuf && fieldSets != 0 {
			t.Errorf("protobuf: %d field sets reached the informers", fieldSets)
		}
		if enc == watch.EncodingJSON && fieldSets == 0 {
			t.Errorf("JSON: no field set reached the informers: the test's objects have none")
		}
		mu.Unlock()
	}
}

// FuzzStripFrame feeds arbitrary bytes as a watch event: the stripping never panics, never
// lengthens a frame, and an event it rewrites that client-go decodes as sent decodes the same
// stripped, but for the managedFields Transform slims (a Pod: to what Transform keeps of it,
// exactly). (An event it cannot follow, a group protobuf's own parser rejects say, passes
// through as it came.)
func FuzzStripFrame(f *testing.F) {
	now := metav1.Now()
	managed := []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
		Time: &now, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:phase":{}}}`), Subresource: "status"}}
	f.Add(watchFrame(f, "ADDED", &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u", ManagedFields: managed},
		Spec:       corev1.PodSpec{NodeName: "n", Containers: []corev1.Container{{Name: "c", Image: "i"}}}})[4:])
	f.Add(watchFrame(f, "MODIFIED", &corev1.Event{TypeMeta: metav1.TypeMeta{Kind: "Event", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "ns", ManagedFields: managed}, Reason: "Pulled"})[4:])
	f.Add(watchFrame(f, "MODIFIED", randomPod(randfill.NewWithSeed(1)))[4:])
	f.Add(watchFrame(f, "BOOKMARK", &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{ResourceVersion: "7", Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}})[4:])
	f.Add(watchFrame(f, "ERROR", &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Code: 410})[4:])
	info := protobufInfo(f)
	f.Fuzz(func(t *testing.T, event []byte) {
		out := watch.StripFrame(nil, event)
		if len(out) < 4 || int(binary.BigEndian.Uint32(out)) != len(out)-4 || len(out)-4 > len(event) {
			t.Fatalf("frame of %d bytes became %d, header %x", len(event), len(out)-4, out[:min(4, len(out))])
		}
		if bytes.Equal(out[4:], event) {
			return // passed through as it came: what client-go makes of it is as before
		}
		in := append(binary.BigEndian.AppendUint32(nil, uint32(len(event))), event...)
		want, err := decodeWatch(info, io.NopCloser(bytes.NewReader(in)))
		if err != nil || len(want) != 1 {
			return
		}
		got, err := decodeWatch(info, io.NopCloser(bytes.NewReader(out)))
		if err != nil || len(got) != 1 {
			t.Fatalf("decoded as sent, not once stripped: %v", err)
		}
		if _, pod := want[0].(*corev1.Pod); !pod && !apiequality.Semantic.DeepEqual(got[0], slimManagedFields(want[0])) {
			t.Fatalf("stripped differs:\nwant %s\ngot  %s", jsonText(slimManagedFields(want[0])), jsonText(got[0]))
		}
		a, _ := tracer.Kinds.Transform(got[0])
		b, _ := tracer.Kinds.Transform(want[0])
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("Transform keeps something else once stripped:\nwant %s\ngot  %s", jsonText(b.(runtime.Object)), jsonText(a.(runtime.Object)))
		}
	})
}

// randomPod is a Pod with every field filled at random from the filler's source (nil now and
// then), so that the stripping meets fields no capture holds.
func randomPod(f *randfill.Filler) *corev1.Pod {
	var pod corev1.Pod
	f.NilChance(0.1).NumElements(1, 2).Funcs(
		func(q *resource.Quantity, c randfill.Continue) {
			*q = *resource.NewQuantity(c.Int63n(1<<20), resource.BinarySI)
		},
		func(tm *metav1.Time, c randfill.Continue) { *tm = metav1.Unix(c.Int63n(1<<32), 0) },
	).Fill(&pod)
	pod.TypeMeta = metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}
	// The one annotation Transform keeps, with a value from the filler (valid, hostile or too
	// long), on most Pods, beside the random others it drops.
	var tp string
	f.Fill(&tp)
	switch len(tp) % 4 {
	case 0:
	case 1:
		tp = strings.Repeat(tp, 1+2*tracecontext.MaxLen/(len(tp)+1)) // past the bound
		fallthrough
	default:
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[tracecontext.Annotation] = tp
	}
	return &pod
}

// checkStrippedPod holds a Pod's frame stripped to what Transform keeps of it: decoded from the
// frame as sent and from the frame stripped, both keep exactly the same.
func checkStrippedPod(t *testing.T, info runtime.SerializerInfo, pod *corev1.Pod) (stripped bool) {
	t.Helper()
	frame := watchFrame(t, "MODIFIED", pod)
	out := watch.StripFrame(nil, frame[4:])
	want, err := decodeWatch(info, io.NopCloser(bytes.NewReader(frame)))
	if err != nil || len(want) != 1 {
		return false // the filler made what the decoder refuses: not the stripping's to judge
	}
	got, err := decodeWatch(info, io.NopCloser(bytes.NewReader(out)))
	if err != nil || len(got) != 1 {
		t.Fatalf("decoded as sent, not once stripped: %v", err)
	}
	a, _ := tracer.Kinds.Transform(got[0])
	b, _ := tracer.Kinds.Transform(want[0])
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("Transform keeps something else once stripped:\nwant %s\ngot  %s", jsonText(b.(runtime.Object)), jsonText(a.(runtime.Object)))
	}
	return len(out) < len(frame)
}

// TestStripRandomPods: Pods with every field filled, so that what Transform keeps of a Pod and
// what the stripping drops cannot drift apart unseen in a field the captures lack.
func TestStripRandomPods(t *testing.T) {
	info := protobufInfo(t)
	shorter := 0
	const n = 300
	for seed := range int64(n) {
		if checkStrippedPod(t, info, randomPod(randfill.NewWithSeed(seed))) {
			shorter++
		}
	}
	if shorter < n*9/10 {
		t.Errorf("only %d of %d random Pods were stripped", shorter, n)
	}
}

// FuzzStripPod fills a Pod from the fuzzer's bytes: what Transform keeps of it is the same
// decoded from its frame as sent and stripped.
func FuzzStripPod(f *testing.F) {
	for _, seed := range []string{"", "pod", "\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a"} {
		f.Add([]byte(seed))
	}
	info := protobufInfo(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		checkStrippedPod(t, info, randomPod(randfill.NewFromGoFuzz(data)))
	})
}

// BenchmarkWatchDecode is client-go's decoding of a real protobuf watch stream (the Pods of the
// ceiling's recording), as sent and with the field sets stripped first.
func BenchmarkWatchDecode(b *testing.B) {
	info := protobufInfo(b)
	var stream []byte
	pods := wholeObjects(b, 0)[tracer.StreamPods]
	for _, o := range pods {
		stream = append(stream, watchFrame(b, "MODIFIED", o)...)
	}
	for _, bc := range []struct {
		name  string
		strip bool
	}{{"as sent", false}, {"stripped", true}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(stream)))
			for b.Loop() {
				var body io.ReadCloser = io.NopCloser(bytes.NewReader(stream))
				if bc.strip {
					body = stripped(b, runtime.ContentTypeProtobuf+";stream=watch", stream)
				}
				if objs, err := decodeWatch(info, body); err != nil || len(objs) != len(pods) {
					b.Fatalf("%d objects, %v", len(objs), err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(pods)), "ns/event")
		})
	}
}
