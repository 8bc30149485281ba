package rollout

import (
	"strings"
	"testing"
	"time"

	"github.com/readyspan/readyspan/phases"
)

// minReady's old Pod is deleted at 8080. Two nodes take it out of their rules at 8680 and
// 8880: with no preStop hook its containers were told to stop at the deletion, so it was in
// both nodes' rules 0.8 s after (the last, 8880 − 8080). With a preStop sleep of 3 s they were
// told to stop at 11080, after both nodes: no finding.
func TestRotationAfterStop(t *testing.T) {
	rotation := &phases.Programming{Mode: "iptables", Wait: 10 * time.Second, Nodes: []phases.NodeProgramming{
		{Node: "node-a", At: ms(8680)}, {Node: "node-b", At: ms(8880)}}}

	r := minReady()
	r.OldPods[0].Rotation = rotation
	tr := Build(r)
	want := "web-old-1 was still in the rules of 2 of 2 nodes 0.8 s after it was told to stop"
	if !strings.Contains(tr.Summary.Sentence, want) {
		t.Errorf("sentence %q, want it to say %q", tr.Summary.Sentence, want)
	}
	sp := findSpan(tr, RotationSpanName)
	if sp == nil {
		t.Fatal("no rollout.pod.rotation")
	}
	if !sp.Start.Equal(ms(8080)) || !sp.End.Equal(ms(8880)) || sp.Status != phases.StatusError {
		t.Errorf("rotation [%v, %v] %v, want [8080, 8880] ms, an error", sp.Start.Sub(t0), sp.End.Sub(t0), sp.Status)
	}
	if got := sp.Attr(AttrRotationAfterStop); got != 800.0 {
		t.Errorf("after stop %v ms, want 800", got)
	}
	if after, late := r.OldPods[0].AfterStop(); !late || after != 800*time.Millisecond {
		t.Errorf("AfterStop = %v, %v; want 0.8s, late", after, late)
	}

	r = minReady()
	r.OldPods[0].Rotation = rotation
	r.OldPods[0].PreStop, r.OldPods[0].PreStopSleep = true, 3*time.Second
	tr = Build(r)
	if strings.Contains(tr.Summary.Sentence, "told to stop") {
		t.Errorf("sentence %q names a finding, but the preStop sleep outlasted both nodes", tr.Summary.Sentence)
	}
	if sp := findSpan(tr, RotationSpanName); sp == nil || sp.Status == phases.StatusError || sp.Attr(AttrRotationStop) != "deletion + preStop sleep 3.0 s" {
		t.Errorf("rotation span %+v: want no error, stop measured from the sleep", sp)
	}

	// An exec hook runs before SIGTERM for as long as it takes, unseen: the time after the stop
	// is an upper bound, and said to be.
	r = minReady()
	r.OldPods[0].Rotation = rotation
	r.OldPods[0].PreStop, r.OldPods[0].PreStopOther = true, true
	if tr = Build(r); !strings.Contains(tr.Summary.Sentence, "0.8 s after it was told to stop at most") {
		t.Errorf("sentence %q, want the bound said as one", tr.Summary.Sentence)
	}

	// A node that never took it out within the wait is in its rules at the wait's end, at least.
	r = minReady()
	r.OldPods[0].Rotation = &phases.Programming{Wait: 10 * time.Second, Nodes: []phases.NodeProgramming{{Node: "node-a", At: ms(8680)}, {Node: "node-z"}}}
	if after, late := r.OldPods[0].AfterStop(); !late || after != 10*time.Second {
		t.Errorf("AfterStop = %v, %v; want 10s (the wait), late", after, late)
	}
	// No node component: nothing drawn, nothing said.
	if tr = Build(minReady()); findSpan(tr, RotationSpanName) != nil || strings.Contains(tr.Summary.Sentence, "rules") {
		t.Error("a rotation drawn with no node reporting")
	}
}

func findSpan(tr *Trace, name string) *phases.Span {
	for i := range tr.Spans {
		if tr.Spans[i].Name == name {
			return &tr.Spans[i]
		}
	}
	return nil
}
