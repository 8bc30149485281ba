package rollout

import (
	"fmt"
	"testing"
	"time"

	"github.com/readyspan/readyspan/phases"
)

// BenchmarkBuild1000 builds the trace of a 1,000-Pod rollout in 1,000 waves of one Pod each:
// the critical-path walk is the part that grows with the rollout.
func BenchmarkBuild1000(b *testing.B) {
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	r := &Rollout{Workload: Workload{Kind: Deployment, Name: "web", Namespace: "default", UID: "5d3c7a30-0f45-4c36-9e0b-9d1f7d1c2a11"},
		Kind: KindUpdate, Generation: 2, Outcome: OutcomeComplete, Strategy: Strategy{MaxSurge: "1", MaxUnavailable: "0", Partition: -1}}
	r.Start.Add(t0, phases.SourceAudit)
	at := t0
	for i := 0; i < 1000; i++ {
		uid := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
		up := Step{Up: true, Target: "web-new", From: int32(i), To: int32(i + 1), Pods: []string{uid}}
		up.Time.Add(at, phases.SourceEventName)
		p := NewPod{UID: uid, Name: fmt.Sprintf("web-new-%d", i)}
		p.Created.Add(at.Add(20*time.Millisecond), phases.SourceWatch)
		p.Ready.Add(at.Add(2*time.Second), phases.SourceWatch)
		old := fmt.Sprintf("00000000-0000-4000-9000-%012d", i)
		down := Step{Target: "web-old", From: int32(1000 - i), To: int32(999 - i), Pods: []string{old}}
		down.Time.Add(at.Add(2010*time.Millisecond), phases.SourceEventName)
		o := OldPod{UID: old, Name: fmt.Sprintf("web-old-%d", i)}
		o.Deleted.Add(at.Add(2020*time.Millisecond), phases.SourceWatch)
		o.Gone.Add(at.Add(3*time.Second), phases.SourceWatch)
		r.Steps = append(r.Steps, up, down)
		r.NewPods = append(r.NewPods, p)
		r.OldPods = append(r.OldPods, o)
		at = at.Add(2030 * time.Millisecond)
	}
	r.Complete.Add(at.Add(time.Second), phases.SourceWatch)
	b.ReportAllocs()
	for b.Loop() {
		Build(r)
	}
}
