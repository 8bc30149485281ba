package watch_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/watch"
)

// TestWatcherWatchesTheRegistry checks that the watch.Watcher runs one reflector per kind the registry
// says is watched, per namespace, of that kind's objects; a cluster-scoped kind once, and only
// when every namespace is watched.
func TestWatcherWatchesTheRegistry(t *testing.T) {
	for _, namespaces := range [][]string{{"a", "b"}, nil} {
		w := watch.NewWatcher(fake.NewClientset(), tracer.Kinds, watch.Config{Namespaces: namespaces}, nil, nil)
		var want []watch.Resource
		for range max(len(namespaces), 1) {
			for _, k := range tracer.Kinds.Kinds() {
				if k.ListWatch != nil && (!k.ClusterScoped || len(namespaces) == 0) {
					want = append(want, k.Resource)
				}
			}
		}
		checkReflectors(t, w, want)
	}
	if !slices.ContainsFunc(tracer.Kinds.Kinds(), func(k *watch.Kind) bool { return k.ClusterScoped && k.Resource == tracer.ResourceNodes }) {
		t.Error("Nodes are not a cluster-scoped kind")
	}
}

func checkReflectors(t *testing.T, w *watch.Watcher, want []watch.Resource) {
	t.Helper()
	var got []watch.Resource
	for _, rf := range w.Reflectors() {
		got = append(got, rf.Resource)
		if k := tracer.Kinds.OfResource(rf.Resource); reflect.TypeOf(rf.Example) != reflect.TypeOf(k.NewObject()) {
			t.Errorf("%s watched as %T, want %T", rf.Resource, rf.Example, k.NewObject())
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("reflectors %v, want %v", got, want)
	}
}

// TestUnknownStreamIsAnError checks that a stream the registry does not name is refused, not
// read as another kind's (it once became Events).
func TestUnknownStreamIsAnError(t *testing.T) {
	deltas, problems := watch.ReadWatch(tracer.Kinds, strings.NewReader(`{"type":"ADDED","object":{"metadata":{"uid":"u"}}}`+"\n"), "configmaps", "watch.configmaps.jsonl")
	if len(deltas) != 0 || len(problems) != 1 || !strings.Contains(problems[0].Why, `unknown stream "configmaps"`) {
		t.Errorf("deltas %v, problems %v; want one problem naming the stream", deltas, problems)
	}
	if _, _, err := watch.ReadList(tracer.Kinds, []byte(`{"items":[]}`), "configmaps", "configmaps.json"); err == nil || !strings.Contains(err.Error(), `unknown stream "configmaps"`) {
		t.Errorf("readList of an unknown stream: %v", err)
	}
}
