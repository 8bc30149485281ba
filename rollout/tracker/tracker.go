package tracker

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/readyspan/readyspan/events"
	"github.com/readyspan/readyspan/objects"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/tracecontext"
	"github.com/readyspan/readyspan/watch"
)

// Sink receives each finished rollout trace. It must not block.
type Sink interface {
	ExportRollout(*rollout.Trace)
}

// SinkFunc adapts a function to Sink.
type SinkFunc func(*rollout.Trace)

// ExportRollout calls f.
func (f SinkFunc) ExportRollout(t *rollout.Trace) { f(t) }

// Stats receives the gauges of rollouts in progress.
type Stats interface {
	RolloutProgress(rollout.Progress)
}

// Config is what the tracker is told: how long to wait for a verdict, where its traces go, and
// what it reads of its caller's state.
type Config struct {
	// Backfill exports the latest rollout of a workload found rolled out already (explain),
	// not only the ones found in progress.
	Backfill bool
	// StuckAfter: a rollout without the controller's verdict this long is exported as failed
	// (DefaultStuckAfter when zero).
	StuckAfter time.Duration
	// BlockedAfter: a rollout whose Pod creates have been refused this long, with none made
	// since, is exported as blocked (DefaultBlockedAfter when zero).
	BlockedAfter time.Duration
	// Sink receives one trace per rollout; nil exports none.
	Sink Sink
	// Stats receives the gauges of rollouts in progress, Rejected the refused Pod creates;
	// either may be nil.
	Stats    Stats
	Rejected rollout.RejectedCreates
	// Audit finds the newest audited write to a workload before a time (nil: no audit log):
	// the request that started a rollout, to the microsecond.
	Audit func(resource, namespace, name string, before time.Time) *watch.AuditEntry
	// Steps reads a controller's Event about a workload as a scaling step, in the wording of
	// the workload's kind: ok is false for an Event that is not one, known false for a message
	// in a format readyspan does not know. The kinds' wordings are their registry's; it must be
	// set.
	Steps func(e *events.Event) (st rollout.Step, ok, known bool)
	// IgnoreTraceContext leaves the workloads' tracing.k8s.io/traceparent unread
	// (--trace-context=off); ContextIgnored, when set, counts the values refused.
	IgnoreTraceContext bool
	ContextIgnored     tracecontext.Counter
}

const (
	// DefaultStuckAfter: a rollout without the controller's verdict this long after it
	// began is exported as failed (stuck). Deployments with a progress deadline fail sooner, by
	// the controller's own verdict.
	DefaultStuckAfter = 30 * time.Minute
	// podTraceWait is how long a rolled-out workload waits for its new Pods' own traces (they
	// wait for endpoints and late events) and for its old Pods to be gone.
	podTraceWait = 45 * time.Second
	// maxStepsKept bounds the scaling steps remembered per workload.
	maxStepsKept = 2048
	// HistoryRetention is how long a workload's scaling steps and its deleted Pods are
	// remembered when no rollout in progress holds them: long enough for a rollout readyspan
	// sees late (its watch behind, a relist) to find its own, short enough that a cluster's
	// churn does not pile up (at 10 startups/s an hour of deleted Pods was 36,000 of them). A
	// rollout in progress keeps everything from its start, however long it runs.
	HistoryRetention = 10 * time.Minute
)

// wlPod is what the tracker keeps of a Pod a workload controls: the four moments a rollout draws
// (created, ready, deletion requested, gone) and, once exported, the Pod's own trace.
type wlPod struct {
	uid        types.UID
	name, node string
	owner      types.UID // the controller: a ReplicaSet, StatefulSet or DaemonSet
	ownerName  string
	created    phases.Times
	ready      phases.Times
	deleted    phases.Times
	gone       phases.Times
	grace      int64
	preStop    bool
	killed     bool
	// preStopSleep is the longest preStop sleep declared, preStopOther an exec or httpGet
	// preStop hook; addresses are the Pod's IPs.
	preStopSleep time.Duration
	preStopOther bool
	addresses    []string
	trace        *phases.Trace
}

// workloadState is one workload's last observation, its scaling steps, and the rollout in
// progress, if any.
type workloadState struct {
	view       workloadView
	generation int64
	steps      []rollout.Step
	cur        *activeRollout
}

// activeRollout is a rollout in progress. from bounds what belongs to it: steps and Pods from
// then on (a newer rollout's from is where it stops).
type activeRollout struct {
	obs     rollout.Rollout
	from    time.Time
	seenAt  time.Time // receive time of the change, for matching the audit log
	verdict phases.Times
	// statusDone: the workload's status said it was rolled out. A snapshot (explain) has no
	// receive time, and a StatefulSet's or DaemonSet's status no time of its own, so this may be
	// the only verdict there is.
	statusDone bool
	lastStep   time.Time
	// traceID and rootSpanID are the rollout trace's, which its Pods' traces link to; set
	// by the first Pod trace that links.
	traceID    phases.TraceID
	rootSpanID phases.SpanID
	// resumes is the trace the rollout was exported under as blocked, which the resumed
	// export (attempt 1) links to.
	resumes phases.TraceID
	// rejections are the refusals of the controller's Pod creates since the rollout began
	// (rejections.go); blockedExported says the rollout was exported as blocked, and attempt
	// is then 1: what follows is exported under a trace of its own.
	rejections      []rejectionState
	blockedExported bool
	attempt         int
}

