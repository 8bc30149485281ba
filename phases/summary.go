package phases

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Summary holds the figures the metrics are made of, computed once from the timeline the spans
// are drawn from.
type Summary struct {
	Outcome Outcome
	// PhaseDurations is indexed like Phases; PhaseObserved says which durations were measured
	// at both ends (unobserved phases are not put in histograms).
	PhaseDurations [6]time.Duration
	PhaseObserved  [6]bool
	// Startup is Pod created → Ready (and serving); set only for the ready outcome.
	Startup time.Duration
	// SLI is the SIG-scalability pod startup SLI: created → all containers started, minus image
	// pulls and init containers. SLIEligible is false for stateful Pods, Pods that needed more
	// than one scheduling attempt and Pods that did not start.
	SLI         time.Duration
	SLIEligible bool
	// ColdPulls are the pull lengths (Pulling → Pulled) of images the kubelet actually pulled.
	ColdPulls          []time.Duration
	PullsPulled        int
	PullsPresent       int
	PullsFailed        int
	SchedulingAttempts int
	// SchedulingWaits are the waits within the scheduling phase that were not the scheduler's
	// (a scheduling gate, a new node), measured at both ends: the phase's length less them is
	// the scheduler's own.
	SchedulingWaits []Wait
	// CurrentPhase is where the Pod was when the trace ended without Ready.
	CurrentPhase string
	// FailureReason is the failure current when the trace ended without Ready (as
	// AttrFailureReason), and FailingSince the first failure the kubelet reported for any of
	// the Pod's containers (a pull error, a crash, a failed hook): from there on its time went
	// to failing, not to pulling or waiting for readiness.
	FailureReason string
	FailingSince  time.Time
	// Inconsistencies describes each milestone the stamps put impossibly early (see
	// outOfOrder). Such a trace's phases are not measured: which stamp is wrong is unknown.
	Inconsistencies []string
	// InconsistencyCauses names each one's cause, for a metric's label: the two milestones
	// ("created_before_replicaset_scaled_up"; a container's steps "container_…"), one of a
	// bounded set. Parallel to Inconsistencies.
	InconsistencyCauses []string
}

// TimeWarnings returns one line per impossible order of timestamps in the trace (a milestone
// stamped before one that must precede it, beyond precision and clock skew), naming the Pod.
func (t *Trace) TimeWarnings() []string {
	out := make([]string, 0, len(t.Summary.Inconsistencies))
	for _, why := range t.Summary.Inconsistencies {
		out = append(out, fmt.Sprintf("pod %s/%s (trace %s): timestamps out of order: %s", t.Pod.Namespace, t.Pod.Name, t.TraceID, why))
	}
	return out
}

// Wait is one wait within the scheduling phase, by its kind (WaitGated, WaitNode).
type Wait struct {
	Kind     string
	Duration time.Duration
}

// The kinds of wait (Wait.Kind): bounded, a metric's label.
const (
	WaitGated = "gated" // scheduling.gated
	WaitNode  = "node"  // scheduling.waiting_for_node
)

// WaitKinds lists every Wait.Kind.
var WaitKinds = []string{WaitGated, WaitNode}

// drawnPull is an image pull drawn as a span: the summary counts it.
type drawnPull struct {
	c               *Container
	pulling, pulled point // Pulling and Pulled, as resolved
}

// summarize computes the summary from the timeline and the pulls drawn; it reads no span.
func (b *builder) summarize(tl *timeline, opts Options) Summary {
	sum := Summary{Outcome: b.outcome, SchedulingAttempts: tl.attempts, CurrentPhase: tl.stoppedIn}
	sum.FailureReason, sum.FailingSince = tl.failure, tl.failingSince
	for i, ph := range tl.phases {
		sum.PhaseDurations[i] = ph.end.t.Sub(ph.start.t)
		sum.PhaseObserved[i] = ph.start.observed && ph.end.observed
	}
	if tl.bareRoot { // no controller created the Pod: the phase is not applicable
		sum.PhaseObserved[phaseIndex(PhaseControllers)] = false
	}
	if b.outcome == OutcomeCompleted { // its status phase is the time it ran, not its startup
		sum.PhaseObserved[phaseIndex(PhaseStatus)] = false
	}
	if b.outcome == OutcomeReady && tl.created.observed && tl.served.observed {
		sum.Startup = tl.served.t.Sub(tl.created.t)
	}
	sum.PullsFailed = b.failedPulls
	for _, pull := range b.pulls {
		switch pull.c.Cache {
		case "cold":
			sum.PullsPulled++
			if pull.pulling.observed && pull.pulled.observed {
				sum.ColdPulls = append(sum.ColdPulls, pull.pulled.t.Sub(pull.pulling.t))
			}
		case "warm":
			sum.PullsPresent++
		}
	}
	b.sli(&sum, tl.created, opts)
	sum.SchedulingWaits = b.waits
	if len(tl.inconsistent) > 0 {
		// Which stamp is wrong is unknown: no duration of this trace goes into a histogram.
		sum.Inconsistencies = make([]string, len(tl.inconsistent))
		sum.InconsistencyCauses = make([]string, len(tl.inconsistent))
		for i, x := range tl.inconsistent {
			sum.Inconsistencies[i], sum.InconsistencyCauses[i] = x.why, x.cause
		}
		sum.PhaseObserved = [len(sum.PhaseObserved)]bool{}
		sum.Startup, sum.SLI, sum.SLIEligible = 0, 0, false
		sum.SchedulingWaits = nil
	}
	return sum
}

