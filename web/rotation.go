package web

import (
	"encoding/json"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
)

// RotationView is an old Pod's last mile, a rollout's rollout.pod.rotation span (docs/last-mile.md):
// how many nodes' kube-proxy rules still held the Pod after it was told to stop, and how long
// after the stop the last one took it out. GET /api/v1/rollouts/{id}/rotation serves a rollout's,
// so that a gate outside the cluster judges the rotation objective (readyspan gate --url).
type RotationView struct {
	UID string `json:"uid"`
	Pod string `json:"pod"`
	// StartMs and DurMs place the span in the rollout: the Pod's deletion, the last removal.
	StartMs float64 `json:"startMs"`
	DurMs   float64 `json:"durMs"`
	// Nodes waited for, Removed within the wait, Late: still holding it after its stop.
	Nodes   int64 `json:"nodes"`
	Removed int64 `json:"removed"`
	Late    int64 `json:"late"`
	// AfterStopMs is how long after the stop the last node took it out (0: all before).
	AfterStopMs float64 `json:"afterStopMs"`
	// Stop says what the stop is measured from (deletion, deletion + preStop sleep).
	Stop    string `json:"stop"`
	Error   bool   `json:"error,omitempty"`
	Message string `json:"message,omitempty"`
}

// rotationViews are a rollout's rotation spans, in the trace's order; nil when it has none.
func rotationViews(t *rollout.Trace) []RotationView {
	root := t.Root()
	uidOf := map[phases.SpanID]string{}
	var out []RotationView
	for i := range t.Spans {
		s := &t.Spans[i]
		uidOf[s.SpanID] = attrString(s, phases.AttrPodUID)
		if s.Name != rollout.RotationSpanName {
			continue
		}
		v := RotationView{UID: uidOf[s.ParentSpanID], Pod: attrString(s, phases.AttrPodName),
			StartMs: ms(s.Start.Sub(root.Start)), DurMs: ms(s.Duration()), Stop: attrString(s, rollout.AttrRotationStop),
			Error: s.Status == phases.StatusError, Message: s.StatusMessage}
		v.Nodes, _ = s.Attr(rollout.AttrRotationNodes).(int64)
		v.Removed, _ = s.Attr(rollout.AttrRotationRemoved).(int64)
		v.Late, _ = s.Attr(rollout.AttrRotationLate).(int64)
		v.AfterStopMs, _ = s.Attr(rollout.AttrRotationAfterStop).(float64)
		out = append(out, v)
	}
	return out
}

// rotationBody is the rotation views' JSON as the ring keeps it: nil for none (served as []).
func rotationBody(t *rollout.Trace) []byte {
	v := rotationViews(t)
	if len(v) == 0 {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}