// rolloutLinkAttrs are the attributes of a Pod trace's link to its rollout, shared by every
// such link: full (len == cap), so an append to one copies rather than writes into the others.
var rolloutLinkAttrs = []phases.Attr{{Key: rollout.AttrLinkRelation, Value: "rollout"}}

// Tracker turns workload changes into one trace per rollout. It is fed by its caller's one
// goroutine (the correlator's), so it shares its determinism: nothing in it is locked.
type Tracker struct {
	cfg Config

	workloads map[types.UID]*workloadState
	// active holds the workloads with a rollout in progress (cur set): the ones a tick looks
	// at. Most workloads of a cluster have none most of the time, and a tick walking every one
	// of them five times a second grows with the cluster, not with its rollouts.
	active    map[*workloadState]struct{}
	rsOwner   map[types.UID]types.UID            // ReplicaSet → its Deployment
	rsCreated map[types.NamespacedName]time.Time // ReplicaSets and ControllerRevisions → created
	pods      map[types.UID]*wlPod
	// byOwner indexes the Pods by their controller (a ReplicaSet, StatefulSet or DaemonSet), and
	// ownedRS a Deployment's ReplicaSets, so a rollout finds its Pods without scanning them all.
	byOwner   map[types.UID]map[types.UID]*wlPod
	ownedRS   map[types.UID]map[types.UID]bool
	now       time.Time
	lastPrune time.Time
	// rejectionCounts is the count last seen of each FailedCreate Event, so each occurrence
	// counts once; cfg.Rejected receives them.
	rejectionCounts map[types.UID]int32
}

// New returns a tracker that exports through cfg.Sink.
func New(cfg Config) *Tracker {
	if cfg.StuckAfter <= 0 {
		cfg.StuckAfter = DefaultStuckAfter
	}
	if cfg.BlockedAfter <= 0 {
		cfg.BlockedAfter = DefaultBlockedAfter
	}
	return &Tracker{cfg: cfg,
		workloads: map[types.UID]*workloadState{}, active: map[*workloadState]struct{}{}, rsOwner: map[types.UID]types.UID{},
		rsCreated: map[types.NamespacedName]time.Time{}, pods: map[types.UID]*wlPod{},
		byOwner: map[types.UID]map[types.UID]*wlPod{}, ownedRS: map[types.UID]map[types.UID]bool{},
		rejectionCounts: map[types.UID]int32{}}
}

func (r *Tracker) workload(uid types.UID) *workloadState {
	w := r.workloads[uid]
	if w == nil {
		w = &workloadState{}
		r.workloads[uid] = w
	}
	return w
}

func (r *Tracker) handleWorkload(d *watch.Delta, v workloadView) {
	uid := types.UID(v.ref.UID)
	recv := d.WatchTime()
	if d.Type == watch.Deleted {
		if w := r.workloads[uid]; w != nil && w.cur != nil {
			if w.cur.blockedExported && w.cur.blocked() != nil {
				r.finish(w, "", "", phases.Stamp{}, time.Time{}, phases.TraceID{}) // reported blocked; still was
			} else {
				r.finish(w, rollout.OutcomeFailed, "the "+v.ref.Kind+" was deleted", stampAt(d.Recv), time.Time{}, phases.TraceID{})
			}
		}
		delete(r.workloads, uid)
		return
	}
	w := r.workload(uid)
	v.sign(&w.view) // a workload seen first has a zero view: nothing to reuse
	// The trace context is new with this version when its value differs from the last one's.
	ctxNew := w.generation == 0 || v.traceparent != w.view.traceparent
	started := true
	switch {
	case w.generation == 0: // first sight
		w.view, w.generation = v, v.generation
		switch {
		case d.Type == watch.Added && !recv.IsZero():
			r.start(w, v, rollout.KindCreate, recv, r.startContext(v.traceparent, true, true))
		case r.cfg.Backfill || !v.done:
			// Found rolling out (or explain asks for the latest rollout): the change happened
			// before readyspan watched, so only its managedFields time is known, and whether
			// the trace context was written for it is not: it is linked.
			r.start(w, v, guessKind(v), time.Time{}, r.startContext(v.traceparent, false, true))
		default:
			started = false
		}
	case v.generation > w.generation:
		prev := w.view
		w.view, w.generation = v, v.generation
		kind, ok := changeKind(prev, v)
		if ok {
			r.start(w, v, kind, recv, r.startContext(v.traceparent, ctxNew, ctxNew))
		}
		started = ok
	default:
		w.view = v
		started = false
	}
	if !started && ctxNew && w.cur != nil {
		// Written while the rollout runs (kubectl apply, then kubectl annotate): for it.
		if c, ok := r.contextOf(v.traceparent, true); ok {
			w.cur.adoptContext(c)
		}
	} else if !started && ctxNew {
		r.contextOf(v.traceparent, true) // counted if refused, though no rollout takes it
	}
	a := w.cur
	if a == nil || v.observedGeneration < a.obs.Generation {
		return
	}
	if v.revision != "" {
		a.obs.Revision = v.revision
	}
	a.statusDone = v.done
	if v.ref.Kind == rollout.Deployment {
		a.replicaFailure(v.replicaFailure, recv)
	}
	switch {
	case v.paused && v.ref.Kind == rollout.Deployment:
		r.finish(w, rollout.OutcomePaused, "paused", stampAt(recv), time.Time{}, phases.TraceID{})
		return
	case v.failure != "":
		r.failOrBlock(w, v.failure, stampAt(recv))
		return
	case v.done && !a.verdict.Known():
		a.verdict.Add(recv, phases.SourceWatch)
		a.verdict.Add(v.doneAt, phases.SourceStatus)
	}
	r.check(w, d.Recv)
}

