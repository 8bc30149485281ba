package phases

import (
	"strings"
	"testing"
	"time"
)

// failedMount is a FailedMount the kubelet repeated: first at first, last at last (whole
// seconds, as lastTimestamp states it).
func failedMount(first int, last time.Time, count int32) Occurrence {
	return Occurrence{Time: Stamp{InstantOf(ms(first)), SourceEventName}, Reason: VolumeFailedMount, Count: count, Last: last,
		Message: `MountVolume.SetUp failed for volume "cfg" : configmap "late-config" not found`}
}

// TestVolumesWaitDrawn: a Pod whose ConfigMap volume was missing shows kubelet.volumes inside the
// sandbox step, from the Pod on its node to the sandbox ready, with the kubelet's FailedMount
// events and the window in which the mount finished (after the last failure, before the
// sandbox). On the code before the step, no such span existed.
func TestVolumesWaitDrawn(t *testing.T) {
	p := minimal()
	p.SandboxReady = nil
	p.SandboxReady.Add(ms(6500), SourceWatch)
	p.VolumeEvents = []Occurrence{failedMount(100, t0.Add(4*time.Second), 4)}
	for i := range p.Containers {
		c := &p.Containers[i]
		for _, ts := range []*Times{&c.PullStarted, &c.PullFinished, &c.Created, &c.Started, &c.ReadyAt} {
			*ts = (*ts).Shift(SourceEventName, 6*time.Second).Shift(SourceWatch, 6*time.Second)
		}
	}
	p.ContainersReady, p.Ready = p.ContainersReady.Shift(SourceWatch, 6*time.Second), p.Ready.Shift(SourceWatch, 6*time.Second)
	tr := Build(p, Options{})
	v, sb := tr.Find(SpanKubeletVolumes), tr.Find(SpanKubeletSandbox)
	if v == nil || sb == nil {
		t.Fatalf("no %s or %s span: %v", SpanKubeletVolumes, SpanKubeletSandbox, names(tr))
	}
	if v.ParentSpanID != sb.SpanID {
		t.Fatalf("%s is not inside %s", SpanKubeletVolumes, SpanKubeletSandbox)
	}
	if !v.Start.Equal(sb.Start) || !v.End.Equal(ms(6500)) {
		t.Fatalf("volumes %v → %v, want the sandbox's start %v → the sandbox ready %v", v.Start, v.End, sb.Start, ms(6500))
	}
	if got := v.Attr(AttrVolumesWindow); got != float64(2500) {
		t.Fatalf("window %v ms, want 2500 (the last FailedMount at 4 s to the sandbox at 6.5 s)", got)
	}
	if len(v.Events()) != 1 || v.Events()[0].Name != VolumeFailedMount {
		t.Fatalf("events %+v", v.Events())
	}
	if v.Status == StatusError || tr.Summary.FailureReason != "" {
		t.Fatalf("a mount that succeeded is no failure: %v %q", v.Status, tr.Summary.FailureReason)
	}
}

// TestVolumesNotDrawnWithoutEvidence: a Pod whose volumes show no wait has no kubelet.volumes.
func TestVolumesNotDrawnWithoutEvidence(t *testing.T) {
	p := minimal()
	p.Claims = []Claim{{Name: "data", Seen: true, Phase: "Bound"}} // bound before: no wait
	if s := Build(p, Options{}).Find(SpanKubeletVolumes); s != nil {
		t.Fatalf("drew %s without evidence of a volume wait", SpanKubeletVolumes)
	}
}

