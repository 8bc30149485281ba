package tracer

import (
	"testing"
	"time"

	"github.com/readyspan/readyspan/phases"
)

// A kubelet whose clock runs 2 s behind, through the correlator, at every tenth of the second for
// the bind (where whole-second stamps are truncated matters): the kubelet phase is what it is
// with the clock right, within the watch's 3 ms, and the root says the clock was proven behind.
// Before, in 5 of these 10 cases, the kubelet phase ended on its whole-second ContainersReady,
// 2.7 s early.
func TestKubeletClockBehindThroughTheCorrelator(t *testing.T) {
	kubelet := func(skew time.Duration, bind int) *phases.Trace {
		return runScenario(t, scenario{build: func(s *sim) int {
			s.kubeletSkew = skew
			s.pod("p", nil, nil, web, 0)
			return happy(s, "p", bind, false, false)
		}})[0]
	}
	for bind := 0; bind < 1000; bind += 100 {
		right, behind := kubelet(0, bind), kubelet(-2*time.Second, bind)
		want, got := right.Phase("kubelet"), behind.Phase("kubelet")
		if d := got.End.Sub(got.Start) - want.End.Sub(want.Start); d.Abs() > 3*time.Millisecond {
			t.Errorf("bind at %d ms: kubelet phase %v (ends on %v), %v with the clock right", bind,
				got.End.Sub(got.Start), got.Attr(phases.AttrSourceEnd), want.End.Sub(want.Start))
		}
		if v, _ := behind.Root().Attr(phases.AttrKubeletBehind).(int64); v < 1000 {
			t.Errorf("bind at %d ms: %s = %v, want at least 1000", bind, phases.AttrKubeletBehind, behind.Root().Attr(phases.AttrKubeletBehind))
		}
		if v := right.Root().Attr(phases.AttrKubeletBehind); v != nil {
			t.Errorf("bind at %d ms, clock right: %s = %v", bind, phases.AttrKubeletBehind, v)
		}
	}
}