// guessKind names a rollout found in progress: its first generation was a creation; a
// Deployment still at revision 1 was only ever scaled; anything else changed its template.
func guessKind(v workloadView) rollout.Kind {
	switch {
	case v.generation <= 1:
		return rollout.KindCreate
	case v.ref.Kind == rollout.Deployment && v.revision == "1":
		return rollout.KindScale
	}
	return rollout.KindUpdate
}

// changeKind tells what a new generation changed, and whether that starts a rollout: a template
// change (update; rollback is recognised later, when the new ReplicaSet turns out to be an old
// one), a restart, or a new replica count. Other spec changes (strategy, pause) do not.
func changeKind(prev, v workloadView) (rollout.Kind, bool) {
	switch {
	case v.templateHash != prev.templateHash:
		return rollout.KindUpdate, true
	case v.restartedAt != prev.restartedAt:
		return rollout.KindRestart, true
	case v.replicas != prev.replicas && v.ref.Kind != rollout.DaemonSet:
		return rollout.KindScale, true
	case prev.paused && !v.paused:
		return rollout.KindUpdate, true // resumed: what the pause held back rolls out now
	}
	return "", false
}

// start begins a rollout of the workload's current generation; one still in progress is
// superseded by it.
func (r *Tracker) start(w *workloadState, v workloadView, kind rollout.Kind, recv time.Time, tc phases.TraceContext) {
	a := &activeRollout{seenAt: recv, obs: rollout.Rollout{
		Workload: v.ref, Kind: kind, Generation: v.generation, Revision: v.revision,
		Strategy: v.strategy, Replicas: v.replicas, TraceContext: tc,
	}}
	a.obs.Start.Add(recv, phases.SourceWatch)
	switch {
	case kind == rollout.KindCreate:
		a.obs.Start.Add(v.created, phases.SourceMetadata)
	case recv.IsZero():
		// Only without a receive time: the newest client write in managedFields may be an
		// older one (a scale writes the scale subresource; an undo can remove the entry of the
		// write it undoes), which would pull a watched change seconds back.
		a.obs.Start.Add(v.changed, phases.SourceMetadata)
	}
	s, _ := a.obs.Start.Resolve()
	a.from = s.Time()
	if s.Source == phases.SourceWatch {
		// The change happened before readyspan saw it, and the controller may have acted on it
		// before then too.
		a.from = s.Time().Add(-time.Second)
	}
	if w.cur != nil {
		if end, ok := w.cur.verdict.Resolve(); ok {
			// Rolled out already (only waiting for its Pods' traces): complete, not superseded.
			r.finish(w, rollout.OutcomeComplete, "", r.endOf(w.cur, end), a.from, phases.TraceID{})
		} else {
			next, _ := a.fixTraceID() // the superseded rollout links to it: it is kept from now on
			r.finish(w, rollout.OutcomeSuperseded, "a newer rollout began", s, a.from, next)
		}
	}
	a.lastStep = s.Time()
	w.cur = a
	r.active[w] = struct{}{}
}

func stampAt(t time.Time) phases.Stamp {
	if t.IsZero() {
		return phases.Stamp{}
	}
	return phases.Stamp{At: phases.InstantOf(t), Source: phases.SourceWatch}
}

// HandleReplicaSet keeps which Deployment a ReplicaSet belongs to, so a Deployment's rollout
// finds its Pods, and when it was created, which tells a rollback from an update.
func (r *Tracker) HandleReplicaSet(d *watch.Delta, rs *appsv1.ReplicaSet) {
	if d.Type == watch.Deleted {
		if dep, ok := r.rsOwner[rs.UID]; ok {
			delete(r.ownedRS[dep], rs.UID)
			if len(r.ownedRS[dep]) == 0 {
				delete(r.ownedRS, dep)
			}
		}
		delete(r.rsOwner, rs.UID)
		delete(r.rsCreated, types.NamespacedName{Namespace: rs.Namespace, Name: rs.Name})
		return
	}
	if owner := objects.ControllerOf(&rs.ObjectMeta); owner != nil && owner.Kind == "Deployment" {
		r.rsOwner[rs.UID] = owner.UID
		if r.ownedRS[owner.UID] == nil {
			r.ownedRS[owner.UID] = map[types.UID]bool{}
		}
		r.ownedRS[owner.UID][rs.UID] = true
	}
	r.rsCreated[types.NamespacedName{Namespace: rs.Namespace, Name: rs.Name}] = rs.CreationTimestamp.Time
}

// HandleRevision keeps when a StatefulSet's or DaemonSet's ControllerRevision was created,
// which tells a rollback from an update.
func (r *Tracker) HandleRevision(d *watch.Delta, cr *appsv1.ControllerRevision) {
	if d.Type == watch.Deleted {
		delete(r.rsCreated, types.NamespacedName{Namespace: cr.Namespace, Name: cr.Name})
		return
	}
	r.rsCreated[types.NamespacedName{Namespace: cr.Namespace, Name: cr.Name}] = cr.CreationTimestamp.Time
}

