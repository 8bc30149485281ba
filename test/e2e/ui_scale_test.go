//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/web"
)

// thousandPodRollout is a rolling update of 1,000 replicas, one Pod per wave: 2,000 steps,
// 1,000 new Pods and 1,000 terminations, 4,000 Gantt rows.
func thousandPodRollout() *rollout.Trace {
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	r := &rollout.Rollout{Workload: rollout.Workload{Kind: rollout.Deployment, Name: "big", Namespace: "scale", UID: "5d3c7a30-0f45-4c36-9e0b-9d1f7d1c2a11"},
		Kind: rollout.KindUpdate, Generation: 2, Outcome: rollout.OutcomeComplete, Strategy: rollout.Strategy{Type: "RollingUpdate", MaxSurge: "1", MaxUnavailable: "0", Partition: -1}}
	r.Start.Add(t0, phases.SourceAudit)
	at := t0
	for i := range 1000 {
		uid := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
		old := fmt.Sprintf("00000000-0000-4000-9000-%012d", i)
		up := rollout.Step{Up: true, Target: "big-new", From: int32(i), To: int32(i + 1), Message: "Scaled up", Pods: []string{uid}}
		up.Time.Add(at, phases.SourceEventName)
		p := rollout.NewPod{UID: uid, Name: fmt.Sprintf("big-new-%04d", i)}
		p.Created.Add(at.Add(20*time.Millisecond), phases.SourceWatch)
		p.Ready.Add(at.Add(2*time.Second), phases.SourceWatch)
		down := rollout.Step{Target: "big-old", From: int32(1000 - i), To: int32(999 - i), Message: "Scaled down", Pods: []string{old}}
		down.Time.Add(at.Add(2010*time.Millisecond), phases.SourceEventName)
		o := rollout.OldPod{UID: old, Name: fmt.Sprintf("big-old-%04d", i), GracePeriod: 30}
		o.Deleted.Add(at.Add(2020*time.Millisecond), phases.SourceWatch)
		o.Gone.Add(at.Add(3*time.Second), phases.SourceWatch)
		r.Steps = append(r.Steps, up, down)
		r.NewPods = append(r.NewPods, p)
		r.OldPods = append(r.OldPods, o)
		at = at.Add(2030 * time.Millisecond)
	}
	r.Complete.Add(at.Add(time.Second), phases.SourceWatch)
	return rollout.Build(r)
}

// TestUIThousandPods opens the report of a 1,000-Pod rollout: the Gantt draws only the rows in
// view, and scrolling to the end draws the last one.
func TestUIThousandPods(t *testing.T) {
	b := newBrowser(t, 1280, 800)
	report := filepath.Join(b.artifacts, "report-1000-pods.html")
	f, err := os.Create(report)
	if err != nil {
		t.Fatal(err)
	}
	if err := web.WriteReport(f, "a 1,000-Pod rollout", "", nil, []*rollout.Trace{thousandPodRollout()}, nil); err != nil {
		t.Fatal(err)
	}
	f.Close()
	fi, _ := os.Stat(report)
	start := time.Now()
	b.do(t, "open the 1,000-Pod rollout", chromedp.Navigate("file://"+report), chromedp.WaitVisible(chromedp.CSS(`#rollouts tbody tr`)),
		chromedp.Click(chromedp.CSS(`#rollouts tbody tr:first-child a`)), chromedp.WaitVisible(chromedp.CSS(`#gantt g.row`)))
	opened := time.Since(start)
	rows := eval[int](t, b, `+document.getElementById('gantt').dataset.rows`)
	drawn := eval[int](t, b, `document.querySelectorAll('#gantt g.row').length`)
	t.Logf("report %d bytes; list → Gantt of %d rows in %v, %d rows drawn", fi.Size(), rows, opened.Round(time.Millisecond), drawn)
	if rows != 4000 {
		t.Fatalf("%d rows, want 4,000 (2,000 steps, 1,000 new Pods, 1,000 terminations)", rows)
	}
	if drawn == 0 || drawn > 200 {
		t.Errorf("%d rows drawn at once, want only those in view", drawn)
	}
	b.do(t, "scroll to the end", chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector('#gantt .scroll'); s.scrollTop = s.scrollHeight; s.dispatchEvent(new Event('scroll')); })()`),
		chromedp.Sleep(300*time.Millisecond))
	if last := eval[bool](t, b, `Array.from(document.querySelectorAll('#gantt g.row')).some(g => (g.textContent || '').includes('big-old-0999'))`); !last {
		t.Error("scrolled to the end, the last termination's row is not drawn")
	}
	b.screenshot(t, "report-1000-pods-end")
	b.noProblems(t)
}
