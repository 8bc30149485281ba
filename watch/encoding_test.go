package watch_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/readyspan/readyspan/internal/captures"
	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/watch"
)

func TestParseEncoding(t *testing.T) {
	for _, s := range []string{"protobuf", "json"} {
		if e, err := watch.ParseEncoding(s); err != nil || string(e) != s {
			t.Errorf("ParseEncoding(%q) = %q, %v", s, e, err)
		}
	}
	for _, s := range []string{"", "JSON", "proto", "cbor", "application/json"} {
		if _, err := watch.ParseEncoding(s); err == nil || !strings.Contains(err.Error(), "want protobuf or json") {
			t.Errorf("ParseEncoding(%q): %v, want an error naming the choices", s, err)
		}
	}
}

// TestWatchEncodingOnTheWire runs the watch.Watcher against an apiserver stand-in serving real captured
// objects (tracer/testdata/real-node) of every watched kind, in the encoding the request's
// Accept header asks for, both through a streamed initial list (client-go's WatchList) and
// through a LIST where the server refuses it. It checks what each kind's requests asked for,
// what the server answered in, and that the watch.Watcher decoded every object to the captured one.
func TestWatchEncodingOnTheWire(t *testing.T) {
	objects := capturedObjects(t)
	for _, tc := range []struct {
		name      string
		enc       watch.Encoding
		jsonOnly  watch.Stream // a kind marked as having no protobuf encoding, for the test
		noProto   bool         // the server answers JSON whatever is asked (as for a custom resource)
		cfgJSON   bool         // the rest config given names JSON as its content type
		watchList bool
		// accept and answered are what each kind's requests should ask for and get.
		accept, answered string
	}{
		{name: "protobuf, streamed list", enc: watch.EncodingProtobuf, watchList: true,
			accept: watch.AcceptProtobuf, answered: watch.ContentTypeProtobuf},
		{name: "protobuf, LIST", enc: watch.EncodingProtobuf,
			accept: watch.AcceptProtobuf, answered: watch.ContentTypeProtobuf},
		// A config that names a content type does not decide for readyspan.
		{name: "protobuf, the config naming JSON", enc: watch.EncodingProtobuf, cfgJSON: true, watchList: true,
			accept: watch.AcceptProtobuf, answered: watch.ContentTypeProtobuf},
		{name: "json, streamed list", enc: watch.EncodingJSON, watchList: true,
			accept: watch.ContentTypeJSON, answered: watch.ContentTypeJSON},
		{name: "json, LIST", enc: watch.EncodingJSON,
			accept: watch.ContentTypeJSON, answered: watch.ContentTypeJSON},
		// The fallback: a server with no protobuf answers JSON, which the client accepts.
		{name: "protobuf asked, JSON answered", enc: watch.EncodingProtobuf, noProto: true, watchList: true,
			accept: watch.AcceptProtobuf, answered: watch.ContentTypeJSON},
		{name: "a kind without protobuf", enc: watch.EncodingProtobuf, jsonOnly: tracer.StreamPods, watchList: true,
			accept: watch.AcceptProtobuf, answered: watch.ContentTypeProtobuf},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.jsonOnly != "" {
				k := kindOf(t, tc.jsonOnly)
				k.JSONOnly = true
				t.Cleanup(func() { k.JSONOnly = false })
			}
			srv := newEncodingServer(t, objects, tc.watchList, tc.noProto)
			cfg := &rest.Config{Host: srv.URL}
			if tc.cfgJSON {
				cfg.ContentType = runtime.ContentTypeJSON
			}
			client, jsonClient, err := watch.NewClients(cfg, tc.enc)
			if err != nil {
				t.Fatal(err)
			}
			w := watch.NewWatcher(client, tracer.Kinds, watch.Config{Encoding: tc.enc, JSONClient: jsonClient}, nil, nil)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			want := 0
			for _, objs := range objects {
				want += len(objs)
			}
			rec := watch.NewRecorder(tracer.Kinds, t.TempDir())
			got := map[watch.Stream][]runtime.Object{}
			done := make(chan struct{})
			go func() {
				defer close(done)
				for n := 0; n < want; n++ {
					select {
					case d := <-w.Deltas():
						k, ok := tracer.Kinds.OfObject(d.Object)
						if !ok {
							t.Errorf("delta of %T", d.Object)
							continue
						}
						got[k.Stream] = append(got[k.Stream], d.Object)
						rec.Write(d)
					case <-ctx.Done():
						return
					}
				}
			}()
			w.Start(ctx)
			syncCtx, syncCancel := context.WithTimeout(ctx, 20*time.Second)
			defer syncCancel()
			if err := w.WaitForSync(syncCtx); err != nil {
				t.Fatalf("sync: %v (requests: %v)", err, srv.requests())
			}
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("deltas: got %d kinds' objects, want every one of %d objects", len(got), want)
			}
			cancel()

			reqs := srv.requests()
			for stream := range objects {
				k := kindOf(t, stream)
				accept, answered := tc.accept, tc.answered
				if stream == tc.jsonOnly || k.JSONOnly {
					accept, answered = watch.ContentTypeJSON, watch.ContentTypeJSON
				}
				rs := reqs[k.GVR.Resource]
				if len(rs) == 0 {
					t.Errorf("%s: no request", stream)
				}
				lists := 0
				for _, r := range rs {
					if r.accept != accept {
						t.Errorf("%s: %s asked for %q, want %q", stream, r.what, r.accept, accept)
					}
					if r.what == "LIST" {
						lists++
					}
					if r.answered != "" && r.answered != answered {
						t.Errorf("%s: %s answered in %s, want %s", stream, r.what, r.answered, answered)
					}
				}
				if (lists > 0) == tc.watchList {
					t.Errorf("%s: %d LISTs, with the server streaming initial lists %v", stream, lists, tc.watchList)
				}
				// Every object decoded, to what was captured (less what Transform drops).
				wantObjs := transformed(t, objects[stream])
				sortByName(got[stream])
				if len(got[stream]) != len(wantObjs) {
					t.Errorf("%s: %d objects, want %d", stream, len(got[stream]), len(wantObjs))
					continue
				}
				for i := range wantObjs {
					if !apiequality.Semantic.DeepEqual(got[stream][i], wantObjs[i]) {
						t.Errorf("%s: object %d decoded differs:\nwant %s\ngot  %s", stream, i, jsonText(wantObjs[i]), jsonText(got[stream][i]))
					}
				}
			}

			// What was read in protobuf is recorded in JSON, and reads back the same.
			if err := rec.Close(); err != nil {
				t.Fatal(err)
			}
			files, _ := filepath.Glob(filepath.Join(rec.Dir(), "watch.*.jsonl"))
			if len(files) != len(objects) {
				t.Errorf("recorded %d streams, want %d", len(files), len(objects))
			}
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.HasPrefix(b, []byte(`{"type":"ADDED","object":{`)) {
					t.Errorf("%s is not JSON lines: %.40q", filepath.Base(f), b)
				}
			}
			deltas, err := tracer.Kinds.LoadRecording(rec.Dir())
			if err != nil {
				t.Fatalf("read the recording back: %v", err)
			}
			if len(deltas) != want {
				t.Errorf("recording holds %d deltas, want %d", len(deltas), want)
			}
		})
	}
}

