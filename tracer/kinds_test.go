package tracer

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
)

// TestKindsAgreeWithTheScheme holds each entry of the registry to client-go's scheme: its empty
// object and list are of the group, version and Kind it names, and the names it is looked up by
// are its own.
func TestKindsAgreeWithTheScheme(t *testing.T) {
	streams := map[Stream]bool{}
	for _, k := range kinds {
		t.Run(string(k.stream), func(t *testing.T) {
			if streams[k.stream] {
				t.Errorf("stream %s named twice", k.stream)
			}
			streams[k.stream] = true
			gvks, _, err := scheme.Scheme.ObjectKinds(k.newObject())
			if err != nil || len(gvks) != 1 {
				t.Fatalf("%T: kinds %v, %v", k.newObject(), gvks, err)
			}
			if got := gvks[0]; got.GroupVersion() != k.gvr.GroupVersion() || got.Kind != k.kind {
				t.Errorf("the object is a %v, the entry says %v %s", got, k.gvr.GroupVersion(), k.kind)
			}
			lists, _, err := scheme.Scheme.ObjectKinds(k.newList())
			if err != nil || len(lists) != 1 || lists[0] != gvks[0].GroupVersion().WithKind(k.kind+"List") {
				t.Errorf("the list is a %v (%v), want a %sList", lists, err, k.kind)
			}
			if got, err := kindOf(k.stream); err != nil || got != k {
				t.Errorf("kindOf(%s): %v, %v", k.stream, got, err)
			}
			if got, ok := kindOfObject(k.newObject()); !ok || got != k {
				t.Errorf("kindOfObject(%T): %v", k.newObject(), got)
			}
			if s, ok := StreamFor(k.newObject()); !ok || s != k.stream {
				t.Errorf("StreamFor(%T) = %s, want %s", k.newObject(), s, k.stream)
			}
			if len(k.verbs) == 0 {
				t.Error("no RBAC verbs")
			}
		})
	}
}

// TestSnapshotOrder pins the order a recording's streams are read in: owners and Services before
// Pods, Events before Pods (replays of recordings depend on it).
func TestSnapshotOrder(t *testing.T) {
	want := []Stream{StreamDeployments, StreamStatefulSets, StreamDaemonSets, StreamRevisions, StreamReplicaSets, StreamServices, StreamEventsCore, StreamEventsV1, StreamEndpointSlices, StreamPods}
	if !slices.Equal(snapshotOrder, want) {
		t.Errorf("snapshot order %v, want %v", snapshotOrder, want)
	}
}

// TestWatcherWatchesTheRegistry checks that the Watcher runs one reflector per kind the registry
// says is watched, per namespace, of that kind's objects.
func TestWatcherWatchesTheRegistry(t *testing.T) {
	w := NewWatcher(fake.NewClientset(), WatchConfig{Namespaces: []string{"a", "b"}}, nil, nil)
	var want []Resource
	for range 2 {
		for _, k := range kinds {
			if k.listWatch != nil {
				want = append(want, k.resource)
			}
		}
	}
	var got []Resource
	for _, rf := range w.watched {
		got = append(got, rf.resource)
		if k := kindByRes[rf.resource]; reflect.TypeOf(rf.example) != reflect.TypeOf(k.newObject()) {
			t.Errorf("%s watched as %T, want %T", rf.resource, rf.example, k.newObject())
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("reflectors %v, want %v", got, want)
	}
}

// TestUnknownStreamIsAnError checks that a stream the registry does not name is refused, not
// read as another kind's (it once became Events).
func TestUnknownStreamIsAnError(t *testing.T) {
	w := readWatch(strings.NewReader(`{"type":"ADDED","object":{"metadata":{"uid":"u"}}}`+"\n"), "nodes", "watch.nodes.jsonl")
	if len(w.deltas) != 0 || len(w.problems) != 1 || !strings.Contains(w.problems[0].Why, `unknown stream "nodes"`) {
		t.Errorf("deltas %v, problems %v; want one problem naming the stream", w.deltas, w.problems)
	}
	if _, _, err := readList([]byte(`{"items":[]}`), "nodes", "nodes.json"); err == nil || !strings.Contains(err.Error(), `unknown stream "nodes"`) {
		t.Errorf("readList of an unknown stream: %v", err)
	}
}
