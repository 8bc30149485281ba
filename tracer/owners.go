package tracer

import (
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/readyspan/readyspan/events"
	"github.com/readyspan/readyspan/objects"
	"github.com/readyspan/readyspan/phases"
)

// replicaSet is what readyspan keeps of a ReplicaSet: who owns it and when it was scaled up.
type replicaSet struct {
	name      string
	namespace string
	// scaler is the workload that made and scales the ReplicaSet (its Deployment), nil for a
	// ReplicaSet of its own or of a kind readyspan does not read.
	scaler   *scalerRef
	replicas int32
	// scaleUps holds one entry per observed scale-up (creation included), oldest first.
	scaleUps []scaleUp
}

// scaleUp is one scale-up of a ReplicaSet as readyspan saw it: in the ReplicaSet's watch (its
// creation, or a version with more replicas), in the deployment controller's ScalingReplicaSet
// event ("Scaled up replica set web-7d4b9 from 1 to 2"), or in both.
type scaleUp struct {
	// from and to are the replica counts before and after, -1 where unknown (a ReplicaSet first
	// seen in a list shows its count now, not the one it was created with).
	from, to int32
	created  time.Time      // the ReplicaSet's creationTimestamp, for the step that created it (1 s)
	watched  phases.Instant // receive time of the ReplicaSet version that showed it
	event    *events.Event  // the ScalingReplicaSet event that stated it
	// combined says event is a combined Event's first version ("(combined from similar
	// events): …"): its name was stamped when the recorder combined it, after the step, and,
	// behind other Events being written, possibly after the Pods the step created. It dates the
	// step; it does not order it against them (order).
	combined bool
	// made counts the Pods traced as this step's (rootOf).
	made int32
}

// order are the stamps the step is ordered by against a Pod's creation: times, less a combined
// Event's where the ReplicaSet's watch saw the step.
func (s *scaleUp) order() phases.Times {
	if s.combined && s.watched != 0 {
		return phases.Times{{At: s.watched, Source: phases.SourceWatch}}
	}
	return s.times()
}

// before reports whether the step came at or before a Pod's creation. The step's stamps are
// each taken after the ReplicaSet's write, and so are its Pods': the deployment controller
// names its Event only once its write has returned, and a loaded controller manager may run the
// replicaset controller's creates, and name their Events, in between (7 ms apart on a quiet
// machine). The step that created the ReplicaSet precedes every Pod of it, whatever the stamps.
func (s *scaleUp) before(created phases.Times) bool {
	return !s.created.IsZero() || phases.AtOrBefore(s.order(), created)
}

// full reports whether the step's Pods are all traced: as many as it added, when it says.
func (s *scaleUp) full() bool {
	return s.from >= 0 && s.to >= 0 && s.made >= s.to-s.from
}

// times are the step's stamps, as phases reads ReplicaSetScaled. The event's own receive time
// is left out: it says when readyspan heard of the step, not when the step was taken, and a
// step's watch stamp is compared with Pods' (phases.AtOrBefore) only as the ReplicaSet's own.
func (s *scaleUp) times() phases.Times {
	t := make(phases.Times, 0, 5)
	t.Add(s.created, phases.SourceMetadata)
	t.AddInstant(s.watched, phases.SourceWatch)
	if e := s.event; e != nil {
		t.AddInstant(e.EventTime, phases.SourceEventTime)
		t.AddInstant(e.NameTime, phases.SourceEventName)
		t.AddInstant(e.First, phases.SourceEventSeconds)
	}
	return t
}

// at is the step's best stamp, for keeping the steps in order.
func (s *scaleUp) at() phases.Instant {
	r, _ := s.times().Resolve()
	return r.At
}

// counts reports whether the step could be the one from a to b replicas.
func (s *scaleUp) counts(from, to int32) bool {
	return (s.from < 0 || s.from == from) && (s.to < 0 || s.to == to)
}