// sli computes the SIG-scalability startup SLI: created → all containers started (observed via
// watch where readyspan saw it), minus time spent pulling images (overlapping pulls merged) and
// minus init container runtime.
func (b *builder) sli(sum *Summary, created point, opts Options) {
	p := b.pod
	started := b.lastContainer(func(c *Container) Times { return c.Started })
	if opts.Stateful || !created.observed || !started.observed || sum.SchedulingAttempts > 1 {
		return
	}
	var pulls [][2]Instant
	var initRuntime time.Duration
	for i := range p.Containers {
		c := &p.Containers[i]
		ps, pe := resolve(c.PullStarted), resolve(c.PullFinished)
		if ps.observed && pe.observed && pe.t > ps.t {
			pulls = append(pulls, [2]Instant{ps.t, pe.t})
		}
		if c.Init && !c.Sidecar {
			s, f := resolve(c.Started), resolve(c.Finished)
			if s.observed && f.observed && f.t > s.t {
				initRuntime += f.t.Sub(s.t)
			}
		}
	}
	sli := started.t.Sub(created.t) - mergedLength(pulls) - initRuntime
	if sli < 0 {
		sli = 0
	}
	sum.SLI, sum.SLIEligible = sli, true
}

func mergedLength(iv [][2]Instant) time.Duration {
	slices.SortFunc(iv, func(a, b [2]Instant) int { return cmp.Compare(a[0], b[0]) })
	var total time.Duration
	var cur [2]Instant
	for i, v := range iv {
		if i == 0 || v[0] > cur[1] {
			if i > 0 {
				total += cur[1].Sub(cur[0])
			}
			cur = v
			continue
		}
		if v[1] > cur[1] {
			cur[1] = v[1]
		}
	}
	if len(iv) > 0 {
		total += cur[1].Sub(cur[0])
	}
	return total
}

func attempts(p *Pod) int {
	n := 0
	for _, o := range p.SchedulingFailure {
		if o.Count > 1 {
			n += int(o.Count)
		} else {
			n++
		}
	}
	if resolve(p.Scheduled).observed {
		n++
	}
	return n
}

// failureOf is the failure of a Pod that did not reach Ready, and when the kubelet first
// reported a failure of any of its containers. The reason is the tracer's (the waiting reason
// in the Pod's status) or, when the status shows none (a crash-looping container caught running
// between two crashes), the latest failure the kubelet reported for a container not Ready.
func failureOf(p *Pod, outcome Outcome) (reason string, since time.Time) {
	if outcome == OutcomeReady || outcome == OutcomeCompleted {
		return "", time.Time{}
	}
	reason = p.FailureReason
	var latest time.Time
	for i := range p.Containers {
		c := &p.Containers[i]
		for _, os := range [...][]Occurrence{c.PullFailures, c.Failures} {
			for _, o := range os {
				t := o.Time.Time()
				if t.IsZero() {
					continue
				}
				if since.IsZero() || t.Before(since) {
					since = t
				}
				last := o.Last
				if last.IsZero() {
					last = t
				}
				if p.FailureReason == "" && len(c.ReadyAt) == 0 && o.Reason != "" && !last.Before(latest) {
					reason, latest = o.Reason, last
				}
			}
		}
	}
	// A volume that does not mount or attach holds the Pod before its sandbox: its failures
	// count from the first, and name the failure while the sandbox is not ready.
	for _, o := range p.VolumeEvents {
		if !IsVolumeFailure(o.Reason) || o.Time.At.IsZero() {
			continue
		}
		if t := o.Time.Time(); since.IsZero() || t.Before(since) {
			since = t
		}
		if reason == "" && !p.SandboxReady.Known() {
			reason = o.Reason
		}
	}
	if reason == "" {
		return "", time.Time{}
	}
	return reason, since
}