// workloadOf returns the workload that controls a Pod, through its ReplicaSet for a Deployment.
func (r *Tracker) workloadOf(p *wlPod) (*workloadState, types.UID) {
	uid := p.owner
	if d, ok := r.rsOwner[uid]; ok {
		uid = d
	}
	return r.workloads[uid], uid
}

// HandlePod follows a Pod a ReplicaSet, StatefulSet or DaemonSet controls: the moments a
// rollout draws (created, Ready, deletion requested, gone), and whether its rollout is over.
func (r *Tracker) HandlePod(d *watch.Delta, p *corev1.Pod) {
	owner := objects.ControllerOf(&p.ObjectMeta)
	if owner == nil || owner.Kind != "ReplicaSet" && owner.Kind != "StatefulSet" && owner.Kind != "DaemonSet" {
		return
	}
	wp := r.pods[p.UID]
	if wp == nil {
		if d.Type == watch.Deleted && d.Initial {
			return
		}
		wp = &wlPod{uid: p.UID, name: p.Name, owner: owner.UID, ownerName: owner.Name}
		wp.created.Add(p.CreationTimestamp.Time, phases.SourceMetadata)
		if d.Type == watch.Added {
			wp.created.Add(d.WatchTime(), phases.SourceWatch)
		}
		r.pods[p.UID] = wp
		if r.byOwner[owner.UID] == nil {
			r.byOwner[owner.UID] = map[types.UID]*wlPod{}
		}
		r.byOwner[owner.UID][p.UID] = wp
		if w, _ := r.workloadOf(wp); w != nil && w.cur != nil && d.Type == watch.Added {
			// The controller made a Pod: what refused its creates before no longer holds.
			at := d.WatchTime()
			if at.IsZero() {
				c, _ := wp.created.Resolve()
				at = c.Time()
			}
			w.cur.podCreated(owner.Name, at)
		}
	}
	wp.node = p.Spec.NodeName
	if c := objects.Condition(p, corev1.PodReady); c != nil && c.Status == corev1.ConditionTrue && !wp.ready.Known() {
		wp.ready.Add(d.WatchTime(), phases.SourceWatch)
		wp.ready.Add(c.LastTransitionTime.Time, phases.SourceStatus)
	}
	wp.preStop, wp.preStopSleep, wp.preStopOther = objects.PreStop(p)
	if len(wp.addresses) == 0 { // a Pod keeps its addresses once given: read them once
		wp.addresses = objects.PodAddresses(p)
	}
	if p.DeletionTimestamp != nil && !wp.deleted.Known() {
		wp.deleted.Add(d.WatchTime(), phases.SourceWatch)
		if p.DeletionGracePeriodSeconds != nil {
			wp.grace = *p.DeletionGracePeriodSeconds
			// deletionTimestamp is the request time plus the grace period.
			wp.deleted.Add(p.DeletionTimestamp.Add(-time.Duration(wp.grace)*time.Second), phases.SourceMetadata)
		}
	}
	for i := range p.Status.ContainerStatuses {
		// Killed with SIGKILL: the container did not stop within the grace period.
		if t := p.Status.ContainerStatuses[i].State.Terminated; t != nil && t.ExitCode == 137 && p.DeletionTimestamp != nil {
			wp.killed = true
		}
	}
	if d.Type == watch.Deleted {
		wp.gone.Add(d.WatchTime(), phases.SourceWatch)
		if !wp.deleted.Known() {
			wp.deleted = append(phases.Times(nil), wp.gone...)
		}
	}
	if w, _ := r.workloadOf(wp); w != nil {
		r.check(w, d.Recv)
	}
}

// HandleEvent records a controller's scaling step; known is false for a message in a format
// readyspan does not know.
func (r *Tracker) HandleEvent(e *events.Event) (known bool) {
	if e.Reason == failedCreate {
		return r.HandleRejection(e) // a StatefulSet's or DaemonSet's create refused
	}
	st, ok, known := r.cfg.Steps(e)
	if !ok || !known {
		return known
	}
	if e.Count > 1 || strings.HasPrefix(e.Message, events.CombinedPrefix) {
		// A rewrite of a combined (or repeated) Event: its name and eventTime are the first
		// occurrence's; this one happened at its lastTimestamp, just before it was received.
		st.Time.Add(e.Last.Time(), phases.SourceEventSeconds)
		st.Time.Add(e.Recv.Time(), phases.SourceWatch)
	} else {
		e.FirstStamps(&st.Time)
	}
	w := r.workload(e.Regarding.UID)
	at, _ := st.Time.Resolve()
	for _, s := range w.steps {
		if s.Message == st.Message && s.Target == st.Target {
			if prev, _ := s.Time.Resolve(); prev.At == at.At {
				return true // the same step again (a later version of its Event)
			}
		}
	}
	w.steps = append(w.steps, st)
	if len(w.steps) > maxStepsKept {
		w.steps = w.steps[len(w.steps)-maxStepsKept:]
	}
	if w.cur != nil && at.Time().After(w.cur.lastStep) {
		w.cur.lastStep = at.Time()
	}
	return true
}

