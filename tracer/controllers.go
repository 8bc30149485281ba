package tracer

import (
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/readyspan/readyspan/objects"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/watch"
)

// The workload controllers' own step (StatefulSet, DaemonSet, Job, and a ReplicaSet's
// replacements): what gave the controller reason to create a Pod, as the API shows it. A
// StatefulSet or DaemonSet change (its generation) is the request that starts the chain; an
// ordered StatefulSet creates each Pod once the one before it is Ready; a Pod that went (deleted,
// evicted, failed) is replaced; a Job's next Pod follows a succeeded one. Each is read from what
// the Pods and the workloads show, never assumed.

// owner is what the Pod correlator keeps of a controller of Pods: its spec changes (StatefulSets
// and DaemonSets), its Pods that went, and for a StatefulSet when each of its Pods turned Ready.
type owner struct {
	name, namespace string
	generation      int64
	changes         []workloadChange
	// ordered: a StatefulSet with podManagementPolicy OrderedReady (the default).
	ordered bool
	// ended holds the owner's latest Pods that went, oldest first (at most maxEnded).
	ended []endedPod
	// ready holds, for a StatefulSet, when each of its Pods (by name) first turned Ready.
	ready map[string]readyPod
}

type readyPod struct {
	uid types.UID
	at  phases.Times
}

// endedPod is a Pod of an owner that went: what a replacement links to.
type endedPod struct {
	uid       types.UID
	name      string
	node      string
	revision  string // its controller-revision-hash (StatefulSet, DaemonSet)
	why       string // "deleted", "evicted", "failed: REASON", "failed", or "succeeded"
	succeeded bool
	// at is when it went, as the controller learns it: the deletion request (deletionTimestamp
	// less the grace period, 1 s; the watch), or its terminal phase (the watch; the containers'
	// finishedAt). over is when it stopped running: its terminal phase, or its removal; a
	// DaemonSet replaces a Pod then (a terminating one still counts until it is terminal). gone
	// is its removal from the API: a StatefulSet recreates a name only then.
	at, over, gone phases.Times
	used           bool // a replacement (or a Job's next Pod) was traced as following it
}

// maxEnded bounds the Pods that went kept per owner; maxOwners bounds the owners kept, and
// maxReadyNames a StatefulSet's Ready times.
const (
	maxEnded      = 16
	maxOwners     = 10000
	maxReadyNames = 1024
)

// ownerOf returns the state of a Pod controller, made on first use (nil past maxOwners).
func (c *Correlator) ownerOf(uid types.UID, name, namespace string) *owner {
	if o := c.owners[uid]; o != nil {
		return o
	}
	if len(c.owners) >= maxOwners {
		c.stats.Dropped("owners_cap")
		return nil
	}
	o := &owner{name: name, namespace: namespace}
	c.owners[uid] = o
	return o
}

// handleWorkloadChange keeps a workload's spec changes (its generation: a template change, a
// scale) with who made them: the requests that start its Pods' chains.
func (c *Correlator) handleWorkloadChange(d *watch.Delta, m *metav1.ObjectMeta) *owner {
	if d.Type == watch.Deleted {
		delete(c.owners, m.UID)
		return nil
	}
	o := c.ownerOf(m.UID, m.Name, m.Namespace)
	if o == nil || m.Generation == o.generation {
		return o
	}
	o.generation = m.Generation
	var ch workloadChange
	var at time.Time
	ch.client, at = objects.ClientChange(m)
	if m.Generation == 1 {
		at = m.CreationTimestamp.Time
	}
	if n := len(o.changes); n > 0 && o.changes[n-1].client == ch.client && o.changes[n-1].stated.Equal(at) {
		// No client wrote since the last change: the workload's own controller raised the
		// generation (Argo Rollouts writes each container's resources into a new Rollout), and
		// the Pods' chain still starts at that change. (Two changes by one client within a
		// second are told apart no better: their Pods are rooted at the first.)
		return o
	}
	ch.stated = at
	ch.persisted.Add(at, phases.SourceMetadata)
	ch.persisted.Add(d.WatchTime(), phases.SourceWatch)
	o.changes = append(o.changes, ch)
	if len(o.changes) > maxHistory {
		o.changes = o.changes[len(o.changes)-maxHistory:]
	}
	return o
}

