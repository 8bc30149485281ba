package watch

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
)

// ListError is a List of one kind that failed during a Snapshot.
type ListError struct {
	Resource Resource
	Err      error
}

func (e *ListError) Error() string { return fmt.Sprintf("list %s: %v", e.Resource, e.Err) }
func (e *ListError) Unwrap() error { return e.Err }

// Snapshot lists every kind the watch reads, in namespace ns, once: what an explain rebuilds
// from. The objects come as an initial list would (Added, Initial, Transformed) in the order a
// recording's snapshots are fed (owners before what they own, Services and Events before Pods),
// so the correlator meets them as it meets a recording. The registry says which kinds: a new
// kind is listed with no change here.
func (r *Registry) Snapshot(ctx context.Context, c kubernetes.Interface, ns string) ([]Delta, error) {
	var out []Delta
	for _, s := range r.snapshotOrder {
		k := r.byStream[s]
		if k.ListWatch == nil {
			continue // read from recordings only (the events.k8s.io view of Events)
		}
		if k.Optional {
			if ok, err := served(c, k.GVR); err != nil || !ok {
				continue // its CRD not installed: nothing of it to rebuild from
			}
		}
		list, _ := k.ListWatch(c, ns, Config{})
		obj, err := list(ctx, metav1.ListOptions{})
		if err != nil && k.ClusterScoped {
			// A namespaced grant cannot list it (kind.clusterScoped): the traces go without
			// what it tells, as a namespaced watch's do.
			continue
		}
		if err != nil {
			return nil, &ListError{Resource: k.Resource, Err: err}
		}
		items, err := meta.ExtractList(obj)
		if err != nil {
			return nil, &ListError{Resource: k.Resource, Err: err}
		}
		for _, item := range items {
			if t, err := r.Transform(item); err == nil {
				item = t.(runtime.Object)
			}
			out = append(out, Delta{Resource: k.Resource, Type: Added, Object: item, Initial: true})
		}
	}
	return out, nil
}
