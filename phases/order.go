package phases

import (
	"fmt"
	"strings"
	"time"
)

// milestone is a named boundary, for checking that the boundaries of a startup come in the order
// they must happen in.
type milestone struct {
	name string
	at   point
	// handoff, for the chain's handoff (name empty): its name is built only when the order
	// check reports it, where a name built for every trace would allocate.
	handoff *Controller
}

// label is the milestone's name.
func (m *milestone) label() string {
	if m.handoff != nil {
		return m.handoff.Kind + " " + m.handoff.ReachedBy
	}
	return m.name
}

// latestPossible is the latest time a stamp allows the change to have happened: a whole-second
// stamp is truncated, so the change happened up to a second after it; other stamps are the
// time itself or, for a receive time, later than the change.
func latestPossible(p point) Instant {
	if p.src.Precision() == time.Second {
		return p.t + Instant(time.Second)
	}
	return p.t
}

// earliestPossible is the earliest time a stamp allows, and whether it bounds the change from
// below at all: a receive time only says the change happened before it.
func earliestPossible(p point) (Instant, bool) {
	if !p.observed || p.src == SourceWatch || p.src == SourceDerived {
		return 0, false
	}
	return p.t, true
}

// outOfOrder returns a description of each milestone that the stamps put before one that must
// precede it, by more than the stamps' precision and consistencySlack (clocks of different
// components) can explain, and its cause (inconsistency.cause). Milestones are in causal order;
// unobserved ones are skipped. Each milestone is compared with the latest earliest-possible time
// among those before it, and one found out of order is not held against the ones after it: a
// stamp that is too early gives one line (one that is too late puts each milestone after it out
// of order).
func outOfOrder(ms []milestone) []inconsistency {
	var out []inconsistency
	var floor Instant
	var floorM *milestone
	for i := range ms {
		m := &ms[i]
		if !m.at.observed {
			continue
		}
		if floorM != nil {
			if gap := time.Duration(floor - latestPossible(m.at)); gap > consistencySlack {
				out = append(out, inconsistency{
					why: fmt.Sprintf("%s (%s %s) is %s before %s (%s %s)",
						m.label(), m.at.src, m.at.t.Time().UTC().Format(time.RFC3339Nano), spoken(time.Duration(floor-m.at.t)),
						floorM.label(), floorM.at.src, floorM.at.t.Time().UTC().Format(time.RFC3339Nano)),
					cause: causeName(m.label()) + "_before_" + causeName(floorM.label()),
				})
				continue // a wrong stamp must not become the floor the others are held to
			}
		}
		if e, ok := earliestPossible(m.at); ok && (floorM == nil || e > floor) {
			floor, floorM = e, m
		}
	}
	return out
}

// inconsistency is one milestone out of order: why, in words with the stamps, and its cause,
// the two milestones' names alone ("created_before_replicaset_scaled_up"): a metric's label,
// so one of a bounded set (the milestones are fixed names; a container's steps are named
// without the container's name, and their cause starts with "container_").
type inconsistency struct {
	why, cause string
}

// causeName is a milestone's name as part of a cause: lower case, words joined by "_".
func causeName(name string) string {
	return strings.ReplaceAll(strings.ToLower(name), " ", "_")
}

// spoken formats a gap for people: days beyond two of them, else a rounded duration.
func spoken(d time.Duration) string {
	if d >= 48*time.Hour {
		return fmt.Sprintf("%.0f days", d.Hours()/24)
	}
	return d.Round(time.Millisecond).String()
}

// inconsistencies checks the order of the Pod's milestones and of each container's steps.
func (b *builder) inconsistencies(received, persisted, scaled, created, scheduled, kubeletDone, ready point) []inconsistency {
	p := b.pod
	sandbox := resolve(p.SandboxReady)
	var buf [9]milestone
	pod := append(buf[:0],
		milestone{"apiserver received", received, nil},
		milestone{"persisted", persisted, nil},
		milestone{at: scaled, handoff: p.handoff()},
		milestone{"created", created, nil},
		milestone{"scheduled", scheduled, nil},
		milestone{"sandbox ready", sandbox, nil},
		milestone{"containers ready", kubeletDone, nil},
		milestone{"ready", ready, nil},
	)
	if p.HasService {
		pod = append(pod, milestone{"endpoints ready", resolve(p.EndpointsReady), nil})
	}
	out := outOfOrder(pod)
	for i := range p.Containers {
		c := &p.Containers[i]
		// The steps are checked under names without the container's, and named after it
		// only when out of order: the names are built for the rare trace that needs them.
		// The causes are the first check's: a container's name is no label value.
		var stepsBuf [7]milestone
		plain := outOfOrder(containerMilestones(stepsBuf[:0], c, "", scheduled, kubeletDone))
		if plain == nil {
			continue
		}
		for j, s := range outOfOrder(containerMilestones(stepsBuf[:0], c, c.Name+" ", scheduled, kubeletDone)) {
			if !contains(out, s.why) {
				out = append(out, inconsistency{why: s.why, cause: "container_" + plain[j].cause})
			}
		}
	}
	return out
}

// containerMilestones appends a container's steps, in causal order between the Pod's bind and
// its containers being ready, to ms; prefix starts the names of the container's own steps.
func containerMilestones(ms []milestone, c *Container, prefix string, scheduled, kubeletDone point) []milestone {
	ms = append(ms,
		milestone{"scheduled", scheduled, nil},
		milestone{prefix + "pull started", resolve(c.PullStarted), nil},
		milestone{prefix + "pull finished", resolve(c.PullFinished), nil},
		milestone{prefix + "created", resolve(c.Created), nil},
		milestone{prefix + "started", resolve(c.Started), nil},
	)
	if c.Init && !c.Sidecar {
		return append(ms, milestone{prefix + "finished", resolve(c.Finished), nil})
	}
	return append(ms, milestone{prefix + "ready", resolve(c.ReadyAt), nil}, milestone{"containers ready", kubeletDone, nil})
}

func contains(list []inconsistency, why string) bool {
	for _, x := range list {
		if x.why == why {
			return true
		}
	}
	return false
}
