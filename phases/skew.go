package phases

import "time"

// skewThreshold is the smallest lead of a component's clock over readyspan's that is corrected;
// below it, the difference is indistinguishable from ordinary jitter.
const skewThreshold = 50 * time.Millisecond

// clockSkew is how far ahead of readyspan's clock each component's clock was found to be.
type clockSkew struct {
	kubelet, scheduler, controller time.Duration
}

// ahead returns how far stamps of src run ahead of the watch receive times of the same
// boundaries. Nothing can be stamped after readyspan received it, so a stamp later than its
// receive time proves the emitter's clock is ahead by at least that much. (A clock that is
// behind is indistinguishable from delivery delay and is not corrected.)
func ahead(set []Times, srcs ...Source) time.Duration {
	var max time.Duration
	for _, t := range set {
		var watch time.Time
		for _, s := range t {
			if s.Source == SourceWatch && (watch.IsZero() || s.Time.Before(watch)) {
				watch = s.Time
			}
		}
		if watch.IsZero() {
			continue
		}
		for _, s := range t {
			for _, src := range srcs {
				if s.Source == src {
					if d := s.Time.Sub(watch); d > max {
						max = d
					}
				}
			}
		}
	}
	if max < skewThreshold {
		return 0
	}
	return max
}

func shiftAll(t Times, d time.Duration, srcs ...Source) Times {
	for _, s := range srcs {
		t = t.Shift(s, -d)
	}
	return t
}

func shiftOcc(os []Occurrence, d time.Duration, srcs ...Source) []Occurrence {
	if d == 0 || len(os) == 0 {
		return os
	}
	out := make([]Occurrence, len(os))
	for i, o := range os {
		for _, s := range srcs {
			if o.Time.Source == s {
				o.Time.Time = o.Time.Time.Add(-d)
			}
		}
		out[i] = o
	}
	return out
}

// correctSkew returns a copy of p with the stamps of components whose clocks run ahead of
// readyspan's moved back, and the corrections it applied.
func correctSkew(in *Pod) (*Pod, clockSkew) {
	p := *in
	p.Containers = append([]Container(nil), in.Containers...)
	var sk clockSkew

	kubelet := []Times{p.KubeletStarted, p.SandboxReady, p.Initialized, p.ContainersReady}
	for _, c := range p.Containers {
		kubelet = append(kubelet, c.PullStarted, c.PullFinished, c.Created, c.Started)
	}
	kubeletSrcs := []Source{SourceEventName, SourceEventSeconds, SourceStatus}
	if sk.kubelet = ahead(kubelet, SourceEventName); sk.kubelet > 0 {
		d := sk.kubelet
		p.KubeletStarted = shiftAll(p.KubeletStarted, d, kubeletSrcs...)
		p.SandboxReady = shiftAll(p.SandboxReady, d, kubeletSrcs...)
		p.Initialized = shiftAll(p.Initialized, d, kubeletSrcs...)
		p.ContainersReady = shiftAll(p.ContainersReady, d, kubeletSrcs...)
		p.Ready = shiftAll(p.Ready, d, kubeletSrcs...)
		p.PodWarnings = shiftOcc(p.PodWarnings, d, kubeletSrcs...)
		for i := range p.Containers {
			c := &p.Containers[i]
			for _, t := range []*Times{&c.PullStarted, &c.PullFinished, &c.Created, &c.Started, &c.StartupDone, &c.ReadyAt, &c.Finished} {
				*t = shiftAll(*t, d, kubeletSrcs...)
			}
			c.PullFailures = shiftOcc(c.PullFailures, d, kubeletSrcs...)
			c.Failures = shiftOcc(c.Failures, d, kubeletSrcs...)
			c.Unhealthy = shiftOcc(c.Unhealthy, d, kubeletSrcs...)
		}
	}
	schedSrcs := []Source{SourceEventTime, SourceEventName}
	if sk.scheduler = ahead([]Times{p.Scheduled}, schedSrcs...); sk.scheduler > 0 {
		p.Scheduled = shiftAll(p.Scheduled, sk.scheduler, schedSrcs...)
		p.SchedulingFailure = shiftOcc(p.SchedulingFailure, sk.scheduler, schedSrcs...)
		p.Preempted = shiftOcc(p.Preempted, sk.scheduler, schedSrcs...)
	}
	if sk.controller = ahead([]Times{p.Created, p.ReplicaSetScaled}, SourceEventName); sk.controller > 0 {
		p.Created = shiftAll(p.Created, sk.controller, SourceEventName, SourceEventSeconds)
		p.ReplicaSetScaled = shiftAll(p.ReplicaSetScaled, sk.controller, SourceEventName, SourceEventSeconds)
	}
	return &p, sk
}