// scalerRef names a ReplicaSet's scaler: its registry entry, UID and name.
type scalerRef struct {
	kind *kind
	uid  types.UID
	name string
}

// workloadChange is a spec change of a workload (its generation): who made it, and when it was
// persisted.
type workloadChange struct {
	client    string
	persisted phases.Times
	stated    time.Time // the client's managedFields time (the creation's for generation 1)
}

// watched records a scale-up the ReplicaSet's watch showed: into the step its event already
// stated, when the event came first, else as a step of its own.
func (rs *replicaSet) watched(su scaleUp) {
	for i := len(rs.scaleUps) - 1; i >= 0; i-- {
		s := &rs.scaleUps[i]
		if s.event != nil && s.watched == 0 && s.created.IsZero() && s.counts(su.from, su.to) && su.counts(s.from, s.to) {
			s.watched, s.created = su.watched, su.created
			return
		}
	}
	rs.add(su)
}

// add puts a step among the ReplicaSet's, in time order, keeping the latest maxHistory.
func (rs *replicaSet) add(su scaleUp) {
	at := su.at()
	i := len(rs.scaleUps)
	for i > 0 && rs.scaleUps[i-1].at() > at {
		i--
	}
	rs.scaleUps = slices.Insert(rs.scaleUps, i, su)
	if len(rs.scaleUps) > maxHistory {
		rs.scaleUps = rs.scaleUps[len(rs.scaleUps)-maxHistory:]
	}
}

// maxHistory bounds the scale-ups and spec changes kept per object.
const maxHistory = 16

// How a workload's controller reached the one below it for a Pod, as the order check names it
// ("ReplicaSet scaled up").
const (
	reachedScaledUp = "scaled up"
	reachedCreated  = "created"
)

// rootedAt roots the Pod at its controller, the workload ref names (a kind registered with a
// root: ref.Kind is one of the registry's names), the only one of its chain.
func rootedAt(obs *phases.Pod, ref *metav1.OwnerReference) {
	obs.Root = phases.RootOf(ref.Kind)
	obs.Controllers = append(obs.Controllers, phases.Controller{Kind: ref.Kind, Name: ref.Name})
}

// scaleEventSlack is how much later than its ScalingReplicaSet event the ReplicaSet's watch may
// show a scale-up and still be that one.
const scaleEventSlack = 2 * time.Second