// TestVolumesFailedMount: a mount that never succeeded ends the step at the trace's end, not
// observed, with the kubelet's message as its error; the failure is named and counted from the
// first FailedMount.
func TestVolumesFailedMount(t *testing.T) {
	p := minimal()
	p.SandboxReady, p.Containers[0] = nil, Container{Name: "web", Image: "busybox"}
	p.ContainersReady, p.Running, p.Ready = nil, nil, nil
	p.VolumeEvents = []Occurrence{failedMount(100, t0.Add(120*time.Second), 9)}
	p.Outcome, p.End, p.FailureReason = OutcomeFailed, ms(121000), VolumeFailedMount
	tr := Build(p, Options{})
	v := tr.Find(SpanKubeletVolumes)
	if v == nil {
		t.Fatalf("no %s: %v", SpanKubeletVolumes, names(tr))
	}
	if v.Status != StatusError || !strings.HasPrefix(v.StatusMessage, "FailedMount: MountVolume.SetUp failed") {
		t.Fatalf("status %v %q", v.Status, v.StatusMessage)
	}
	if v.EndBound.Observed || !v.End.Equal(ms(121000)) {
		t.Fatalf("end %v observed=%v, want the trace's end, not observed", v.End, v.EndBound.Observed)
	}
	if v.Attr(AttrVolumesWindow) != nil {
		t.Fatal("no window without an end")
	}
	if tr.Summary.FailureReason != VolumeFailedMount || !tr.Summary.FailingSince.Equal(ms(100)) {
		t.Fatalf("failure %q since %v, want FailedMount since the first at %v", tr.Summary.FailureReason, tr.Summary.FailingSince, ms(100))
	}
	if FailureLabel(tr.Summary.FailureReason) != VolumeFailedMount {
		t.Fatal("FailedMount is a reason of its own in the failed-startups counter")
	}
}

// TestVolumeBindingInScheduling: a claim seen Bound between the Pod's creation and its bind is
// the scheduler's wait (VolumeBinding's PreBind), drawn in scheduling with the claim's name, from
// the scheduler's selected-node annotation when there is one, else not observed.
func TestVolumeBindingInScheduling(t *testing.T) {
	p := minimal()
	p.Scheduled = Times{{InstantOf(ms(2040)), SourceEventTime}}
	c := Claim{Name: "data", Volume: "local-pv", Seen: true, Phase: "Bound"}
	c.Created.Add(t0.Add(-time.Minute), SourceMetadata)
	c.Bound.Add(ms(2010), SourceWatch)
	p.Claims = []Claim{c}

	tr := Build(p, Options{})
	s := tr.Find(SpanSchedulingVolumeBinding + "/data")
	if s == nil {
		t.Fatalf("no %s: %v", SpanSchedulingVolumeBinding, names(tr))
	}
	if s.Attr(AttrClaimName) != "data" || s.Attr(AttrVolumeName) != "local-pv" {
		t.Fatalf("attrs %v", s.Attrs)
	}
	if !s.End.Equal(ms(2010)) || s.StartBound.Observed {
		t.Fatalf("%v → %v (start observed %v), want → the claim Bound at %v, start not observed", s.Start, s.End, s.StartBound.Observed, ms(2010))
	}
	if tr.Find(SpanKubeletVolumes) != nil {
		t.Fatal("a claim bound before the bind is no kubelet wait")
	}

	p.Claims[0].SelectedNode.Add(ms(1500), SourceWatch)
	s = Build(p, Options{}).Find(SpanSchedulingVolumeBinding + "/data")
	if s == nil || !s.Start.Equal(ms(1500)) || !s.StartBound.Observed {
		t.Fatalf("with a selected node seen at %v: %+v", ms(1500), s)
	}

	// Bound after the Pod was on its node (a Pod given its node directly): the kubelet's wait.
	p.Claims[0].SelectedNode = nil
	p.Claims[0].Bound = Times{{InstantOf(ms(5000)), SourceWatch}}
	p.Scheduled = Times{{InstantOf(ms(40)), SourceEventTime}}
	tr = Build(p, Options{})
	if tr.Find(SpanSchedulingVolumeBinding+"/data") != nil || tr.Find(SpanKubeletVolumes) == nil {
		t.Fatalf("a claim bound after the Pod reached its node: %v", names(tr))
	}
}

func names(tr *Trace) []string {
	out := make([]string, len(tr.Spans))
	for i := range tr.Spans {
		out[i] = tr.Spans[i].Path
	}
	return out
}