// PodTrace hands a Pod's finished trace to the rollout that started the Pod, and links the
// Pod's trace to it.
func (r *Tracker) PodTrace(tr *phases.Trace) {
	wp := r.pods[types.UID(tr.Pod.UID)]
	if wp == nil {
		return
	}
	wp.trace = tr
	// The Pod's own trace knows its creation and Ready best (the controller's nanosecond
	// event stamps, the watch).
	for _, st := range tr.Pod.Created {
		wp.created.Add(st.Time(), st.Source)
	}
	if !wp.ready.Known() {
		for _, st := range tr.Pod.Ready {
			wp.ready.Add(st.Time(), st.Source)
		}
	}
	w, _ := r.workloadOf(wp)
	if w == nil || w.cur == nil {
		return
	}
	if c, _ := wp.created.Resolve(); c.Time().Before(w.cur.from) {
		return
	}
	traceID, rootSpanID := w.cur.fixTraceID() // once per rollout: a hash, not a Pod's work
	root := &tr.Spans[0]
	root.AddLink(phases.Link{TraceID: traceID, SpanID: rootSpanID, Attrs: rolloutLinkAttrs})
	podFollows(tr, w.cur)
}

// check exports the workload's rollout once it is over: the controller's verdict seen, every
// old Pod gone and every new Pod's trace in (or podTraceWait after the verdict). A rollout
// without a verdict fails after the stuck deadline.
func (r *Tracker) check(w *workloadState, now time.Time) {
	a := w.cur
	if a == nil {
		return
	}
	if !now.IsZero() && now.After(r.now) {
		r.now = now
	}
	if b := a.blocked(); b != nil && !a.blockedExported && !now.IsZero() && now.Sub(b.firstSeen) >= r.cfg.BlockedAfter {
		r.exportBlocked(w, now)
	}
	if !a.verdict.Known() {
		if s, ok := a.obs.Start.Resolve(); ok && !now.IsZero() && now.Sub(s.Time()) >= r.cfg.StuckAfter {
			r.failOrBlock(w, fmt.Sprintf("stuck: not rolled out after %s", r.cfg.StuckAfter), stampAt(now))
		}
		return
	}
	if now.IsZero() {
		return // no clock (a snapshot's objects): flush decides at the end
	}
	verdict, _ := a.verdict.Resolve()
	waited := now.Sub(verdict.Time()) >= podTraceWait
	pending := false // an old Pod not gone, or a new one without its own trace, to wait for
	if !waited {
		r.eachMember(a, time.Time{}, func(p *wlPod, isNew, isOld bool) bool {
			pending = isOld && !p.gone.Known() || isNew && p.trace == nil && !p.deleted.Known()
			return !pending
		})
	}
	if !pending {
		r.finish(w, rollout.OutcomeComplete, "", r.endOf(a, verdict), time.Time{}, phases.TraceID{})
	}
}

// endOf is when a rolled-out rollout ended: its verdict, or its last old Pod gone after it.
func (r *Tracker) endOf(a *activeRollout, verdict phases.Stamp) phases.Stamp {
	end := verdict
	r.eachMember(a, time.Time{}, func(p *wlPod, _, isOld bool) bool {
		if g, ok := p.gone.Resolve(); isOld && ok && g.At > end.At {
			end = g
		}
		return true
	})
	return end
}

// eachMember calls fn with each of the workload's Pods that belong to the rollout, in no order,
// and whether it is new (created from the rollout's start until the next rollout's) and old (its
// deletion requested then), until fn returns false. Whether a rolled-out rollout is done is
// asked on every change of its Pods until it is (check): a walk that stops at the first Pod to
// wait for, where putting them all in order each time made the tail of a 500-Pod rollout cost
// 0.6 ms a change (BenchmarkRolloutTail).
func (r *Tracker) eachMember(a *activeRollout, until time.Time, fn func(p *wlPod, isNew, isOld bool) bool) {
	uid := types.UID(a.obs.Workload.UID)
	visit := func(owner types.UID) bool {
		for _, p := range r.byOwner[owner] {
			isNew, isOld := within(p.created, a.from, until), within(p.deleted, a.from, until)
			if (isNew || isOld) && !fn(p, isNew, isOld) {
				return false
			}
		}
		return true
	}
	if !visit(uid) {
		return
	}
	for rs := range r.ownedRS[uid] {
		if !visit(rs) {
			return
		}
	}
}

// membersInOrder are the rollout's new and old Pods (eachMember), each list in the order its
// Pods were created (new) or their deletion requested (old), for the rollout's trace.
func (r *Tracker) membersInOrder(a *activeRollout, until time.Time) (news, olds []*wlPod) {
	r.eachMember(a, until, func(p *wlPod, isNew, isOld bool) bool {
		if isNew {
			news = append(news, p)
		}
		if isOld {
			olds = append(olds, p)
		}
		return true
	})
	byTime := func(ps []*wlPod, t func(*wlPod) phases.Times) {
		at := make(map[*wlPod]phases.Instant, len(ps)) // resolved once, not at each comparison
		for _, p := range ps {
			s, _ := t(p).Resolve()
			at[p] = s.At
		}
		slices.SortFunc(ps, func(a, b *wlPod) int {
			if c := cmp.Compare(at[a], at[b]); c != 0 {
				return c
			}
			return strings.Compare(a.name, b.name)
		})
	}
	byTime(news, func(p *wlPod) phases.Times { return p.created })
	byTime(olds, func(p *wlPod) phases.Times { return p.deleted })
	return news, olds
}

