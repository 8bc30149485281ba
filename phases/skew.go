package phases

import (
	"slices"
	"time"
)

// skewThreshold is the smallest lead of a component's clock over readyspan's that is corrected;
// below it, the difference is indistinguishable from ordinary jitter.
const skewThreshold = 50 * time.Millisecond

// clockSkew is how far ahead of readyspan's clock each component's clock was found to be, and
// how far behind the kubelet's clock is proven to be.
type clockSkew struct {
	kubelet, scheduler, controller time.Duration
	kubeletBehind                  time.Duration
}

// ahead returns how far stamps of src run ahead of the watch receive times of the same
// boundaries. Nothing can be stamped after readyspan received it, so a stamp later than its
// receive time proves the emitter's clock is ahead by at least that much. (A clock that is
// behind is indistinguishable from delivery delay and is not corrected.)
func ahead(set []Times, srcs ...Source) time.Duration {
	var max time.Duration
	for _, t := range set {
		max = lead(max, t, srcs...)
	}
	return beyondJitter(max)
}

// lead returns the greater of max and how far the stamps of srcs in t run ahead of t's
// earliest watch receive time.
func lead(max time.Duration, t Times, srcs ...Source) time.Duration {
	var watch time.Time
	for _, s := range t {
		if s.Source == SourceWatch && (watch.IsZero() || s.Time().Before(watch)) {
			watch = s.Time()
		}
	}
	if watch.IsZero() {
		return max
	}
	for _, s := range t {
		for _, src := range srcs {
			if s.Source == src {
				if d := s.Time().Sub(watch); d > max {
					max = d
				}
			}
		}
	}
	return max
}

// beyondJitter is a lead as corrected: none below skewThreshold.
func beyondJitter(d time.Duration) time.Duration {
	if d < skewThreshold {
		return 0
	}
	return d
}

// kubeletAhead is ahead for the boundaries the kubelet stamps, without gathering them: it runs
// for every Pod.
func kubeletAhead(p *Pod) time.Duration {
	var max time.Duration
	for _, t := range [...]Times{p.KubeletStarted, p.SandboxReady, p.Initialized, p.ContainersReady} {
		max = lead(max, t, SourceEventName)
	}
	for i := range p.Containers {
		c := &p.Containers[i]
		for _, t := range [...]Times{c.PullStarted, c.PullFinished, c.Created, c.Started} {
			max = lead(max, t, SourceEventName)
		}
	}
	return beyondJitter(max)
}

// kubeletBehind returns how far the kubelet's clock is proven to run behind: the most that one
// of its stamps, its precision allowed for, falls before the Pod's bind, as the control plane
// stamped it (after any scheduler correction, sched). The kubelet acts on a Pod only once it is
// bound, so such a stamp is on a clock that is behind by at least that much, whatever the
// delivery delays: unlike a lead over the receive times, this is read from stamps alone. It is a
// lower bound (the kubelet acts some time after the bind), so it is not used to shift stamps.
// Zero when the bind has no stamp of the control plane's (only a receive time) or nothing of the
// kubelet's falls before it beyond jitter.
func kubeletBehind(p *Pod, sched time.Duration) time.Duration {
	var buf [resolveOnStack]Stamp
	bound := Times(buf[:0])
	for _, s := range p.Scheduled {
		if s.Source == SourceWatch {
			continue // an upper bound only: late after a relist
		}
		if sched > 0 && (s.Source == SourceEventTime || s.Source == SourceEventName) {
			s.At = InstantOf(s.Time().Add(-sched))
		}
		bound = append(bound, s)
	}
	bind, ok := bound.Resolve()
	if !ok {
		return 0
	}
	var max time.Duration
	bindNano := int64(bind.At) // in nanoseconds: a Pod has a few dozen stamps to hold to it
	before := func(t Times) {
		for _, s := range t {
			switch s.Source {
			case SourceEventName, SourceEventSeconds, SourceStatus:
				if d := time.Duration(bindNano - int64(s.At) - int64(s.Source.Precision())); d > max {
					max = d
				}
			}
		}
	}
	for _, t := range [...]Times{p.KubeletStarted, p.SandboxReady, p.Initialized, p.ContainersReady, p.Ready} {
		before(t)
	}
	for i := range p.Containers {
		c := &p.Containers[i]
		for _, t := range [...]Times{c.PullStarted, c.PullFinished, c.Created, c.Started, c.PostStartDone, c.StartupDone, c.ReadyAt, c.Restarted} {
			before(t)
		}
	}
	return beyondJitter(max)
}

// passOver returns t without the stamps of srcs when it has a watch receive time to fall back
// on; t itself otherwise.
func passOver(t Times, srcs ...Source) Times {
	watch, other := false, false
	for _, s := range t {
		switch {
		case s.Source == SourceWatch:
			watch = true
		case slices.Contains(srcs, s.Source):
			other = true
		}
	}
	if !watch || !other {
		return t
	}
	out := make(Times, 0, len(t))
	for _, s := range t {
		if !slices.Contains(srcs, s.Source) {
			out = append(out, s)
		}
	}
	return out
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
				o.Time.At = InstantOf(o.Time.Time().Add(-d))
			}
		}
		out[i] = o
	}
	return out
}

