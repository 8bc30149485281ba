package watch_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/watch"
)

// TestWatcherWatchesTheRegistry checks that the watch.Watcher runs one reflector per kind the registry
// says is watched, per namespace, of that kind's objects; a cluster-scoped kind once, and only
// when every namespace is watched; an optional kind (a custom resource) only where discovery
// says the API serves it.
func TestWatcherWatchesTheRegistry(t *testing.T) {
	for _, namespaces := range [][]string{{"a", "b"}, nil} {
		for _, crds := range []bool{false, true} {
			client := fake.NewClientset()
			if crds {
				client.Resources = servedOptional(tracer.Kinds)
			}
			w := watch.NewWatcher(client, tracer.Kinds, watch.Config{Namespaces: namespaces}, nil, nil)
			var want []watch.Resource
			for range max(len(namespaces), 1) {
				for _, k := range tracer.Kinds.Kinds() {
					if k.ListWatch != nil && (!k.ClusterScoped || len(namespaces) == 0) && (!k.Optional || crds) {
						want = append(want, k.Resource)
					}
				}
			}
			checkReflectors(t, w, want)
		}
	}
	if !slices.ContainsFunc(tracer.Kinds.Kinds(), func(k *watch.Kind) bool { return k.Optional }) {
		t.Error("no optional kind to check")
	}
	if !slices.ContainsFunc(tracer.Kinds.Kinds(), func(k *watch.Kind) bool { return k.ClusterScoped && k.Resource == tracer.ResourceNodes }) {
		t.Error("Nodes are not a cluster-scoped kind")
	}
}

// servedOptional is discovery's answer of an API that serves every optional kind of the registry.
func servedOptional(kinds *watch.Registry) []*metav1.APIResourceList {
	var out []*metav1.APIResourceList
	for _, k := range kinds.Kinds() {
		if k.Optional {
			out = append(out, &metav1.APIResourceList{GroupVersion: k.GVR.GroupVersion().String(),
				APIResources: []metav1.APIResource{{Name: k.GVR.Resource, Namespaced: !k.ClusterScoped, Kind: k.Kind}}})
		}
	}
	return out
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
