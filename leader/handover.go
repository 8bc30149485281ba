package leader

import (
	"context"
	"encoding/json"
	"fmt"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// HandoverAnnotation holds a stopping leader's Record on the <lease>-handover Lease.
const HandoverAnnotation = "readyspan.dev/handover"

// maxHandoverUIDs bounds the annotation (256 KiB for all of an object's annotations).
const maxHandoverUIDs = 5000

// HandoverLeaseName is the Lease that carries the handover record next to the election Lease:
// a second object, because the election Lease is rewritten by client-go on every renewal.
func HandoverLeaseName(lease string) string { return lease + "-handover" }

// writeHandover leaves a stopping leader's record for the next one.
func writeHandover(ctx context.Context, leases coordinationv1client.LeaseInterface, name string, r Record) error {
	if n := len(r.Exported); n > maxHandoverUIDs {
		r.Exported = r.Exported[n-maxHandoverUIDs:] // the newest: the oldest are the least likely to straddle the release
	}
	b, _ := json.Marshal(r)
	cur, err := leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{HandoverAnnotation: string(b)}}}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create lease %s: %w", name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("get lease %s: %w", name, err)
	}
	if cur.Annotations == nil {
		cur.Annotations = map[string]string{}
	}
	cur.Annotations[HandoverAnnotation] = string(b)
	if _, err := leases.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update lease %s: %w", name, err)
	}
	return nil
}

// readHandover returns what the previous leader left, or nil.
func readHandover(ctx context.Context, leases coordinationv1client.LeaseInterface, name string) (*Record, error) {
	cur, err := leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get lease %s: %w", name, err)
	}
	raw, ok := cur.Annotations[HandoverAnnotation]
	if !ok {
		return nil, nil
	}
	var r Record
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return nil, fmt.Errorf("read lease %s: bad %s annotation: %w", name, HandoverAnnotation, err)
	}
	return &r, nil
}
