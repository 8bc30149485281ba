package watch_test

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/watch"
)

// TestWatcherTransformsEachPodOnce counts the Transform calls per Pod object the real informers
// receive, listed and watched: each goes through once (a second pass would be wasted work).
func TestWatcherTransformsEachPodOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var mu sync.Mutex
	calls := map[*corev1.Pod]int{}

	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)}}
	}
	client := fake.NewClientset(pod("listed"))
	w := watch.NewWatcher(client, tracer.Kinds, watch.Config{}, nil, nil)
	w.SetTransform(func(obj any) (any, error) {
		if p, ok := obj.(*corev1.Pod); ok {
			mu.Lock()
			calls[p]++
			mu.Unlock()
		}
		return tracer.Kinds.Transform(obj)
	})
	w.Start(ctx)
	if err := w.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Pods("default").Create(ctx, pod("watched"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for len(seen) < 2 {
		select {
		case d := <-w.Deltas():
			if p, ok := d.Object.(*corev1.Pod); ok {
				seen[p.Name] = true
			}
		case <-ctx.Done():
			t.Fatalf("pods delivered: %v", seen)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(calls) < 2 {
		t.Fatalf("Transform saw %d Pod objects, want at least 2", len(calls))
	}
	for p, n := range calls {
		if n != 1 {
			t.Errorf("Pod %s went through Transform %d times, want 1", p.Name, n)
		}
	}
}