// capturedObjects reads, for every kind the watch.Watcher watches, the last state of each object of
// the first real capture that holds the kind.
func capturedObjects(t *testing.T) map[watch.Stream][]runtime.Object {
	t.Helper()
	dirs, err := filepath.Glob(captures.Path("*"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(dirs)
	out := map[watch.Stream][]runtime.Object{}
	for _, dir := range dirs {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			continue
		}
		deltas, err := tracer.Kinds.LoadRecording(dir)
		if err != nil {
			continue // a capture of other files (evidence only)
		}
		last := map[watch.Stream]map[string]runtime.Object{}
		for _, d := range deltas {
			k, ok := tracer.Kinds.OfObject(d.Object)
			if !ok || k.ListWatch == nil || d.Type == watch.Deleted {
				continue
			}
			if _, taken := out[k.Stream]; taken {
				continue
			}
			m, err := meta.Accessor(d.Object)
			if err != nil {
				t.Fatal(err)
			}
			if last[k.Stream] == nil {
				last[k.Stream] = map[string]runtime.Object{}
			}
			last[k.Stream][m.GetNamespace()+"/"+m.GetName()] = d.Object
		}
		for s, byKey := range last {
			for _, o := range byKey {
				out[s] = append(out[s], o)
			}
			sortByName(out[s])
		}
	}
	for _, k := range tracer.Kinds.Kinds() {
		if k.ListWatch != nil && len(out[k.Stream]) == 0 {
			t.Fatalf("no real capture holds %s", k.Stream)
		}
	}
	return out
}

func transformed(t *testing.T, objs []runtime.Object) []runtime.Object {
	var out []runtime.Object
	for _, o := range objs {
		c, err := tracer.Kinds.Transform(o.DeepCopyObject())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c.(runtime.Object))
	}
	return out
}

