package watch_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/watch"
)

// The watch.Watcher keeps nothing of an Event (it is read once; its expiry changes no trace), yet
// still says which Events are new and which are later versions: the queue's own delta types.
func TestWatcherKeepsNoEvent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	event := func(name, rv string, count int32) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name), ResourceVersion: rv},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web", UID: "uid-web"},
			Reason:         "Pulled", Message: `Container image "busybox" already present on machine`, Count: count}
	}
	client := fake.NewClientset(event("web.1", "5", 1))
	w := watch.NewWatcher(client, tracer.Kinds, watch.Config{}, nil, nil)
	w.Start(ctx)
	if err := w.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	evs := client.CoreV1().Events("default")
	if _, err := evs.Create(ctx, event("web.2", "", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := evs.Update(ctx, event("web.1", "6", 2), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	type seen struct {
		name    string
		typ     watch.DeltaType
		initial bool
	}
	want := []seen{{"web.1", watch.Added, true}, {"web.2", watch.Added, false}, {"web.1", watch.Modified, false}}
	var got []seen
	for len(got) < len(want) {
		select {
		case d := <-w.Deltas():
			if d.Resource != tracer.ResourceEvents {
				continue
			}
			got = append(got, seen{d.Object.(*corev1.Event).Name, d.Type, d.Initial})
		case <-ctx.Done():
			t.Fatalf("deltas so far %v, want %v", got, want)
		}
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("delta %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	for _, rf := range w.Reflectors() {
		if rf.Resource == tracer.ResourceEvents {
			if keys := rf.Known; len(keys) != 0 {
				t.Errorf("the watch.Watcher keeps %d Events: %v", len(keys), keys)
			}
		}
	}
}