// controllerStamps are the stamps of the workload controllers' clocks: the Pod's creation and
// each workload of its chain reached.
func controllerStamps(p *Pod) []Times {
	ts := make([]Times, 1, 4)
	ts[0] = p.Created
	for i := range p.Controllers {
		ts = append(ts, p.Controllers[i].Reached)
	}
	return ts
}

// correctSkew returns p with the stamps of components whose clocks run ahead of readyspan's
// moved back (a copy; p itself when nothing is corrected), and the corrections it applied.
func correctSkew(in *Pod) (*Pod, clockSkew) {
	schedSrcs := []Source{SourceEventTime, SourceEventName}
	sk := clockSkew{
		kubelet:    kubeletAhead(in),
		scheduler:  ahead([]Times{in.Scheduled}, schedSrcs...),
		controller: ahead(controllerStamps(in), SourceEventName),
	}
	if sk.kubelet == 0 {
		sk.kubeletBehind = kubeletBehind(in, sk.scheduler)
	}
	if sk == (clockSkew{}) {
		return in, sk // the usual case: Build reads the Pod and never writes it
	}
	p := *in
	if d := sk.kubelet; d > 0 {
		kubeletSrcs := []Source{SourceEventName, SourceEventSeconds, SourceStatus}
		p.KubeletStarted = shiftAll(p.KubeletStarted, d, kubeletSrcs...)
		p.SandboxReady = shiftAll(p.SandboxReady, d, kubeletSrcs...)
		p.Initialized = shiftAll(p.Initialized, d, kubeletSrcs...)
		p.ContainersReady = shiftAll(p.ContainersReady, d, kubeletSrcs...)
		p.Ready = shiftAll(p.Ready, d, kubeletSrcs...)
		p.PodWarnings = shiftOcc(p.PodWarnings, d, kubeletSrcs...)
		p.VolumeEvents = shiftOcc(p.VolumeEvents, d, kubeletSrcs...)
		p.Containers = append([]Container(nil), in.Containers...)
		for i := range p.Containers {
			c := &p.Containers[i]
			for _, t := range []*Times{&c.PullStarted, &c.PullFinished, &c.Created, &c.Started, &c.PostStartDone, &c.StartupDone, &c.ReadyAt, &c.Finished, &c.Restarted} {
				*t = shiftAll(*t, d, kubeletSrcs...)
			}
			c.PullFailures = shiftOcc(c.PullFailures, d, kubeletSrcs...)
			c.Failures = shiftOcc(c.Failures, d, kubeletSrcs...)
			c.Unhealthy = shiftOcc(c.Unhealthy, d, kubeletSrcs...)
		}
	}
	if sk.kubeletBehind > 0 {
		// A clock proven behind cannot be corrected (how far beyond the proof is not known),
		// so the kubelet's stamps are passed over wherever readyspan's own receive time of
		// the change stands in for them. Left alone, its whole-second stamps would even
		// outvote the receive times: they make a receive time look later than a watch
		// delivers, as after a relist (Times.Resolve).
		kubeletSrcs := []Source{SourceEventName, SourceEventSeconds, SourceStatus}
		p.KubeletStarted = passOver(p.KubeletStarted, kubeletSrcs...)
		p.SandboxReady = passOver(p.SandboxReady, kubeletSrcs...)
		p.Initialized = passOver(p.Initialized, kubeletSrcs...)
		p.ContainersReady = passOver(p.ContainersReady, kubeletSrcs...)
		p.Ready = passOver(p.Ready, kubeletSrcs...)
		p.Containers = append([]Container(nil), in.Containers...)
		for i := range p.Containers {
			c := &p.Containers[i]
			for _, t := range []*Times{&c.PullStarted, &c.PullFinished, &c.Created, &c.Started, &c.PostStartDone, &c.StartupDone, &c.ReadyAt, &c.Finished, &c.Restarted} {
				*t = passOver(*t, kubeletSrcs...)
			}
		}
	}
	if sk.scheduler > 0 {
		p.Scheduled = shiftAll(p.Scheduled, sk.scheduler, schedSrcs...)
		p.SchedulingFailure = shiftOcc(p.SchedulingFailure, sk.scheduler, schedSrcs...)
		p.Preempted = shiftOcc(p.Preempted, sk.scheduler, schedSrcs...)
	}
	if sk.controller > 0 {
		p.Created = shiftAll(p.Created, sk.controller, SourceEventName, SourceEventSeconds)
		p.Controllers = slices.Clone(p.Controllers) // p shares in's
		for i := range p.Controllers {
			c := &p.Controllers[i]
			c.Reached = shiftAll(c.Reached, sk.controller, SourceEventName, SourceEventSeconds)
		}
	}
	return &p, sk
}
