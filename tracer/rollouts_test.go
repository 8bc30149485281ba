package tracer

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/rollout/tracker"
)

// replayRollouts rebuilds a recording's Pod and rollout traces as `readyspan replay` does.
func replayRollouts(t *testing.T, dir string) ([]*phases.Trace, []*rollout.Trace) {
	t.Helper()
	deltas, err := Kinds.LoadRecording(dir)
	if err != nil {
		t.Fatal(err)
	}
	var pods []*phases.Trace
	var rollouts []*rollout.Trace
	c := New(Config{Backfill: true, Rollouts: tracker.SinkFunc(func(r *rollout.Trace) { rollouts = append(rollouts, r) })},
		SinkFunc(func(tr *phases.Trace) { pods = append(pods, tr) }), nil, nil)
	Replay(c, deltas)
	return pods, rollouts
}

// TestRealNodeRollouts checks each capture's Deployment rollouts against what the deployment
// controller itself said: one step per ScalingReplicaSet Event, stamped with the nanosecond in
// the Event's name, every Pod of the ReplicaSets it scaled drawn once and linked to that Pod's
// own trace, which links back.
func TestRealNodeRollouts(t *testing.T) {
	for _, dir := range realNodeDirs(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			ev := readEvidence(t, dir)
			pods, rollouts := replayRollouts(t, dir)
			podTraces := map[phases.TraceID]*phases.Trace{}
			for _, p := range pods {
				podTraces[p.TraceID] = p
			}
			// The Deployments in the capture (its Events outlive earlier runs' Deployments).
			var deps struct {
				Items []struct {
					Metadata struct{ UID string } `json:"metadata"`
				} `json:"items"`
			}
			readJSON(t, filepath.Join(dir, "deployments.json"), &deps)
			present := map[string]bool{}
			for _, d := range deps.Items {
				present[d.Metadata.UID] = true
			}
			scaling := map[string][]rawEvent{} // Deployment UID → its ScalingReplicaSet events
			for _, e := range ev.events {
				if e.Kind == "Deployment" && e.Reason == "ScalingReplicaSet" && present[e.AboutUID] {
					scaling[e.AboutUID] = append(scaling[e.AboutUID], e)
				}
			}
			if len(scaling) == 0 {
				t.Fatal("the capture has no ScalingReplicaSet events: the test would prove nothing")
			}
			byWorkload := map[string]*rollout.Trace{}
			for _, r := range rollouts {
				if byWorkload[r.Rollout.Workload.UID] != nil {
					t.Errorf("%s: two rollouts of generation %d", r.Rollout.Workload.Name, r.Rollout.Generation)
				}
				byWorkload[r.Rollout.Workload.UID] = r
			}
			for uid, events := range scaling {
				r := byWorkload[uid]
				if r == nil {
					t.Errorf("deployment %s: no rollout trace", events[0].About)
					continue
				}
				checkRolloutShape(t, r)
				var steps []*phases.Span
				for i := range r.Spans {
					if r.Spans[i].Name == rollout.StepSpanName {
						steps = append(steps, &r.Spans[i])
					}
				}
				if len(steps) != len(events) {
					t.Errorf("%s: %d steps, the controller wrote %d ScalingReplicaSet events", events[0].About, len(steps), len(events))
					continue
				}
				for _, e := range events {
					found := false
					for _, s := range steps {
						if s.Attr(rollout.AttrStepMessage) == e.Message {
							found = true
							if !s.Start.Equal(e.NameTime) {
								t.Errorf("step %q starts at %s, its Event's name says %s", e.Message, s.Start, e.NameTime)
							}
						}
					}
					if !found {
						t.Errorf("no step for the Event %q", e.Message)
					}
				}
				// Every Pod of the Deployment in the capture is one rollout.pod, linked both ways.
				seen := map[string]int{}
				for i := range r.Spans {
					s := &r.Spans[i]
					if s.Name != rollout.PodSpanName {
						continue
					}
					uid, _ := s.Attr(phases.AttrPodUID).(string)
					seen[uid]++
					if len(s.Links()) != 1 {
						t.Fatalf("rollout.pod %s has %d links", uid, len(s.Links()))
					}
					pt := podTraces[s.Links()[0].TraceID]
					if pt == nil || pt.Pod.UID != uid || s.Links()[0].SpanID != pt.Root().SpanID {
						t.Errorf("rollout.pod %s links to %s/%s, not to its Pod's trace", uid, s.Links()[0].TraceID, s.Links()[0].SpanID)
						continue
					}
					back := false
					for _, l := range pt.Root().Links() {
						back = back || l.TraceID == r.TraceID && l.SpanID == r.Root().SpanID
					}
					if !back {
						t.Errorf("the trace of Pod %s does not link back to its rollout", pt.Pod.Name)
					}
				}
				for _, p := range ev.pods {
					if p.Namespace == r.Rollout.Workload.Namespace && strings.HasPrefix(p.ReplicaSet, r.Rollout.Workload.Name+"-") && seen[p.UID] != 1 {
						t.Errorf("Pod %s appears %d times in its rollout", p.Name, seen[p.UID])
					}
				}
			}
		})
	}
}

// checkRolloutShape: one root, every parent present, children inside the root's interval.
func checkRolloutShape(t *testing.T, r *rollout.Trace) {
	t.Helper()
	ids := map[phases.SpanID]bool{}
	for _, s := range r.Spans {
		if ids[s.SpanID] {
			t.Errorf("span %s (%s) twice", s.SpanID, s.Path)
		}
		ids[s.SpanID] = true
	}
	root := r.Root()
	if root.Name != rollout.RootSpanName || !root.ParentSpanID.IsZero() {
		t.Fatalf("first span %s is not the root", root.Name)
	}
	for _, s := range r.Spans[1:] {
		if !ids[s.ParentSpanID] {
			t.Errorf("span %s has no parent in the trace", s.Path)
		}
		if s.End.Before(s.Start) {
			t.Errorf("span %s ends before it starts", s.Path)
		}
	}
}
