package tracker

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/readyspan/readyspan/events"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
)

// simT0 is the tests' time zero, and simAt a time ms after it: on a whole second when ms ends
// in 300.
var simT0 = time.Date(2026, 11, 30, 8, 41, 33, 700_000_000, time.UTC)

func simAt(ms int) time.Time { return simT0.Add(time.Duration(ms) * time.Millisecond) }

// combinedSteps reads the one message TestCombinedStepTime sends as the deployment
// controller's scale-up from 4 to 5, with the recorder's prefix dropped (tracer's stepOf is the
// reading of every kind's wording, and tested there).
func combinedSteps(e *events.Event) (rollout.Step, bool, bool) {
	msg := strings.TrimPrefix(e.Message, events.CombinedPrefix)
	return rollout.Step{Up: true, Target: "web-7d4b9", From: 4, To: 5, Message: msg}, true, msg == "Scaled up replica set web-7d4b9 from 4 to 5"
}

// A rewrite of a combined Event is a step of its own, at its receive time (its name and
// eventTime are the first occurrence's).
func TestCombinedStepTime(t *testing.T) {
	r := New(Config{Steps: combinedSteps})
	first := simAt(0)
	recv := simAt(12_345)
	e := &events.Event{UID: "e1", Regarding: events.Ref{Kind: "Deployment", UID: "d1"}, Reason: "ScalingReplicaSet",
		Message: "(combined from similar events): Scaled up replica set web-7d4b9 from 4 to 5", NameTime: events.WallOf(first), EventTime: events.WallOf(first),
		First: events.WallOf(first.Truncate(time.Second)), Last: events.WallOf(recv.Truncate(time.Second)), Count: 3, Recv: events.WallOf(recv)}
	if !r.HandleEvent(e) {
		t.Fatal("a combined ScalingReplicaSet message is a known format")
	}
	steps := r.workloads["d1"].steps
	if len(steps) != 1 {
		t.Fatalf("%d steps", len(steps))
	}
	if at, _ := steps[0].Time.Resolve(); !at.Time().Equal(recv) || at.Source != phases.SourceWatch {
		t.Errorf("step at %s (%s), want its receive time %s", at.Time(), at.Source, recv)
	}
	if steps[0].Message != "Scaled up replica set web-7d4b9 from 4 to 5" {
		t.Errorf("message %q is not the step's", steps[0].Message)
	}
}

// matchSteps gives each step its Pods, in creation order, and never a Pod created well before
// the step. A rewrite of a combined Event is stamped by readyspan's receive time, which a busy
// apiserver or readyspan can put seconds after the Pod the step created: its whole-second
// lastTimestamp still bounds it from below.
func TestMatchSteps(t *testing.T) {
	pod := func(uid string, created int) *wlPod {
		p := &wlPod{uid: types.UID(uid), name: uid, ownerName: "web-7d4b9"}
		p.created.Add(simAt(created), phases.SourceEventName)
		return p
	}
	precise := func(at int) phases.Times {
		return phases.Times{{At: phases.InstantOf(simAt(at)), Source: phases.SourceEventName}}
	}
	combined := func(recv int) phases.Times {
		return phases.Times{{At: phases.InstantOf(simAt(recv)), Source: phases.SourceWatch},
			{At: phases.InstantOf(simAt(recv).Truncate(time.Second)), Source: phases.SourceEventSeconds}}
	}
	tests := []struct {
		name  string
		steps []phases.Times
		news  []*wlPod
		want  [][]string
	}{
		{"precise steps, each before its Pod", []phases.Times{precise(1_000), precise(4_000)},
			[]*wlPod{pod("p1", 1_050), pod("p2", 4_050)}, [][]string{{"p1"}, {"p2"}}},
		{"a Pod created long before the step is not its", []phases.Times{precise(1_000), precise(9_000)},
			[]*wlPod{pod("p1", 1_050), pod("p2", 4_050)}, [][]string{{"p1"}, nil}},
		// simAt(n) is on a whole second when n ends in 300: the rewrite received at 5,750 says
		// lastTimestamp 5,300, the one received at 6,550 says 6,300.
		{"a combined rewrite received 1.35 s after its Pod", []phases.Times{precise(1_000), combined(5_750)},
			[]*wlPod{pod("p1", 1_050), pod("p2", 4_400)}, [][]string{{"p1"}, {"p2"}}},
		{"a combined rewrite whose lastTimestamp is 1.9 s after the Pod", []phases.Times{precise(1_000), combined(6_550)},
			[]*wlPod{pod("p1", 1_050), pod("p2", 4_400)}, [][]string{{"p1"}, nil}},
		// By stamps of one clock and precision, a Pod created before a step is not that step's,
		// however close: a second's slack took the next wave's step for it.
		{"a Pod 0.5 s before the next step, by event names, is not its", []phases.Times{precise(1_000), precise(3_000)},
			[]*wlPod{pod("p1", 1_050), pod("p2", 2_500)}, [][]string{{"p1"}, nil}},
		// A step whose own Pod is missing leaves the next wave's Pod to the next step.
		{"a step without its Pod", []phases.Times{precise(1_000), precise(3_000), precise(5_000)},
			[]*wlPod{pod("p1", 1_050), pod("p3", 5_050)}, [][]string{{"p1"}, nil, {"p3"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var steps []rollout.Step
			for i, at := range tt.steps {
				steps = append(steps, rollout.Step{Time: at, Up: true, Target: "web-7d4b9", From: int32(i), To: int32(i + 1)})
			}
			matchSteps(steps, tt.news, nil, rollout.Deployment)
			for i, s := range steps {
				if fmt.Sprint(s.Pods) != fmt.Sprint(tt.want[i]) {
					t.Errorf("step %d: Pods %v, want %v", i, s.Pods, tt.want[i])
				}
			}
		})
	}
}

// TestMatchStepsSurge: with room to surge, the deployment controller scales the new ReplicaSet
// again as soon as it has scaled the old one down, milliseconds after the first step, and the
// replicaset controller may create the Pods of both after the second. The Pods fill the steps in
// order: the first two the step of two, the third the step of one.
func TestMatchStepsSurge(t *testing.T) {
	pod := func(uid string, created int) *wlPod {
		p := &wlPod{uid: types.UID(uid), name: uid, ownerName: "web-7d4b9"}
		p.created.Add(simAt(created), phases.SourceEventName)
		return p
	}
	at := func(ms int) phases.Times {
		return phases.Times{{At: phases.InstantOf(simAt(ms)), Source: phases.SourceEventName}}
	}
	steps := []rollout.Step{
		{Time: at(1_000), Up: true, Target: "web-7d4b9", From: 0, To: 2},
		{Time: at(1_004), Up: true, Target: "web-7d4b9", From: 2, To: 3},
	}
	matchSteps(steps, []*wlPod{pod("p1", 1_010), pod("p2", 1_012), pod("p3", 1_015)}, nil, rollout.Deployment)
	if got := fmt.Sprint(steps[0].Pods, steps[1].Pods); got != "[p1 p2] [p3]" {
		t.Errorf("steps' Pods %s, want [p1 p2] [p3]", got)
	}
}
