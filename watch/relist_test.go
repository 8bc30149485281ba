package watch_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/watch"
)

// TestLastSeenKeepsIdentityOnly checks what the watch.Watcher keeps of every kind it watches: enough
// to name it, never its spec, status or labels.
func TestLastSeenKeepsIdentityOnly(t *testing.T) {
	w := watch.NewWatcher(fake.NewClientset(), tracer.Kinds, watch.Config{}, nil, nil)
	if len(w.Reflectors()) < 9 {
		t.Fatalf("the Watcher watches %d kinds, want 9", len(w.Reflectors()))
	}
	for _, rf := range w.Reflectors() {
		obj := rf.Example.DeepCopyObject()
		m := obj.(metav1.Object)
		m.SetName("x")
		m.SetNamespace("ns")
		m.SetUID("uid-x")
		m.SetResourceVersion("5")
		m.SetLabels(map[string]string{"app": "x"})
		m.SetOwnerReferences([]metav1.OwnerReference{{Kind: "ReplicaSet", Name: "rs", UID: "uid-rs"}})
		kept := tracer.Kinds.LastSeen(obj)
		km, ok := kept.(metav1.Object)
		if !ok || kept == obj {
			t.Errorf("%T: kept the object itself", obj)
			continue
		}
		if km.GetName() != "x" || km.GetNamespace() != "ns" || km.GetUID() != "uid-x" || km.GetResourceVersion() != "5" ||
			len(km.GetOwnerReferences()) != 1 {
			t.Errorf("%T: identity lost: %s/%s %s rv %s owners %v", obj, km.GetNamespace(), km.GetName(), km.GetUID(), km.GetResourceVersion(), km.GetOwnerReferences())
		}
		if len(km.GetLabels()) != 0 {
			t.Errorf("%T: kept more than the identity (labels)", obj)
		}
	}
}
