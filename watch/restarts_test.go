package watch

import (
	"context"
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

// TestRestartsBookkeeping follows a request sequence the reflector can make, including paged and
// streaming lists that the fake clientset does not produce.
func TestRestartsBookkeeping(t *testing.T) {
	errs := &CountErrors{}
	var listErr error
	lw := (&restarts{resource: Resource("pods"), errs: errs}).listWatch(
		func(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
			l := &corev1.PodList{}
			if o.Limit > 0 && o.Continue == "" {
				l.Continue = "page-2" // a first page
			}
			return l, listErr
		},
		func(context.Context, metav1.ListOptions) (apiwatch.Interface, error) { return apiwatch.NewFake(), nil },
	)
	ctx := context.Background()
	stream := metav1.ListOptions{SendInitialEvents: ptr.To(true)}
	steps := []struct {
		do   func()
		want map[string]int
	}{
		{func() { lw.ListWithContext(ctx, metav1.ListOptions{Limit: 500}) }, nil},
		{func() { lw.ListWithContext(ctx, metav1.ListOptions{Limit: 500, Continue: "page-2"}) }, nil}, // the same list
		{func() { lw.WatchWithContext(ctx, metav1.ListOptions{}) }, nil},
		{func() { lw.WatchWithContext(ctx, metav1.ListOptions{}) }, map[string]int{"pods/restart/watch_closed": 1}},
		{func() { listErr = gone(); lw.ListWithContext(ctx, metav1.ListOptions{}) }, map[string]int{"pods/restart/watch_closed": 1, "pods/restart/relist": 1}},
		{func() { listErr = nil; lw.ListWithContext(ctx, metav1.ListOptions{}) }, map[string]int{"pods/restart/watch_closed": 1, "pods/restart/relist": 1}}, // the retry
		{func() { lw.WatchWithContext(ctx, stream) }, map[string]int{"pods/restart/watch_closed": 1, "pods/restart/relist": 2}},
		{func() { lw.WatchWithContext(ctx, metav1.ListOptions{}) }, map[string]int{"pods/restart/watch_closed": 2, "pods/restart/relist": 2}}, // the stream was the watch
	}
	for i, s := range steps {
		s.do()
		if got := errs.Snapshot(); !maps.Equal(got, s.want) && (len(got) != 0 || len(s.want) != 0) {
			t.Fatalf("step %d: counted %v, want %v", i, got, s.want)
		}
	}
}

func gone() error { return apierrors.NewResourceExpired("too old resource version") }