// failOrBlock ends a rollout that the controller gave up on (ProgressDeadlineExceeded) or that
// passed the stuck deadline: as failed, or, while its Pod creates are refused, as blocked, which
// names the cause. One exported as blocked already and still blocked goes on being followed:
// it is blocked still (the gauge, and the alert on it, must not clear), and it resumes once the
// controller is let through, whatever the deadlines said meanwhile.
func (r *Tracker) failOrBlock(w *workloadState, reason string, end phases.Stamp) {
	if b := w.cur.latestBlocked(); b != nil {
		if w.cur.blockedExported {
			return
		}
		r.finish(w, rollout.OutcomeBlocked, b.Words(), end, time.Time{}, phases.TraceID{})
		return
	}
	r.finish(w, rollout.OutcomeFailed, reason, end, time.Time{}, phases.TraceID{})
}

// exportBlocked exports the rollout in progress as blocked and keeps tracing it: once its
// creates are let through it goes on, and its end is exported under a second trace (attempt 1)
// that keeps the blocked time and links to this one.
func (r *Tracker) exportBlocked(w *workloadState, now time.Time) {
	a := w.cur
	a.blockedExported = true
	a.resumes, _ = a.fixTraceID() // the trace exported now, which the resumed one links to
	if r.cfg.Sink != nil {
		r.cfg.Sink.ExportRollout(rollout.Build(r.observed(w, a, rollout.OutcomeBlocked, a.latestBlocked().Words(), stampAt(now), time.Time{}, phases.TraceID{})))
	}
	a.attempt = 1
	a.traceID, a.rootSpanID = phases.TraceID{}, phases.SpanID{} // the Pods made from now on link to the next trace
}

// finish exports the rollout in progress with the outcome (none: end it without an export).
// end is when it ended (zero: the latest thing seen); until bounds its members when a newer
// rollout takes over from then.
func (r *Tracker) finish(w *workloadState, outcome rollout.Outcome, reason string, end phases.Stamp, until time.Time, supersededBy phases.TraceID) {
	a := w.cur
	w.cur = nil
	delete(r.active, w)
	if a == nil || r.cfg.Sink == nil || outcome == "" {
		return
	}
	obs := r.observed(w, a, outcome, reason, end, until, supersededBy)
	r.cfg.Sink.ExportRollout(rollout.Build(obs))
	// The new Pods' traces were kept for this rollout's Pod spans only: a later rollout meets
	// these Pods as old ones, which need their deletion, not their startup. Held on, every
	// running Pod would keep its whole trace in memory.
	for i := range obs.NewPods {
		if p := r.pods[types.UID(obs.NewPods[i].UID)]; p != nil {
			p.trace = nil
		}
	}
}

// observed is the rollout in progress as it stands, with the outcome, for Build.
func (r *Tracker) observed(w *workloadState, a *activeRollout, outcome rollout.Outcome, reason string, end phases.Stamp, until time.Time, supersededBy phases.TraceID) *rollout.Rollout {
	obs := a.obs
	obs.Outcome, obs.SupersededBy = outcome, supersededBy
	if outcome != rollout.OutcomeComplete {
		obs.Reason = reason
	}
	obs.Start = append(phases.Times(nil), a.obs.Start...)
	if e := r.auditOf(a); e != nil {
		obs.Start.Add(e.RequestReceived, phases.SourceAudit)
	}
	if !end.Time().IsZero() {
		obs.Complete.Add(end.Time(), end.Source)
	}
	news, olds := r.membersInOrder(a, until)
	for _, s := range w.steps {
		at, _ := s.Time.Resolve()
		if at.Time().Before(a.from) || !until.IsZero() && !at.Time().Before(until) {
			continue
		}
		s.Pods = nil
		obs.Steps = append(obs.Steps, s)
	}
	sort.SliceStable(obs.Steps, func(i, j int) bool {
		x, _ := obs.Steps[i].Time.Resolve()
		y, _ := obs.Steps[j].Time.Resolve()
		return x.Time().Before(y.Time())
	})
	matchSteps(obs.Steps, news, olds, obs.Workload.Kind)
	for _, p := range news {
		obs.NewPods = append(obs.NewPods, rollout.NewPod{UID: string(p.uid), Name: p.name, Node: p.node,
			Created: p.created, Ready: p.ready, Trace: p.trace})
	}
	for _, p := range olds {
		obs.OldPods = append(obs.OldPods, rollout.OldPod{UID: string(p.uid), Name: p.name, Deleted: p.deleted,
			Gone: p.gone, GracePeriod: p.grace, PreStop: p.preStop, Killed: p.killed,
			PreStopSleep: p.preStopSleep, PreStopOther: p.preStopOther, Addresses: p.addresses})
	}
	if (obs.Kind == rollout.KindUpdate || obs.Kind == rollout.KindRestart) && r.rolledBack(&obs, news) {
		obs.Kind = rollout.KindRollback
	}
	obs.Rejections = a.rejectionsOf()
	obs.Attempt = a.attempt
	if a.attempt > 0 {
		obs.Resumes = a.resumes
	}
	return &obs
}