// notePod records what a Pod of a controller shows its owner: a StatefulSet's Pod turning
// Ready, a Pod going (deleted, evicted, failed, succeeded). It runs for every version of every
// controlled Pod, traced or not (one already exported still goes later).
func (c *Correlator) notePod(d *watch.Delta, p *corev1.Pod) {
	ref := objects.ControllerOf(&p.ObjectMeta)
	if ref == nil {
		return
	}
	switch ref.Kind {
	case "StatefulSet", "DaemonSet", "ReplicaSet", "Job":
	default:
		return
	}
	terminal := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	going := d.Type == watch.Deleted || p.DeletionTimestamp != nil || terminal
	ready := ref.Kind == "StatefulSet" && objects.IsReady(p)
	if !going && !ready {
		return
	}
	o := c.ownerOf(ref.UID, ref.Name, p.Namespace)
	if o == nil {
		return
	}
	if ready {
		if r, ok := o.ready[p.Name]; !ok || r.uid != p.UID {
			if o.ready == nil {
				o.ready = map[string]readyPod{}
			}
			if len(o.ready) < maxReadyNames || ok {
				var at phases.Times
				if cond := objects.Condition(p, corev1.PodReady); cond != nil {
					at.Add(cond.LastTransitionTime.Time, phases.SourceStatus)
				}
				at.Add(d.WatchTime(), phases.SourceWatch)
				o.ready[p.Name] = readyPod{uid: p.UID, at: at}
			}
		}
	}
	if going {
		o.noteEnd(d, p, terminal)
	}
}

// noteEnd records a Pod going: the first version that shows it, and its removal.
func (o *owner) noteEnd(d *watch.Delta, p *corev1.Pod, terminal bool) {
	var e *endedPod
	for i := range o.ended {
		if o.ended[i].uid == p.UID {
			e = &o.ended[i]
		}
	}
	if e == nil {
		o.ended = append(o.ended, endedPod{uid: p.UID, name: p.Name, node: p.Spec.NodeName,
			revision: p.Labels[appsv1.ControllerRevisionHashLabelKey]})
		if len(o.ended) > maxEnded {
			o.ended = o.ended[len(o.ended)-maxEnded:]
		}
		e = &o.ended[len(o.ended)-1]
	}
	if d.Type == watch.Deleted {
		e.gone.Add(d.WatchTime(), phases.SourceWatch)
	}
	if len(e.over) == 0 && (terminal || d.Type == watch.Deleted) {
		// Its containers done, or gone: as seen, else as its containers state it.
		if w := d.WatchTime(); !w.IsZero() {
			e.over.Add(w, phases.SourceWatch)
		} else {
			e.over.Add(lastFinished(p), phases.SourceStatus)
		}
	}
	if len(e.at) > 0 {
		return
	}
	switch {
	case terminal:
		e.why, e.succeeded = whyEnded(p), p.Status.Phase == corev1.PodSucceeded
		// The phase's change as seen; its containers' finish, earlier (the kubelet reports
		// the phase later), only where the watch did not see it.
		if w := d.WatchTime(); !w.IsZero() {
			e.at.Add(w, phases.SourceWatch)
		} else {
			e.at.Add(lastFinished(p), phases.SourceStatus)
		}
	case p.DeletionTimestamp != nil:
		e.why = whyEnded(p)
		requested := p.DeletionTimestamp.Time
		if g := p.DeletionGracePeriodSeconds; g != nil {
			requested = requested.Add(-time.Duration(*g) * time.Second)
		}
		e.at.Add(requested, phases.SourceMetadata)
		e.at.Add(d.WatchTime(), phases.SourceWatch)
	default: // gone with no version seen going (deleted with no grace, or while the watch was down)
		e.why = whyEnded(p)
		e.at = append(e.at, e.gone...)
	}
}

// whyEnded names why a Pod went: evicted (the eviction API's DisruptionTarget condition, the
// kubelet's Evicted), failed (with its status reason, or its container's), succeeded, deleted.
func whyEnded(p *corev1.Pod) string {
	return boundWhy(whyEndedUnbounded(p))
}

// maxWhy bounds why a Pod went: its status reason is the kubelet's or a controller's free text.
const maxWhy = 256

