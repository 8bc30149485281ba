package phases

import (
	"testing"
	"time"
)

// behindPod is a bare Pod bound at 40 ms (the scheduler's eventTime) whose kubelet stamps with
// a clock lag behind: its condition and container times (whole seconds, truncated) and its Event
// names (ns). readyspan received every change live, 3 ms after it happened, at recv(ms); the
// containers were ready at 1800 ms.
func behindPod(lag time.Duration, recv func(int) time.Time) *Pod {
	kubelet := func(n int) time.Time { return ms(n).Add(-lag) }
	whole := func(n int) time.Time { return kubelet(n).Truncate(time.Second) }
	p := &Pod{UID: "9cade20b-81ea-4be9-bdc9-d3f2d8d8b69f", Name: "web", Namespace: "default", Root: RootBarePod}
	p.Created.Add(ms(0), SourceMetadata)
	p.Created.Add(recv(0), SourceWatch)
	p.Scheduled.Add(ms(40), SourceEventTime)
	p.Scheduled.Add(recv(40), SourceWatch)
	p.KubeletStarted = Times{{InstantOf(whole(60)), SourceStatus}, {InstantOf(recv(60)), SourceWatch}}
	p.SandboxReady = Times{{InstantOf(whole(700)), SourceStatus}, {InstantOf(recv(700)), SourceWatch}}
	c := Container{Name: "web", Image: "busybox", Cache: "warm"}
	c.PullFinished = Times{{InstantOf(kubelet(760)), SourceEventName}, {InstantOf(whole(760)), SourceEventSeconds}, {InstantOf(recv(760)), SourceWatch}}
	c.Created = Times{{InstantOf(kubelet(800)), SourceEventName}, {InstantOf(whole(800)), SourceEventSeconds}, {InstantOf(recv(800)), SourceWatch}}
	c.Started = Times{{InstantOf(kubelet(900)), SourceEventName}, {InstantOf(whole(900)), SourceEventSeconds}, {InstantOf(whole(900)), SourceStatus}, {InstantOf(recv(900)), SourceWatch}}
	c.ReadyAt = Times{{InstantOf(recv(1800)), SourceWatch}}
	p.Containers = []Container{c}
	p.ContainersReady = Times{{InstantOf(whole(1800)), SourceStatus}, {InstantOf(recv(1800)), SourceWatch}}
	p.Running = Times{{InstantOf(recv(900)), SourceWatch}}
	p.Ready = Times{{InstantOf(whole(1800)), SourceStatus}, {InstantOf(recv(1801)), SourceWatch}}
	return p
}

func live(n int) time.Time { return ms(n + 3) }

// A kubelet clock 2 s behind: its stamps fall before the bind, which proves it; they are passed
// over for the receive times and the lag's proof is on the root. Before, the whole-second
// ContainersReady (2.8 s before its receive time) outvoted the receive time as if that were
// late, and the kubelet phase ended 2.8 s early, before the kubelet had done anything.
func TestKubeletClockBehind(t *testing.T) {
	tr := Build(behindPod(2*time.Second, live), Options{})
	k := tr.Phase("kubelet")
	if !k.Start.Equal(ms(40)) || !k.End.Equal(live(1800)) {
		t.Errorf("kubelet phase %v → %v, want the bind %v → the receive time of ContainersReady %v", k.Start, k.End, ms(40), live(1800))
	}
	if src := k.Attr(AttrSourceEnd); src != "watch" {
		t.Errorf("kubelet phase ends on %v, want watch", src)
	}
	// The earliest proof: the Pulled event named 760 − 2000 ms, 1280 ms (less its 1 ns of
	// precision) before the bind.
	if v, _ := tr.Root().Attr(AttrKubeletBehind).(int64); v != 1279 {
		t.Errorf("%s = %v, want 1279", AttrKubeletBehind, tr.Root().Attr(AttrKubeletBehind))
	}
	for _, a := range []string{AttrKubeletAhead, AttrInconsistent} {
		if v := tr.Root().Attr(a); v != nil {
			t.Errorf("%s = %v, want none", a, v)
		}
	}
	// The container's steps from the receive times: from the sandbox to ContainersReady.
	if c := tr.Find("container/web"); c == nil || !c.Start.Equal(live(700)) || !c.End.Equal(live(1800)) || c.Attr(AttrClamped) != nil {
		t.Errorf("container/web, want %v → %v from the receive times, unclamped: %+v", live(700), live(1800), c)
	}
	if d := tr.Summary.PhaseDurations[phaseIndex("kubelet")]; d != live(1800).Sub(ms(40)) {
		t.Errorf("kubelet phase in the summary %v, want %v", d, live(1800).Sub(ms(40)))
	}
}

// The same Pod with the kubelet's clock right, or behind by less than it acts after the bind:
// nothing is proven and nothing is passed over.
func TestKubeletClockNotProvenBehind(t *testing.T) {
	for _, lag := range []time.Duration{0, 300 * time.Millisecond} {
		tr := Build(behindPod(lag, live), Options{})
		if v := tr.Root().Attr(AttrKubeletBehind); v != nil {
			t.Errorf("lag %v: %s = %v, want none", lag, AttrKubeletBehind, v)
		}
		if src := tr.Phase("kubelet").Attr(AttrSourceEnd); src != "watch" {
			t.Errorf("lag %v: kubelet phase ends on %v, want watch", lag, src)
		}
	}
}

// A relist: the kubelet's clock is right but readyspan saw everything the kubelet did a minute
// late (cut off, then a relist). Its stamps do not precede the bind, so they are kept, and the
// whole-second ContainersReady still outvotes the late receive time, as before.
func TestLateReceiveTimesAreNotABehindClock(t *testing.T) {
	late := func(n int) time.Time {
		if n < 60 {
			return live(n)
		}
		return ms(60000)
	}
	tr := Build(behindPod(0, late), Options{})
	if v := tr.Root().Attr(AttrKubeletBehind); v != nil {
		t.Errorf("%s = %v, want none", AttrKubeletBehind, v)
	}
	k := tr.Phase("kubelet")
	if src := k.Attr(AttrSourceEnd); src != "status" || k.End.After(ms(2000)) {
		t.Errorf("kubelet phase ends at %v from %v, want the status' second [1000 ms, 2000 ms)", k.End.Sub(t0), src)
	}
}