// auditOf finds the client's write that started the rollout in the audit log, if readyspan
// reads one: its request receive time is the start, to the microsecond.
func (r *Tracker) auditOf(a *activeRollout) *watch.AuditEntry {
	if r.cfg.Audit == nil || a.obs.Kind == rollout.KindCreate && a.seenAt.IsZero() {
		return nil
	}
	res := map[string]string{rollout.Deployment: "deployments", rollout.StatefulSet: "statefulsets", rollout.DaemonSet: "daemonsets"}[a.obs.Workload.Kind]
	before := a.seenAt
	if before.IsZero() {
		s, _ := a.obs.Start.Resolve()
		before = s.Time().Add(time.Second)
	}
	e := r.cfg.Audit(res, a.obs.Workload.Namespace, a.obs.Workload.Name, before)
	if e == nil || before.Sub(e.RequestReceived) > 10*time.Second {
		return nil // an older write, not this change
	}
	return e
}

// rolledBack tells an update that went back to an earlier template: its new Pods belong to a
// ReplicaSet (or ControllerRevision) that existed before the change.
func (r *Tracker) rolledBack(obs *rollout.Rollout, news []*wlPod) bool {
	s, ok := obs.Start.Resolve()
	if !ok {
		return false
	}
	var owner string
	switch obs.Workload.Kind {
	case rollout.Deployment:
		for _, st := range obs.Steps {
			if st.Up {
				owner = st.Target
				break
			}
		}
	case rollout.StatefulSet:
		owner = obs.Revision
	}
	if owner == "" && len(news) > 0 && obs.Workload.Kind == rollout.Deployment {
		owner = news[0].ownerName
	}
	created, ok := r.rsCreated[types.NamespacedName{Namespace: obs.Workload.Namespace, Name: owner}]
	return ok && created.Before(s.Time().Add(-2*time.Second))
}

// matchSteps attributes each Pod to the step that created or removed it: the latest step of its
// owner, in its direction, at or before its creation (or its deletion's request) by the precise
// stamps (phases.AtOrBefore), with room left; never a later one, which is another wave's,
// however close (steps are two seconds apart when each waits for a readiness probe,
// milliseconds with room to surge). A Deployment's step names a ReplicaSet and a count; a StatefulSet's or DaemonSet's
// names the Pod. Steps are in time order and the Pods in the order they were created (removed).
func matchSteps(steps []rollout.Step, news, olds []*wlPod, kind string) {
	m := stepMatcher{steps: steps, room: make([]int32, len(steps)), at: make([]phases.Times, len(steps)), kind: kind}
	for i := range steps {
		m.room[i] = steps[i].Count()
		if m.room[i] < 0 {
			m.room[i] = -m.room[i]
		}
		// The step's receive time (its Event's) is left out: when readyspan heard of the step
		// says nothing of the order of the step and the Pod's own receive time.
		for _, st := range steps[i].Time {
			if st.Source != phases.SourceWatch {
				m.at[i] = append(m.at[i], st)
			}
		}
	}
	m.match(news, true)
	m.match(olds, false)
}

// stepMatcher is matchSteps' state: the steps, the Pods each has room for still, and each
// step's stamps but its receive time.
type stepMatcher struct {
	steps []rollout.Step
	room  []int32
	at    []phases.Times
	kind  string
}

// owns tells whether a step names a Pod's owner (a Deployment's: its ReplicaSet) or the Pod.
func (m *stepMatcher) owns(s *rollout.Step, p *wlPod) bool {
	if m.kind == rollout.Deployment {
		return p.ownerName == s.Target
	}
	return p.name == s.Target
}

// match attributes each Pod of pool (created, for up; removed otherwise) to a step.
func (m *stepMatcher) match(pool []*wlPod, up bool) {
	assigned := make([]int, len(pool)) // the step of each Pod, -1 for none
	for j, p := range pool {
		t := p.created
		if !up {
			t = p.deleted
		}
		assigned[j] = m.stepOf(p, t, up)
		if assigned[j] >= 0 {
			m.room[assigned[j]]--
		}
	}
	// When the controller took steps faster than it created (with room to surge it scales
	// the new ReplicaSet again as soon as it has scaled the old one down), the first Pods
	// took the latest step and the next ones the step before: the same Pods of the same
	// owner go to the same steps, in order.
	byOwner := map[string][]int{}
	for j, i := range assigned {
		if i >= 0 {
			byOwner[m.steps[i].Target] = append(byOwner[m.steps[i].Target], j)
		}
	}
	for _, js := range byOwner {
		slots := make([]int, len(js))
		for k, j := range js {
			slots[k] = assigned[j]
		}
		slices.Sort(slots)
		for k, j := range js {
			assigned[j] = slots[k]
		}
	}
	for j, i := range assigned {
		if i >= 0 {
			m.steps[i].Pods = append(m.steps[i].Pods, string(pool[j].uid))
		}
	}
}

// stepOf is the latest step of p's owner in its direction, with room left, at or before t;
// -1 for none.
func (m *stepMatcher) stepOf(p *wlPod, t phases.Times, up bool) int {
	for i := len(m.steps) - 1; i >= 0; i-- {
		s := &m.steps[i]
		if s.Up == up && m.room[i] > 0 && m.owns(s, p) && phases.AtOrBefore(m.at[i], t) {
			return i
		}
	}
	// Its stamps put it before every step with room. Where they are not of one precision (a
	// rewrite of a combined Event has only whole seconds and its receive time), a second's
	// slack, and the earliest such step.
	pt, _ := t.Resolve()
	for i := range m.steps {
		s := &m.steps[i]
		st, _ := s.Time.Earliest()
		if _, _, precise := phases.SamePrecision(m.at[i], t); precise {
			continue
		}
		if s.Up == up && m.room[i] > 0 && m.owns(s, p) && !pt.Time().Before(st.Time().Add(-time.Second)) {
			return i
		}
	}
	return -1
}

