package watch

import (
	"time"

	"k8s.io/apimachinery/pkg/runtime"
)

// Resource names a watched resource, as recordings and metrics labels name it.
type Resource string

// ResourceAudit is the kube-apiserver audit log, when readyspan is given one: the one stream
// that is no kind of a Registry.
const ResourceAudit Resource = "audit"

// DeltaType is the kind of change a watch reported.
type DeltaType string

const (
	Added    DeltaType = "ADDED"
	Modified DeltaType = "MODIFIED"
	Deleted  DeltaType = "DELETED"
)

// Delta is one observed change, stamped with readyspan's receive time. Initial marks objects
// from the initial list: their receive time says nothing about when they changed.
type Delta struct {
	Resource Resource
	Type     DeltaType
	Object   runtime.Object
	Audit    *AuditEntry // for ResourceAudit, instead of Object
	Recv     time.Time
	Initial  bool
	// FinalStateUnknown marks a deletion found by a relist (the watch missed it): Object is
	// only what the watch kept of the object, its identity, not its last state.
	FinalStateUnknown bool
}

// WatchTime is the receive time to record for a change, or zero when the delta does not
// witness the change (initial lists, recordings without receive times).
func (d *Delta) WatchTime() time.Time {
	if d.Initial {
		return time.Time{}
	}
	return d.Recv
}