// rootOf fills the chain's start for a Pod from its owners: the Deployment change that led to
// the ReplicaSet scale-up that created the Pod, or, when the ReplicaSet replaced a Pod with no
// scale-up (self-healing), the ReplicaSet itself.
func (c *Correlator) rootOf(ps *tracked, obs *phases.Pod) {
	owner := objects.ControllerOf(&ps.Pod().ObjectMeta)
	switch {
	case owner == nil:
		obs.Root = phases.RootBarePod
		obs.Client = ps.Creator()
		created, _ := ps.Created().Earliest()
		applyAudit(obs, c.auditFor("pods", ps.Pod().Namespace, ps.Pod().Name, created.Time()))
		return
	case owner.Kind != "ReplicaSet":
		obs.Root = phases.RootController
		if k := kindNamed(owner.APIVersion, owner.Kind); k != nil && k.root != nil {
			k.root(c, owner, obs, ps.Pod()) // the controller's registry entry may know the request behind it
		}
		return
	}
	rs := c.replicaSets[owner.UID]
	if rs == nil {
		rootedAt(obs, owner)
		return
	}
	if rs.scaler != nil {
		obs.Controllers = append(obs.Controllers, phases.Controller{Kind: rs.scaler.kind.Kind.Kind, Name: rs.scaler.name})
	}
	obs.Controllers = append(obs.Controllers, phases.Controller{Kind: owner.Kind, Name: owner.Name})
	// The step that created the Pod: the latest one at or before its creation with a Pod left
	// to create. A later one is another wave's; taken, it put the Pod's creation before its own
	// cause. One whose Pods are made already (traced before this one: a Pod is exported by the
	// time it is deleted, and a replacement is created after that) did not make this one: the
	// ReplicaSet replaced a Pod evicted or deleted (self-healing), unless an earlier step still
	// had one to make (the controller scaled up twice before creating).
	var scale phases.Times
	created, _ := obs.Created.Resolve()
	for i := len(rs.scaleUps) - 1; i >= 0; i-- {
		su := &rs.scaleUps[i]
		t := su.times()
		if !su.before(obs.Created) {
			continue
		}
		if s, _ := t.Resolve(); created.At.Sub(s.At) >= selfHealWindow {
			break
		}
		if su.full() {
			continue
		}
		su.made++
		scale = t
		break
	}
	if scale == nil || rs.scaler == nil {
		obs.Root = phases.RootOf(owner.Kind)
		obs.Client = objects.ControllerManager
		if scale == nil {
			c.replicaSetReplacement(owner.UID, obs)
		}
		return
	}
	obs.Root = phases.RootOf(rs.scaler.kind.Kind.Kind)
	rsLink := &obs.Controllers[len(obs.Controllers)-1]
	rsLink.Reached, rsLink.ReachedBy = scale, reachedScaledUp
	w := c.owners[rs.scaler.uid]
	if w == nil {
		return
	}
	scaledAt, _ := scale.Earliest()
	for i := len(w.changes) - 1; i >= 0; i-- {
		ch := w.changes[i]
		if s, ok := ch.persisted.Earliest(); ok && !s.Time().After(scaledAt.Time().Add(time.Second)) {
			obs.RootPersisted = ch.persisted
			obs.Client = ch.client
			applyAudit(obs, c.auditFor(string(rs.scaler.kind.Resource), w.namespace, w.name, scaledAt.Time()))
			return
		}
	}
}

// selfHealWindow: a Pod created longer than this after its ReplicaSet's last scale-up was not
// created by that scale-up but to replace a Pod (self-healing).
const selfHealWindow = 10 * time.Minute

// handleCreatedEvent reads SuccessfulCreate: the controller's nanosecond stamp, taken right
// after the create returned. The replicaset, daemonset and job controllers write "Created pod:
// NAME" (controller.RealPodControl), the statefulset controller "Create Pod NAME in
// StatefulSet SET successful" (StatefulPodControl.recordPodEvent, the verb title-cased). It
// returns false for a SuccessfulCreate message in another format.
func (c *Correlator) handleCreatedEvent(e *events.Event) bool {
	if e.Reason != "SuccessfulCreate" {
		return true
	}
	name, ok := createdPod(strings.TrimPrefix(e.Message, events.CombinedPrefix))
	if !ok {
		return false
	}
	if e.Count > 1 || strings.HasPrefix(e.Message, events.CombinedPrefix) {
		// A rewrite of a combined Event (a ReplicaSet creating more than ten Pods): its name
		// holds its first occurrence's time, another Pod's. The Pod's own watch time dates it.
		return true
	}
	key := objectName{e.Namespace, name}
	if ps := c.pods[c.byName[key]]; ps != nil {
		ps.CreatedBy(e)
		return true
	}
	if len(c.createdBy) >= maxPendingEvents {
		c.stats.Dropped("pending_events_cap")
		return true
	}
	c.createdBy[key] = e
	return true
}

// createdPod reads the Pod's name from a SuccessfulCreate message.
func createdPod(msg string) (string, bool) {
	if name, ok := strings.CutPrefix(msg, "Created pod: "); ok {
		return name, name != ""
	}
	rest, ok := strings.CutPrefix(msg, "Create Pod ")
	if !ok {
		rest, ok = strings.CutPrefix(msg, "create Pod ")
	}
	if !ok {
		return "", false
	}
	name, set, ok := strings.Cut(rest, " in StatefulSet ")
	if !ok || name == "" || !strings.HasSuffix(set, " successful") {
		return "", false
	}
	return name, true
}