func sortByName(objs []runtime.Object) {
	key := func(o runtime.Object) string {
		m, _ := meta.Accessor(o)
		return m.GetNamespace() + "/" + m.GetName()
	}
	sort.Slice(objs, func(i, j int) bool { return key(objs[i]) < key(objs[j]) })
}

// encodingServer stands in for the apiserver's list and watch of the registry's kinds: it
// answers each request in the encoding its Accept header asks for first (JSON when noProto), and
// records what was asked and answered.
type encodingServer struct {
	*httptest.Server
	objects   map[string][]runtime.Object // by resource
	gvs       map[string]schema.GroupVersion
	watchList bool
	noProto   bool

	mu   sync.Mutex
	seen map[string][]seenRequest
}

type seenRequest struct{ what, accept, answered string }

func newEncodingServer(t *testing.T, objects map[watch.Stream][]runtime.Object, watchList, noProto bool) *encodingServer {
	s := &encodingServer{objects: map[string][]runtime.Object{}, gvs: map[string]schema.GroupVersion{},
		watchList: watchList, noProto: noProto, seen: map[string][]seenRequest{}}
	for stream, objs := range objects {
		k := kindOf(t, stream)
		s.objects[k.GVR.Resource], s.gvs[k.GVR.Resource] = objs, k.GVR.GroupVersion()
	}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *encodingServer) requests() map[string][]seenRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]seenRequest{}
	for r, rs := range s.seen {
		out[r] = append([]seenRequest(nil), rs...)
	}
	return out
}

func (s *encodingServer) serve(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if s.discovery(w, parts) {
		return
	}
	resource := parts[len(parts)-1]
	objs, ok := s.objects[resource]
	if !ok {
		http.NotFound(w, r)
		return
	}
	gv := s.gvs[resource]
	accept := r.Header.Get("Accept")
	custom := tracer.Kinds.OfGroupResource(gv.WithResource(resource).GroupResource()).Optional
	mediaType := runtime.ContentTypeJSON
	if strings.HasPrefix(accept, runtime.ContentTypeProtobuf) && !s.noProto && !custom {
		mediaType = runtime.ContentTypeProtobuf
	}
	info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), mediaType)
	q := r.URL.Query()
	what := "LIST"
	if q.Get("watch") == "true" {
		what = "WATCH"
		if q.Get("sendInitialEvents") == "true" {
			what = "WATCH sendInitialEvents"
		}
	}
	answered := mediaType
	if what == "WATCH sendInitialEvents" && !s.watchList {
		answered = "" // refused: the reflector lists instead
	}
	s.mu.Lock()
	s.seen[resource] = append(s.seen[resource], seenRequest{what: what, accept: accept, answered: answered})
	s.mu.Unlock()

	if custom {
		s.serveCustom(w, r, what, gv.WithResource(resource), objs)
		return
	}
	enc := scheme.Codecs.EncoderForVersion(info.Serializer, gv)
	switch what {
	case "LIST":
		k := tracer.Kinds.OfGroupResource(gv.WithResource(resource).GroupResource())
		list := k.NewList()
		if err := meta.SetList(list, objs); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		list.(metav1.ListInterface).SetResourceVersion("100")
		w.Header().Set("Content-Type", mediaType)
		if err := enc.Encode(list, w); err != nil {
			panic(err)
		}
	case "WATCH sendInitialEvents":
		if !s.watchList {
			w.Header().Set("Content-Type", runtime.ContentTypeJSON)
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"sendInitialEvents is not supported here","reason":"BadRequest","code":400}`)
			return
		}
		w.Header().Set("Content-Type", mediaType)
		w.WriteHeader(http.StatusOK)
		events := streaming.NewEncoder(info.StreamSerializer.Framer.NewFrameWriter(w), info.StreamSerializer.Serializer)
		send := func(typ string, o runtime.Object) {
			raw, err := runtime.Encode(enc, o)
			if err != nil {
				panic(err)
			}
			if err := events.Encode(&metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: raw}}); err != nil {
				return // the client went
			}
		}
		initialEvents(send, tracer.Kinds.OfGroupResource(gv.WithResource(resource).GroupResource()), objs)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	default: // a watch after the LIST: nothing changes
		w.Header().Set("Content-Type", mediaType)
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}
}

// discovery answers discovery of a custom resource's group and version, as the apiserver does
// where its CRD is installed: the registry's optional kinds are watched only then.
func (s *encodingServer) discovery(w http.ResponseWriter, parts []string) bool {
	if len(parts) != 3 || parts[0] != "apis" {
		return false
	}
	list := metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: parts[1] + "/" + parts[2]}
	for resource, gv := range s.gvs {
		if gv.Group == parts[1] && gv.Version == parts[2] {
			k := tracer.Kinds.OfGroupResource(gv.WithResource(resource).GroupResource())
			list.APIResources = append(list.APIResources, metav1.APIResource{Name: resource, Namespaced: true, Kind: k.Kind, Verbs: []string{"get", "list", "watch"}})
		}
	}
	if len(list.APIResources) == 0 {
		return false
	}
	w.Header().Set("Content-Type", runtime.ContentTypeJSON)
	_ = json.NewEncoder(w).Encode(list)
	return true
}

// serveCustom answers a custom resource's list and watch as the apiserver does: in JSON
// whatever the client accepts, one JSON watch event per line.
func (s *encodingServer) serveCustom(w http.ResponseWriter, r *http.Request, what string, gvr schema.GroupVersionResource, objs []runtime.Object) {
	k := tracer.Kinds.OfGroupResource(gvr.GroupResource())
	w.Header().Set("Content-Type", runtime.ContentTypeJSON)
	switch what {
	case "LIST":
		list := k.NewList()
		if err := meta.SetList(list, objs); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		list.(metav1.ListInterface).SetResourceVersion("100")
		_ = json.NewEncoder(w).Encode(list)
		return
	case "WATCH sendInitialEvents":
		if !s.watchList {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"sendInitialEvents is not supported here","reason":"BadRequest","code":400}`)
			return
		}
		enc := json.NewEncoder(w)
		send := func(typ string, o runtime.Object) {
			raw, err := json.Marshal(o)
			if err != nil {
				panic(err)
			}
			_ = enc.Encode(&metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: raw}})
		}
		initialEvents(send, k, objs)
	}
	w.(http.Flusher).Flush()
	<-r.Context().Done()
}

