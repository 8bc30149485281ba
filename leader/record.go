package leader

import "time"

// Record is what a stopping readyspan leaves for the next one, in the state file or on the
// handover Lease. Its JSON form is the state file's format: keep it stable.
type Record struct {
	StoppedAt time.Time `json:"stoppedAt"`
	Exported  []string  `json:"exported"`
}

// Skip returns the UIDs the stopping process exported last, as a set.
func (r *Record) Skip() map[string]bool {
	skip := make(map[string]bool, len(r.Exported))
	for _, uid := range r.Exported {
		skip[uid] = true
	}
	return skip
}