func boundWhy(s string) string {
	if len(s) <= maxWhy {
		return s
	}
	cut := maxWhy
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func whyEndedUnbounded(p *corev1.Pod) string {
	if p.Status.Reason == "Evicted" {
		return "evicted"
	}
	if cond := objects.Condition(p, corev1.DisruptionTarget); cond != nil && cond.Status == corev1.ConditionTrue {
		if cond.Reason == "EvictionByEvictionAPI" || cond.Reason == "TerminationByKubelet" {
			return "evicted"
		}
		if cond.Reason == "PreemptionByScheduler" {
			return "preempted"
		}
	}
	switch p.Status.Phase {
	case corev1.PodSucceeded:
		return "succeeded"
	case corev1.PodFailed:
		if r := p.Status.Reason; r != "" {
			return "failed: " + r
		}
		for _, cs := range p.Status.ContainerStatuses {
			if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
				return "failed: " + t.Reason + " (exit code " + strconv.Itoa(int(t.ExitCode)) + ")"
			}
		}
		return "failed"
	}
	return "deleted"
}

// lastFinished is the latest finishedAt of the Pod's containers (1 s, the runtime's clock).
func lastFinished(p *corev1.Pod) time.Time {
	var at time.Time
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.FinishedAt.After(at) {
			at = t.FinishedAt.Time
		}
	}
	return at
}

// followed returns the latest Pod of the owner that went at or before the new Pod's creation,
// not yet followed by another and matching, and marks it followed; nil for none. The new Pod
// must come within selfHealWindow of it.
func (o *owner) followed(obs *phases.Pod, match func(e *endedPod) bool) *endedPod {
	if o == nil {
		return nil
	}
	created, _ := obs.Created.Resolve()
	for i := len(o.ended) - 1; i >= 0; i-- {
		e := &o.ended[i]
		if e.used || string(e.uid) == obs.UID || !match(e) {
			continue
		}
		at := e.when()
		if len(at) == 0 || !phases.AtOrBefore(at, obs.Created) {
			continue
		}
		if s, _ := at.Resolve(); created.At.Sub(s.At) >= selfHealWindow {
			return nil
		}
		e.used = true
		return e
	}
	return nil
}

// when is when the Pod's going gave its controller reason to act.
func (e *endedPod) when() phases.Times {
	if len(e.at) > 0 {
		return e.at
	}
	return e.gone
}

// replaces fills the observation of a Pod that replaces one that went.
func replaces(obs *phases.Pod, e *endedPod, trigger phases.Times) {
	obs.Cause, obs.CauseObject = phases.CauseReplacement, e.name
	obs.Trigger = trigger
	obs.RootPersisted = trigger // the going is where the replacement's chain starts
	obs.Replaces = &phases.Replaced{UID: string(e.uid), Name: e.name, Why: e.why, Node: e.node}
	obs.Client = ""
}

// latestChange is the owner's latest spec change at or before the Pod's creation, and within
// selfHealWindow of it.
func (o *owner) latestChange(obs *phases.Pod) *workloadChange {
	if o == nil {
		return nil
	}
	created, _ := obs.Created.Resolve()
	for i := len(o.changes) - 1; i >= 0; i-- {
		ch := &o.changes[i]
		if !phases.AtOrBefore(ch.persisted, obs.Created) {
			continue
		}
		if s, _ := ch.persisted.Resolve(); created.At.Sub(s.At) >= selfHealWindow {
			return nil
		}
		return ch
	}
	return nil
}

// replicaSetReplacement fills the cause of a ReplicaSet's Pod no scale-up explains: the Pod of
// the ReplicaSet that went before it, when one did.
func (c *Correlator) replicaSetReplacement(uid types.UID, obs *phases.Pod) {
	if e := c.owners[uid].followed(obs, func(e *endedPod) bool { return !e.succeeded }); e != nil {
		replaces(obs, e, e.at)
	}
}

// statefulOrdinal splits a StatefulSet Pod's name into the set's name and its ordinal.
func statefulOrdinal(name string) (string, int, bool) {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(name[i+1:])
	if err != nil || n < 0 || strconv.Itoa(n) != name[i+1:] {
		return "", 0, false
	}
	return name[:i], n, true
}
