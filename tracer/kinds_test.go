package tracer

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
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
// Pods, Events before Pods (replays of recordings depend on it). Each stream of the registry is
// read once; a kind added later may come anywhere its rank puts it.
func TestSnapshotOrder(t *testing.T) {
	want := []Stream{StreamDeployments, StreamStatefulSets, StreamDaemonSets, StreamRevisions, StreamReplicaSets, StreamServices, StreamEventsCore, StreamEventsV1, StreamEndpointSlices, StreamPods}
	pinned := slices.DeleteFunc(slices.Clone(snapshotOrder), func(s Stream) bool { return !slices.Contains(want, s) })
	if !slices.Equal(pinned, want) {
		t.Errorf("snapshot order %v, want %v in that order", snapshotOrder, want)
	}
	if len(snapshotOrder) != len(kinds) {
		t.Errorf("%d streams in the snapshot order, %d kinds", len(snapshotOrder), len(kinds))
	}
	if last := snapshotOrder[len(snapshotOrder)-1]; last != StreamPods {
		t.Errorf("the last stream read is %s, want pods", last)
	}
}

// TestWatcherWatchesTheRegistry checks that the Watcher runs one reflector per kind the registry
// says is watched, per namespace, of that kind's objects; a cluster-scoped kind once, and only
// when every namespace is watched.
func TestWatcherWatchesTheRegistry(t *testing.T) {
	for _, namespaces := range [][]string{{"a", "b"}, nil} {
		w := NewWatcher(fake.NewClientset(), WatchConfig{Namespaces: namespaces}, nil, nil)
		var want []Resource
		for range max(len(namespaces), 1) {
			for _, k := range kinds {
				if k.listWatch != nil && (!k.clusterScoped || len(namespaces) == 0) {
					want = append(want, k.resource)
				}
			}
		}
		checkReflectors(t, w, want)
	}
	if !slices.ContainsFunc(kinds, func(k *kind) bool { return k.clusterScoped && k.resource == ResourceNodes }) {
		t.Error("Nodes are not a cluster-scoped kind")
	}
}

func checkReflectors(t *testing.T, w *Watcher, want []Resource) {
	t.Helper()
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
	w := readWatch(strings.NewReader(`{"type":"ADDED","object":{"metadata":{"uid":"u"}}}`+"\n"), "configmaps", "watch.configmaps.jsonl")
	if len(w.deltas) != 0 || len(w.problems) != 1 || !strings.Contains(w.problems[0].Why, `unknown stream "configmaps"`) {
		t.Errorf("deltas %v, problems %v; want one problem naming the stream", w.deltas, w.problems)
	}
	if _, _, err := readList([]byte(`{"items":[]}`), "configmaps", "configmaps.json"); err == nil || !strings.Contains(err.Error(), `unknown stream "configmaps"`) {
		t.Errorf("readList of an unknown stream: %v", err)
	}
}

// TestAuditedWrites pins which audit events the registry makes relevant: a workload's change
// or scale, a bare Pod's creation, and nothing else.
func TestAuditedWrites(t *testing.T) {
	for _, tc := range []struct {
		group, resource, sub, verb string
		want                       bool
	}{
		{"", "pods", "", "create", true},
		{"", "pods", "", "update", false},
		{"", "pods", "status", "create", false},
		{"", "pods", "binding", "create", false},
		{"apps", "pods", "", "create", false},
		{"apps", "deployments", "", "patch", true},
		{"apps", "deployments", "", "create", true},
		{"apps", "deployments", "", "update", true},
		{"apps", "deployments", "", "delete", false},
		{"apps", "deployments", "scale", "update", true},
		{"apps", "deployments", "status", "update", false},
		{"apps", "statefulsets", "scale", "patch", true},
		{"apps", "daemonsets", "", "update", true},
		{"apps", "replicasets", "", "create", false},
		{"apps", "controllerrevisions", "", "create", false},
		{"", "events", "", "create", false},
		{"events.k8s.io", "events", "", "create", false},
		{"", "deployments", "", "create", false},
	} {
		line := fmt.Sprintf(`{"stage":"ResponseComplete","verb":%q,"objectRef":{"resource":%q,"namespace":"ns","name":"x","apiGroup":%q,"subresource":%q},`+
			`"responseStatus":{"code":201},"requestReceivedTimestamp":"2026-01-02T03:04:05.000001Z","stageTimestamp":"2026-01-02T03:04:05.000002Z"}`,
			tc.verb, tc.resource, tc.group, tc.sub)
		a, err := ParseAuditLine([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		if got := a != nil; got != tc.want {
			t.Errorf("%s %s/%s/%s: relevant %v, want %v", tc.verb, tc.group, tc.resource, tc.sub, got, tc.want)
		}
	}
}

// kindOfObject's type switch and the registry's map give every entry's objects the same entry.
func TestKindOfObject(t *testing.T) {
	for _, k := range kinds {
		got, ok := kindOfObject(k.newObject())
		if !ok || got != kindByType[reflect.TypeOf(k.newObject())] {
			t.Errorf("%s: kindOfObject gives %v", k.stream, got)
		}
	}
	if _, ok := kindOfObject(&corev1.ConfigMap{}); ok {
		t.Error("a ConfigMap has an entry")
	}
}