// Tick runs the deadlines and publishes the gauges.
func (r *Tracker) Tick(now time.Time) {
	if now.After(r.now) {
		r.now = now
	}
	prog := rollout.Progress{InProgress: map[string]int{}, PastDeadline: map[string]int{}, LongestWithoutStep: map[string]time.Duration{},
		Blocked: map[string]int{}}
	for w := range r.active {
		r.check(w, now)
		a := w.cur
		if a == nil {
			continue
		}
		k := a.obs.Workload.Kind
		prog.InProgress[k+"/"+string(a.obs.Kind)]++
		s, _ := a.obs.Start.Resolve()
		if dl := a.obs.Strategy.ProgressDeadlineSeconds; dl > 0 && now.Sub(s.Time()) > time.Duration(dl)*time.Second && !a.verdict.Known() {
			prog.PastDeadline[k]++
		}
		if idle := now.Sub(a.lastStep); idle > prog.LongestWithoutStep[k] {
			prog.LongestWithoutStep[k] = idle
		}
		if b := a.latestBlocked(); b != nil {
			prog.Blocked[k+"/"+string(b.Class)]++
		}
	}
	if r.cfg.Stats != nil {
		r.cfg.Stats.RolloutProgress(prog)
	}
	r.prune(now)
}

// prune forgets what no rollout can still claim, every half minute (it walks every Pod and
// step): Pods gone and steps taken more than HistoryRetention ago, unless they fall in the
// window of their workload's rollout in progress; and placeholder workloads (Events about a
// workload readyspan has not seen) left with no step.
func (r *Tracker) prune(now time.Time) {
	if now.Sub(r.lastPrune) < 30*time.Second {
		return
	}
	r.lastPrune = now
	cut := now.Add(-HistoryRetention)
	for uid, p := range r.pods {
		g, ok := p.gone.Resolve()
		if !ok || !g.Time().Before(cut) || r.claimed(p) {
			continue
		}
		delete(r.pods, uid)
		delete(r.byOwner[p.owner], uid)
		if len(r.byOwner[p.owner]) == 0 {
			delete(r.byOwner, p.owner)
		}
	}
	for uid, w := range r.workloads {
		keepFrom := cut
		if w.cur != nil && w.cur.from.Before(keepFrom) {
			keepFrom = w.cur.from
		}
		w.steps = slices.DeleteFunc(w.steps, func(s rollout.Step) bool {
			at, _ := s.Time.Resolve()
			return at.Time().Before(keepFrom)
		})
		if w.generation == 0 && w.cur == nil && len(w.steps) == 0 {
			delete(r.workloads, uid)
		}
	}
}

// claimed tells whether a Pod belongs to its workload's rollout in progress: created or
// deleted from the rollout's start on (members' test, with no end).
func (r *Tracker) claimed(p *wlPod) bool {
	w, _ := r.workloadOf(p)
	return w != nil && w.cur != nil && (within(p.created, w.cur.from, time.Time{}) || within(p.deleted, w.cur.from, time.Time{}))
}

// within tells whether a moment falls in a rollout's window: from its start on, and before
// until unless until is zero.
func within(t phases.Times, from, until time.Time) bool {
	s, ok := t.Resolve()
	return ok && !s.Time().Before(from) && (until.IsZero() || s.Time().Before(until))
}

// Flush exports every rollout in progress as it stands (explain, the end of a replay): complete
// if the controller's verdict was seen or the status says it is done, else in progress, ending
// at the latest time seen.
func (r *Tracker) Flush(now time.Time) {
	uids := make([]string, 0, len(r.workloads))
	for uid, w := range r.workloads {
		if w.cur != nil {
			uids = append(uids, string(uid))
		}
	}
	sort.Strings(uids)
	for _, uid := range uids {
		w := r.workloads[types.UID(uid)]
		if end, ok := w.cur.verdict.Resolve(); ok {
			r.finish(w, rollout.OutcomeComplete, "", r.endOf(w.cur, end), time.Time{}, phases.TraceID{})
			continue
		}
		if w.cur.statusDone {
			// Done by its status, at a time no stamp gives: the rollout ends where the last of
			// what was observed of it ends (rollout.Build derives it).
			r.finish(w, rollout.OutcomeComplete, "", phases.Stamp{}, time.Time{}, phases.TraceID{})
			continue
		}
		if b := w.cur.latestBlocked(); b != nil {
			if w.cur.blockedExported {
				r.finish(w, "", "", phases.Stamp{}, time.Time{}, phases.TraceID{}) // exported as blocked already
				continue
			}
			r.finish(w, rollout.OutcomeBlocked, b.Words(), stampAt(now), time.Time{}, phases.TraceID{})
			continue
		}
		r.finish(w, rollout.OutcomeInProgress, "", stampAt(now), time.Time{}, phases.TraceID{})
	}
}
