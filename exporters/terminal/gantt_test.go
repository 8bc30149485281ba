package terminal

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
)

// A two-wave rolling update drawn as a Gantt chart: the sentence first, each step followed by
// the Pod it created or removed, the critical path starred, every row's bar inside the chart.
func TestGantt(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 8, 41, 34, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	r := &rollout.Rollout{Workload: rollout.Workload{Kind: rollout.Deployment, Name: "web", Namespace: "default", UID: "5d3c7a30-0f45-4c36-9e0b-9d1f7d1c2a11"},
		Kind: rollout.KindUpdate, Generation: 2, Revision: "2", Outcome: rollout.OutcomeComplete,
		Strategy: rollout.Strategy{Type: "RollingUpdate", MaxSurge: "1", MaxUnavailable: "0", Partition: -1}}
	r.Start.Add(at(0), phases.SourceAudit)
	r.Complete.Add(at(7000), phases.SourceWatch)
	for i, w := range []struct{ up, down, created, ready, deleted, gone int }{{10, 3000, 30, 2900, 3020, 4000}, {3010, 6000, 3040, 5900, 6020, 7000}} {
		n := rollout.NewPod{UID: "00000000-0000-4000-8000-00000000000" + string(rune('1'+i)), Name: "web-new-" + string(rune('a'+i))}
		n.Created.Add(at(w.created), phases.SourceWatch)
		n.Ready.Add(at(w.ready), phases.SourceWatch)
		o := rollout.OldPod{UID: "00000000-0000-4000-9000-00000000000" + string(rune('1'+i)), Name: "web-old-" + string(rune('a'+i)), GracePeriod: 2, Killed: i == 1}
		o.Deleted.Add(at(w.deleted), phases.SourceWatch)
		o.Gone.Add(at(w.gone), phases.SourceWatch)
		up := rollout.Step{Up: true, Target: "web-new", From: int32(i), To: int32(i + 1), Message: "Scaled up", Pods: []string{n.UID}}
		up.Time.Add(at(w.up), phases.SourceEventName)
		down := rollout.Step{Target: "web-old", From: int32(2 - i), To: int32(1 - i), Message: "Scaled down", Pods: []string{o.UID}}
		down.Time.Add(at(w.down), phases.SourceEventName)
		r.Steps = append(r.Steps, up, down)
		r.NewPods = append(r.NewPods, n)
		r.OldPods = append(r.OldPods, o)
	}
	var out bytes.Buffer
	if err := Gantt(&out, rollout.Build(r)); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	t.Log("\n" + out.String())
	if !strings.HasPrefix(lines[0], "deployment default/web  rollout update (generation 2, revision 2)  complete  7.000s") {
		t.Errorf("header %q", lines[0])
	}
	if !strings.HasPrefix(strings.TrimSpace(lines[1]), "7.0 s; 2 waves of 1 (maxSurge 1, maxUnavailable 0)") {
		t.Errorf("the sentence is not second: %q", lines[1])
	}
	want := []string{"↑ web-new 0→1", "+ web-new-a", "↓ web-old 2→1", "- web-old-a", "↑ web-new 1→2", "+ web-new-b", "↓ web-old 1→0", "- web-old-b (killed)"}
	rows := lines[3:]
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(rows), len(want))
	}
	for i, w := range want {
		if !strings.Contains(rows[i], w) {
			t.Errorf("row %d %q, want %q", i, rows[i], w)
		}
		if n := strings.Count(rows[i], "|"); n < 2 {
			t.Errorf("row %d has no bar: %q", i, rows[i])
		}
	}
	// The last old Pod ends the rollout: its step and it are on the critical path.
	for _, i := range []int{6, 7} {
		if !strings.HasPrefix(strings.TrimLeft(rows[i], " "), "*") {
			t.Errorf("row %q is not marked critical", rows[i])
		}
	}
}