// initialEvents sends a streamed initial list: each object added, then the bookmark that ends
// the list.
func initialEvents(send func(typ string, o runtime.Object), k *watch.Kind, objs []runtime.Object) {
	for _, o := range objs {
		send("ADDED", o)
	}
	end := k.NewObject()
	m, _ := meta.Accessor(end)
	m.SetResourceVersion("100")
	m.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
	send("BOOKMARK", end)
}

func jsonText(o runtime.Object) string {
	b, err := json.Marshal(o)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// TestClientForKind: a kind with no protobuf encoding is read through the JSON client while the
// watch.Watcher's client asks for protobuf; every other kind, and every kind when JSON is asked for,
// through the watch.Watcher's own.
func TestClientForKind(t *testing.T) {
	main, js := fake.NewClientset(), fake.NewClientset()
	builtIn, custom := &watch.Kind{Stream: "pods"}, &watch.Kind{Stream: "widgets", JSONOnly: true}
	for _, tc := range []struct {
		name string
		cfg  watch.Config
		k    *watch.Kind
		want any
	}{
		{"built-in, protobuf", watch.Config{Encoding: watch.EncodingProtobuf, JSONClient: js}, builtIn, main},
		{"built-in, default", watch.Config{JSONClient: js}, builtIn, main},
		{"custom, protobuf", watch.Config{Encoding: watch.EncodingProtobuf, JSONClient: js}, custom, js},
		{"custom, default", watch.Config{JSONClient: js}, custom, js},
		{"custom, json", watch.Config{Encoding: watch.EncodingJSON, JSONClient: js}, custom, main},
		{"custom, no JSON client", watch.Config{Encoding: watch.EncodingProtobuf}, custom, main},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := watch.ClientFor(tc.cfg, tc.k, main); got != tc.want {
				t.Errorf("clientFor gave the %s client", map[bool]string{true: "JSON", false: "main"}[got == js])
			}
		})
	}
}

// kindOf is the registry's Kind of a stream.
func kindOf(t *testing.T, s watch.Stream) *watch.Kind {
	t.Helper()
	k, err := tracer.Kinds.Of(s)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
