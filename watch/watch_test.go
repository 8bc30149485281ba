package watch_test

import (
	"context"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/watch"
)

// TestWatcherForbidden: a list refused by RBAC is reported once, naming the resource, and
// readyspan is not ready.
func TestWatcherForbidden(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	client := fake.NewClientset()
	client.PrependReactor("list", "endpointslices", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}, "",
			watch.ErrForbidden)
	})
	errs := &watch.CountErrors{}
	w := watch.NewWatcher(client, tracer.Kinds, watch.Config{}, errs, nil)
	w.Start(ctx)
	syncCtx, stop := context.WithTimeout(ctx, 2*time.Second)
	defer stop()
	err := w.WaitForSync(syncCtx)
	if err == nil || !strings.Contains(err.Error(), "endpointslices") || !strings.Contains(err.Error(), "forbidden") {
		t.Fatalf("want a forbidden error naming endpointslices, got %v", err)
	}
	if p := w.Problem(); !strings.Contains(p, "endpointslices") {
		t.Fatalf("Problem() = %q", p)
	}
	if errs.Snapshot()["endpointslices/forbidden"] == 0 {
		t.Fatalf("forbidden not counted: %v", errs.Snapshot())
	}
}

// TestWatcherRestarts: readyspan_watch_restarts_total counts what the reflector really does. A
// watch the server closes is followed by a new watch (watch_closed); a watch that ends in 410
// Gone, or cannot start because of it, is followed by a new list (relist).
func TestWatcherRestarts(t *testing.T) {
	expired := apierrors.NewResourceExpired("too old resource version: 400 (500)")
	for _, tc := range []struct {
		name string
		// first answers the first watch on Pods.
		first func() (apiwatch.Interface, error)
		want  map[string]int
	}{
		{
			name: "closed",
			first: func() (apiwatch.Interface, error) {
				fw := apiwatch.NewFake()
				go func() {
					// One event, then the server ends the watch (its timeout, a restart).
					fw.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "late", Namespace: "default", UID: "uid-late", ResourceVersion: "7"}})
					fw.Stop()
				}()
				return fw, nil
			},
			want: map[string]int{"pods/restart/watch_closed": 1},
		},
		{
			name: "gone-in-stream",
			first: func() (apiwatch.Interface, error) {
				fw := apiwatch.NewFake()
				go fw.Error(&expired.ErrStatus)
				return fw, nil
			},
			want: map[string]int{"pods/restart/relist": 1},
		},
		{
			name: "gone-at-start",
			first: func() (apiwatch.Interface, error) {
				return nil, expired
			},
			want: map[string]int{"pods/restart/relist": 1, "pods/expired": 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			client := fake.NewClientset()
			var mu sync.Mutex
			var lists, watches int
			client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
				mu.Lock()
				lists++
				mu.Unlock()
				return false, nil, nil
			})
			client.PrependWatchReactor("pods", func(k8stesting.Action) (bool, apiwatch.Interface, error) {
				mu.Lock()
				watches++
				n := watches
				mu.Unlock()
				if n == 1 {
					w, err := tc.first()
					return true, w, err
				}
				return false, nil, nil // the fake's own watch from then on
			})
			errs := &watch.CountErrors{}
			w := watch.NewWatcher(client, tracer.Kinds, watch.Config{}, errs, nil)
			w.Start(ctx)
			if err := w.WaitForSync(ctx); err != nil {
				t.Fatal(err)
			}
			// Wait until the reflector has watched again after the restart.
			for {
				mu.Lock()
				n := watches
				mu.Unlock()
				if n >= 2 {
					break
				}
				select {
				case <-ctx.Done():
					t.Fatalf("no second watch: %d lists, %d watches, counted %v", lists, n, errs.Snapshot())
				case <-time.After(20 * time.Millisecond):
				}
			}
			time.Sleep(200 * time.Millisecond) // nothing more is expected; give it the chance
			got := errs.Snapshot()
			if !maps.Equal(got, tc.want) {
				mu.Lock()
				defer mu.Unlock()
				t.Fatalf("counted %v, want %v (%d lists, %d watches on pods)", got, tc.want, lists, watches)
			}
			mu.Lock()
			defer mu.Unlock()
			if wantLists := 1 + tc.want["pods/restart/relist"]; lists != wantLists {
				t.Errorf("%d lists, want %d: the count does not match what the reflector did", lists, wantLists)
			}
		})
	}
}
