package tracer

import (
	"container/heap"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/readyspan/readyspan/events"
	"github.com/readyspan/readyspan/objects"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/rollout/tracker"
	"github.com/readyspan/readyspan/tracecontext"
	"github.com/readyspan/readyspan/tracer/pod"
	"github.com/readyspan/readyspan/watch"
)

// Defaults for Config.
const (
	DefaultStuckAfter    = 10 * time.Minute
	DefaultFailAfter     = 2 * time.Minute
	DefaultEndpointsWait = 30 * time.Second
	DefaultMaxInFlight   = 50000
	maxPendingEvents     = 10000
)

// Config tunes when traces are complete and how much state is kept.
type Config struct {
	// StuckAfter: a Pod not Ready this long after creation is exported as stuck.
	StuckAfter time.Duration
	// FailAfter: a persistent failure (ErrImagePull, CrashLoopBackOff…) shown this long is
	// exported as failed.
	FailAfter time.Duration
	// EndpointsWait: how long after Ready to wait for the Pod's address to turn ready in an
	// EndpointSlice when a Service selects it.
	EndpointsWait time.Duration
	// MaxInFlight caps the Pods tracked at once; more are dropped and counted.
	MaxInFlight int
	// Backfill traces Pods that were already Ready when readyspan first saw them.
	Backfill bool
	// ResumeAfter and ResumeSkip pick up where a previous readyspan stopped: a Pod first seen
	// already Ready is traced if its Ready transition is not older than ResumeAfter (less a
	// second, the condition's precision) and its UID is not in ResumeSkip (the Pods the
	// previous run exported last).
	ResumeAfter time.Time
	ResumeSkip  map[string]bool
	// Settle is how long a complete trace waits for late events (the kubelet sends events
	// asynchronously; they can arrive after the status that completes the trace). Zero
	// exports at once, as replay and explain do.
	Settle time.Duration
	// Nodes takes the startup trace of each Node added while readyspan runs (nil: none is
	// traced).
	Nodes NodeSink
	// TraceNode is a Node whose startup is traced even when first seen in a list, from what
	// the API holds of it (explain node/NAME).
	TraceNode string
	// Rollouts, RolloutStuckAfter and RolloutBlockedAfter are the rollout tracker's Sink,
	// StuckAfter and BlockedAfter (tracker.Config).
	Rollouts            tracker.Sink
	RolloutStuckAfter   time.Duration
	RolloutBlockedAfter time.Duration
	// IgnoreTraceContext leaves the tracing.k8s.io/traceparent annotations of workloads and
	// Pods unread (--trace-context=off): no trace is joined to the context a user wrote.
	IgnoreTraceContext bool
}

func (c *Config) defaults() {
	if c.StuckAfter <= 0 {
		c.StuckAfter = DefaultStuckAfter
	}
	if c.FailAfter <= 0 {
		c.FailAfter = DefaultFailAfter
	}
	if c.EndpointsWait <= 0 {
		c.EndpointsWait = DefaultEndpointsWait
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
}

// Sink receives each finished trace. It must not block: exporters queue.
type Sink interface {
	Export(*phases.Trace)
}

// SinkFunc adapts a function to Sink.
type SinkFunc func(*phases.Trace)

// Export calls f.
func (f SinkFunc) Export(t *phases.Trace) { f(t) }

// Stats receives the correlator's self-observations (for readyspan's own metrics). One that
// is also a tracker.Stats or a rollout.RejectedCreates gets the rollout tracker's too.
type Stats interface {
	Delta(resource string)
	Dropped(reason string)
	InPhase(counts map[string]int)
	// Unparsed counts an Event whose message readyspan reads but whose format it does not
	// know; reason is the Event's reason (Pulled, Failed…).
	Unparsed(reason string)
}

type noStats struct{}

func (noStats) Delta(string)           {}
func (noStats) Dropped(string)         {}
func (noStats) InPhase(map[string]int) {}
func (noStats) Unparsed(string)        {}

// Correlator turns a stream of Deltas into one trace per Pod. It is not safe for concurrent
// use: one goroutine feeds it (the live watch loop, or replay), which keeps it deterministic.
type Correlator struct {
	cfg   Config
	sink  Sink
	stats Stats
	log   *slog.Logger

	pods map[types.UID]*tracked
	// ready are the Pods of pods whose last version is Ready: those a change of the Services
	// may finish (Tick), without a walk of every Pod's conditions.
	ready       map[types.UID]*tracked
	done        map[types.UID]struct{} // exported or ignored; forgotten when the Pod is deleted
	replicaSets map[types.UID]*replicaSet
	services    map[string]map[string]labels.Selector // namespace → Service name → its selector
	// servicesChanged counts changes to services, so an answer of hasService knows it is stale.
	servicesChanged uint64
	// endpointReady holds, per Pod UID, when its address first turned ready in a slice;
	// inSlice says whether any slice lists it at all.
	endpointReady map[types.UID]phases.Times
	inSlice       map[types.UID]bool
	// pendingEvents are events about Pods not seen yet (events can arrive first).
	pendingEvents map[types.UID][]*events.Event
	pendingCount  int
	pendingScale  []*events.Event
	// createdBy holds SuccessfulCreate events by the Pod's name: the controller's nanosecond
	// stamp of the create it just made.
	createdBy  map[objectName]*events.Event
	byName     map[objectName]types.UID       // tracked Pods by name
	audit      map[string][]*watch.AuditEntry // "resource/namespace/name" → recent client writes
	seenEvents map[types.UID]string           // Event UID → resourceVersion, to drop the other API's view
	// unknownShapes holds the (reason, shape) of unknown message formats already logged.
	unknownShapes map[string]bool
	now           time.Time // the latest time seen, for replay without a clock
	rollouts      *tracker.Tracker
	// due holds the in-flight Pods that the clock alone can finish, soonest first.
	due dueHeap
	// servicesDirty says a Service changed since the last tick: a Ready Pod may now wait for
	// endpoints, or no longer.
	servicesDirty bool
	// inPhase counts the in-flight Pods by current phase, kept as Pods change.
	inPhase   map[string]int
	lastPrune time.Time
	// kindState holds what the view of a kind in the registry keeps, by resource (stateOf).
	kindState map[watch.Resource]any
	// owners holds what the controllers of Pods (of every kind) show of their Pods' causes:
	// changes, Pods that went, Ready times (controllers.go).
	owners map[types.UID]*owner
	// nodeStartups are the Nodes whose startup is traced, by name (nodestartups.go).
	nodeStartups map[string]*nodeSeen
	// disruptions are the Pods a node autoscaler evicted, by UID (disruptions.go).
	disruptions map[types.UID]disruption
	// contextIgnored counts the traceparent annotations refused, when stats does.
	contextIgnored tracecontext.Counter
}

// New returns a Correlator exporting to sink.
func New(cfg Config, sink Sink, stats Stats, log *slog.Logger) *Correlator {
	cfg.defaults()
	if stats == nil {
		stats = noStats{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Correlator{
		cfg: cfg, sink: sink, stats: stats, log: log,
		pods:          map[types.UID]*tracked{},
		ready:         map[types.UID]*tracked{},
		done:          map[types.UID]struct{}{},
		replicaSets:   map[types.UID]*replicaSet{},
		services:      map[string]map[string]labels.Selector{},
		endpointReady: map[types.UID]phases.Times{},
		inSlice:       map[types.UID]bool{},
		pendingEvents: map[types.UID][]*events.Event{},
		seenEvents:    map[types.UID]string{},
		createdBy:     map[objectName]*events.Event{},
		byName:        map[objectName]types.UID{},
		audit:         map[string][]*watch.AuditEntry{},
		unknownShapes: map[string]bool{},
		inPhase:       map[string]int{},
		owners:        map[types.UID]*owner{},
	}
	progress, _ := stats.(tracker.Stats)
	rejected, _ := stats.(rollout.RejectedCreates)
	c.contextIgnored, _ = stats.(tracecontext.Counter)
	c.rollouts = tracker.New(tracker.Config{Backfill: cfg.Backfill, StuckAfter: cfg.RolloutStuckAfter,
		BlockedAfter: cfg.RolloutBlockedAfter, Sink: cfg.Rollouts, Stats: progress, Rejected: rejected,
		Audit: c.auditFor, Steps: stepOf, IgnoreTraceContext: cfg.IgnoreTraceContext, ContextIgnored: c.contextIgnored})
	return c
}

// resumes reports whether a Pod already Ready at first sight became Ready after the previous
// readyspan stopped, so its trace is still owed.
func (c *Correlator) resumes(p *corev1.Pod) bool {
	if c.cfg.ResumeAfter.IsZero() || c.cfg.ResumeSkip[string(p.UID)] {
		return false
	}
	cond := objects.Condition(p, corev1.PodReady)
	return cond != nil && !cond.LastTransitionTime.Time.Before(c.cfg.ResumeAfter.Add(-time.Second))
}

// Drain exports every Pod that is Ready now, without waiting for the settle time or its
// endpoints: readyspan is stopping, and a later run will not trace what is Ready already.
func (c *Correlator) Drain() {
	for _, ps := range c.sortedPods() {
		if objects.IsReady(ps.Pod()) {
			c.finish(ps, phases.OutcomeReady, "", time.Time{})
		}
	}
}

// objectName is an object's namespace and name, a key of the maps that find Pods (and
// ReplicaSets) by name: two strings rather than one joined, so that looking one up or recording
// one again builds no string.
type objectName struct{ namespace, name string }

// InFlight returns how many Pods are being traced.
func (c *Correlator) InFlight() int { return len(c.pods) }

// Handle folds one change into the state and exports the traces it completes.
func (c *Correlator) Handle(d watch.Delta) {
	c.stats.Delta(string(d.Resource))
	if d.Recv.After(c.now) {
		c.now = d.Recv
	}
	if d.Audit != nil {
		c.handleAudit(d.Audit)
		return
	}
	// What each kind's objects do is its registry entry's (kinds.go): the rollout tracker and
	// the Pod correlator are two consumers of the delta, side by side.
	k, ok := kindOfObject(d.Object)
	if !ok || k.handle == nil && k.rollout == nil {
		c.stats.Dropped("unknown_object")
		c.log.Warn("Ignoring object of unknown type", "type", fmt.Sprintf("%T", d.Object))
		return
	}
	if d.FinalStateUnknown {
		d.Object = c.lastState(d.Object)
	}
	if k.rollout != nil {
		k.rollout(c.rollouts, d)
	}
	if k.handle != nil {
		k.handle(c, d)
	}
}

// lastState is what a deletion found by a relist (the watch missed it) stands for: the
// object's last state seen, which only a Pod's correlator keeps; the relist's copy holds only
// its identity.
func (c *Correlator) lastState(o runtime.Object) runtime.Object {
	if p, ok := o.(*corev1.Pod); ok {
		if ps := c.pods[p.UID]; ps != nil {
			return ps.Pod()
		}
	}
	return o
}

func (c *Correlator) handlePod(d *watch.Delta, p *corev1.Pod) {
	c.notePod(d, p)
	if len(c.nodeStartups) > 0 && p.Spec.NodeName != "" {
		c.noteNodePod(d, p)
	}
	if _, done := c.done[p.UID]; done {
		if d.Type == watch.Deleted {
			delete(c.done, p.UID)
		}
		return
	}
	ps := c.pods[p.UID]
	var prevContext string // the Pod's traceparent before this version, to count a refused one once
	if ps != nil {
		prevContext = ps.Pod().Annotations[tracecontext.Annotation]
	}
	if ps == nil {
		if d.Type == watch.Deleted {
			return
		}
		if objects.IsReady(p) && !c.cfg.Backfill && !c.resumes(p) {
			// Ready before readyspan saw it start: another readyspan (or an earlier run) saw
			// its startup, or nobody did; either way it is not ours to invent.
			c.done[p.UID] = struct{}{}
			return
		}
		if p.DeletionTimestamp != nil {
			c.done[p.UID] = struct{}{}
			return
		}
		if len(c.pods) >= c.cfg.MaxInFlight {
			c.stats.Dropped("in_flight_cap")
			c.done[p.UID] = struct{}{}
			return
		}
		ps = c.startPod(d, p)
	}
	ps.Apply(d, p)
	c.noteTraceContext(ps, prevContext, p)
	if objects.IsReady(p) {
		c.ready[p.UID] = ps
	} else {
		delete(c.ready, p.UID)
	}
	c.countPhase(ps)
	if d.Type == watch.Deleted || p.DeletionTimestamp != nil {
		ps.gone = ps.gone || d.Type == watch.Deleted
		if !objects.IsReady(p) {
			if ps.AwaitsPreempted() && !d.Recv.IsZero() {
				c.check(ps, d.Recv) // the scheduler's event naming the preemptor follows the delete
				return
			}
			c.finish(ps, phases.OutcomeDeleted, "", ps.DeletedAt())
			return
		}
	}
	c.check(ps, d.Recv)
}

// startPod begins tracking a Pod first seen: its state, its name, the controller's creation
// event and the events that came before it.
func (c *Correlator) startPod(d *watch.Delta, p *corev1.Pod) *tracked {
	ps := &tracked{State: pod.New(d, p), dueIndex: -1}
	c.pods[p.UID] = ps
	key := objectName{p.Namespace, p.Name}
	c.byName[key] = p.UID
	if e := c.createdBy[key]; e != nil {
		ps.CreatedBy(e)
		delete(c.createdBy, key)
	}
	for _, e := range c.pendingEvents[p.UID] {
		ps.AddEvent(e, e.Recv.Time())
	}
	c.pendingCount -= len(c.pendingEvents[p.UID])
	delete(c.pendingEvents, p.UID)
	return ps
}

// eventVersion records the version of an Event and says whether it is one to fold in: not
// the same version seen through the other Events API, nor an older one, nor the Event's
// expiry (what it said is already folded in). seen is whether an earlier version was.
func (c *Correlator) eventVersion(d *watch.Delta, uid types.UID, version string) (seen, fresh bool) {
	rv, seen := c.seenEvents[uid]
	if d.Type == watch.Deleted {
		delete(c.seenEvents, uid)
		return seen, false
	}
	if seen && !events.VersionLess(rv, version) && version != "" {
		return seen, false
	}
	c.seenEvents[uid] = version
	if len(c.seenEvents) > 4*maxPendingEvents+len(c.pods)*32 {
		c.seenEvents = map[types.UID]string{} // bounded; a reset only risks counting a view twice
	}
	return seen, true
}

// handleEvent folds in a version of an Event eventVersion found fresh; seen says an earlier
// version was folded in already (so an unknown message is counted once).
func (c *Correlator) handleEvent(d *watch.Delta, e *events.Event, seen bool) {
	if e.Regarding.Kind != "Pod" {
		// An Event about another kind is its registry entry's to read (kinds.go).
		k := kindNamed(e.Regarding.APIVersion, e.Regarding.Kind)
		if k == nil {
			return
		}
		known := true
		if k.rolloutEvents != nil {
			known = k.rolloutEvents(c.rollouts, e)
		}
		if k.events != nil {
			known = k.events(c, e) && known
		}
		if !known && !seen {
			c.unparsed(e)
		}
		return
	}
	if e.Reason == "Preempted" {
		c.preempted(e) // the preemptor's trace links to the victim, whatever the victim's state
	}
	if dis, ok := events.ParseDisruption(e.Reason, e.Message); ok {
		c.noteDisruption(e, dis) // for the Pod that replaces it, whatever the victim's state
	}
	uid := e.Regarding.UID
	if _, done := c.done[uid]; done {
		return
	}
	if ps := c.pods[uid]; ps != nil {
		ps.AddEvent(e, d.Recv)
		c.check(ps, d.Recv)
		return
	}
	if c.pendingCount >= maxPendingEvents {
		c.stats.Dropped("pending_events_cap")
		return
	}
	c.pendingEvents[uid] = append(c.pendingEvents[uid], e)
	c.pendingCount++
}

// maxUnknownShapes bounds the unknown message formats remembered for logging.
const maxUnknownShapes = 256

// unparsed counts an event whose message is in a format readyspan does not know, and logs the
// first of each (reason, shape) so a new kubelet or controller wording shows up once in the log.
func (c *Correlator) unparsed(e *events.Event) {
	c.stats.Unparsed(e.Reason)
	key := e.Reason + "\x00" + events.MessageShape(e.Message)
	if c.unknownShapes[key] || len(c.unknownShapes) > maxUnknownShapes {
		return
	}
	c.unknownShapes[key] = true
	if len(c.unknownShapes) > maxUnknownShapes {
		c.log.Warn("Too many unknown event message formats; not logging more of them", "formats", maxUnknownShapes)
		return
	}
	c.log.Warn("Event message in an unknown format: counted in readyspan_unparsed_messages_total, nothing read from it",
		"reason", e.Reason, "message", e.Message)
}

func (c *Correlator) retryPendingScale() {
	if len(c.pendingScale) == 0 {
		return
	}
	pending := c.pendingScale
	c.pendingScale = nil
	for _, e := range pending {
		c.handleDeploymentEvent(e)
	}
}

// hasService reports whether a Service selects the Pod, so its address in an EndpointSlice is
// part of it serving. The answer is kept until the Pod or a Service changes: it is asked on
// every deadline tick while a Ready Pod settles, and a cluster has thousands of Services.
func (c *Correlator) hasService(ps *tracked) bool {
	if c.inSlice[ps.Pod().UID] {
		return true
	}
	if ps.service.pod == ps.Pod() && ps.service.services == c.servicesChanged {
		return ps.service.selected
	}
	set := labels.Set(ps.Pod().Labels)
	selected := false
	for _, sel := range c.services[ps.Pod().Namespace] {
		if sel.Matches(set) {
			selected = true
			break
		}
	}
	ps.service = serviceAnswer{pod: ps.Pod(), services: c.servicesChanged, selected: selected}
	return selected
}

// serviceAnswer is hasService's last answer for a Pod, and what it was given; none while pod is
// nil (a tracked Pod always has its Pod).
type serviceAnswer struct {
	pod      *corev1.Pod // the version of the Pod asked about
	services uint64      // Correlator.servicesChanged then
	selected bool
}

// check exports the Pod's trace if it is complete, and otherwise files it under the next
// moment the clock alone could finish it.
func (c *Correlator) check(ps *tracked, now time.Time) {
	c.checkNow(ps, now)
	c.schedule(ps)
}

// checkNow exports the Pod's trace if it is complete at now. dueTime follows its branches.
func (c *Correlator) checkNow(ps *tracked, now time.Time) {
	p := ps.Pod()
	if !ps.DeletedAt().IsZero() && !objects.IsReady(p) {
		// Deleted before Ready, held for the Preempted event: finished once it is in, or
		// after preemptedWait without it.
		if !ps.AwaitsPreempted() || now.IsZero() || now.Sub(ps.DeletedAt()) >= preemptedWait {
			c.finish(ps, phases.OutcomeDeleted, "", ps.DeletedAt())
		}
		return
	}
	if objects.IsReady(p) {
		_, served := c.endpointReady[p.UID]
		if served || !c.hasService(ps) {
			if c.cfg.Settle > 0 && !now.IsZero() {
				if ps.completeAt.IsZero() {
					ps.completeAt = now
				}
				if now.Sub(ps.completeAt) < c.cfg.Settle {
					return
				}
			}
			c.finish(ps, phases.OutcomeReady, "", time.Time{})
			return
		}
		if !now.IsZero() && !ps.ReadyAt().IsZero() && now.Sub(ps.ReadyAt()) >= c.cfg.EndpointsWait {
			c.inSlice[p.UID] = false
			c.log.Info("Pod Ready but its address never turned ready in an EndpointSlice", "pod", p.Namespace+"/"+p.Name, "waited", c.cfg.EndpointsWait)
			c.finishNoEndpoints(ps)
		}
		return
	}
	if p.Status.Phase == corev1.PodFailed {
		reason := p.Status.Reason
		if reason == "" {
			reason = "pod failed"
		}
		c.finish(ps, phases.OutcomeFailed, reason, now)
		return
	}
	if p.Status.Phase == corev1.PodSucceeded {
		// Ran to completion without being seen Ready (a Job's Pod that exits at once): its
		// trace ends at Succeeded, as seen, else as its containers state it.
		end := now
		if end.IsZero() {
			end = lastFinished(p)
		}
		c.finish(ps, phases.OutcomeCompleted, "", end)
		return
	}
	if now.IsZero() {
		return
	}
	if reason, since := ps.Failure(); reason != "" && !since.IsZero() && now.Sub(since) >= c.cfg.FailAfter {
		c.finish(ps, phases.OutcomeFailed, reason, now)
		return
	}
	created, _ := ps.Created().Earliest()
	if !created.Time().IsZero() && now.Sub(created.Time()) >= c.cfg.StuckAfter {
		c.finish(ps, phases.OutcomeStuck, ps.StuckReason(), now)
	}
}

// finishNoEndpoints exports a Ready Pod whose endpoints never turned ready: the trace ends at
// Ready and says the endpoints were not seen.
func (c *Correlator) finishNoEndpoints(ps *tracked) {
	obs := c.observe(ps)
	obs.HasService = false
	c.export(ps, obs, phases.OutcomeReady)
}

// Tick runs the deadlines (stuck, failed, endpoints wait) at now and publishes in-flight gauges.
func (c *Correlator) Tick(now time.Time) {
	if now.After(c.now) {
		c.now = now
	}
	if c.servicesDirty {
		c.servicesDirty = false
		for _, ps := range c.ready {
			c.check(ps, now)
		}
	}
	c.runDue(now)
	c.stats.InPhase(c.inPhase)
	c.prune(now)
	c.rollouts.Tick(now)
	c.tickNodeStartups(now)
}

// orphanAfter is how long events about a Pod readyspan never sees (another namespace's, one the
// selector excludes, one deleted before its watch event arrived) are kept.
const orphanAfter = 2 * time.Minute

// pruneEvery spaces the walks of prune: its maps hold up to an hour of audit entries and two
// minutes of orphaned events, whose limits need no finer grain than this.
const pruneEvery = time.Second

// prune forgets what belongs to no tracked Pod: orphaned events and endpoint records.
func (c *Correlator) prune(now time.Time) {
	if now.Sub(c.lastPrune) < pruneEvery {
		return
	}
	c.lastPrune = now
	for uid, evs := range c.pendingEvents {
		if evs[0].Orphaned(now, orphanAfter) {
			c.pendingCount -= len(evs)
			delete(c.pendingEvents, uid)
		}
	}
	if len(c.endpointReady)+len(c.inSlice) > 2*len(c.pods)+1000 {
		for uid := range c.inSlice {
			if _, ok := c.pods[uid]; !ok {
				delete(c.inSlice, uid)
				delete(c.endpointReady, uid)
			}
		}
		for uid := range c.endpointReady {
			if _, ok := c.pods[uid]; !ok {
				delete(c.endpointReady, uid)
			}
		}
	}
	for key, list := range c.audit {
		if last := list[len(list)-1]; now.Sub(last.StageTimestamp) > time.Hour {
			delete(c.audit, key)
		}
	}
	for key, e := range c.createdBy {
		if e.Orphaned(now, orphanAfter) {
			delete(c.createdBy, key)
		}
	}
	c.pruneDisruptions(now)
}

// Flush exports every in-flight Pod as it stands, with the given outcome (for explain, and the
// end of a replay), ending at the latest time seen.
func (c *Correlator) Flush(outcome phases.Outcome) {
	for _, ps := range c.sortedPods() {
		reason, _ := ps.Failure()
		c.finish(ps, outcome, reason, c.now)
	}
	c.rollouts.Flush(c.now)
	c.flushNodeStartups()
}

func (c *Correlator) sortedPods() []*tracked {
	out := make([]*tracked, 0, len(c.pods))
	for _, ps := range c.pods {
		out = append(out, ps)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Pod(), out[j].Pod()
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return out
}

// currentPhase names the phase an in-flight Pod is in, for the pods_in_phase gauge.
func currentPhase(p *corev1.Pod) string {
	switch {
	case p.Spec.NodeName == "":
		return phases.PhaseScheduling
	case !objects.ConditionTrue(p, corev1.ContainersReady):
		return phases.PhaseKubelet
	}
	return phases.PhaseStatus
}

// countPhase moves the Pod to its current phase in the in-flight counts.
func (c *Correlator) countPhase(ps *tracked) {
	ph := currentPhase(ps.Pod())
	if ph == ps.phase {
		return
	}
	if ps.phase != "" {
		c.inPhase[ps.phase]--
	}
	c.inPhase[ph]++
	ps.phase = ph
}

func (c *Correlator) finish(ps *tracked, outcome phases.Outcome, reason string, end time.Time) {
	obs := c.observe(ps)
	obs.FailureReason = reason
	if outcome != phases.OutcomeReady {
		obs.End = end
		if outcome == phases.OutcomeStuck || outcome == phases.OutcomeInProgress {
			obs.StuckPhase = currentPhase(ps.Pod())
		}
	}
	c.export(ps, obs, outcome)
}

func (c *Correlator) export(ps *tracked, obs *phases.Pod, outcome phases.Outcome) {
	obs.Outcome = outcome
	uid := ps.Pod().UID
	delete(c.pods, uid)
	delete(c.ready, uid)
	ps.exported = true
	if ps.dueIndex >= 0 {
		heap.Remove(&c.due, ps.dueIndex)
	}
	if ps.phase != "" {
		c.inPhase[ps.phase]--
		ps.phase = ""
	}
	delete(c.byName, objectName{ps.Pod().Namespace, ps.Pod().Name})
	delete(c.endpointReady, uid)
	delete(c.inSlice, uid)
	if !ps.gone { // the Pod's deletion, still to come, forgets it
		c.done[uid] = struct{}{}
	}
	tr := phases.Build(obs, phases.Options{Stateful: stateful(ps.Pod())})
	c.warnInconsistent(tr)
	c.rollouts.PodTrace(tr)
	c.sink.Export(tr)
}

// warnInconsistent logs a trace whose timestamps are out of order (phases.AttrInconsistent): once
// per cause, with the Pod. Such a trace is left out of the histograms, so on a healthy cluster
// each one is a bug in readyspan or a clock to look at, not a state to keep quiet about (the
// metrics count them by cause: readyspan_traces_inconsistent_total).
func (c *Correlator) warnInconsistent(tr *phases.Trace) {
	s := &tr.Summary
	for i, cause := range s.InconsistencyCauses {
		if slices.Contains(s.InconsistencyCauses[:i], cause) {
			continue
		}
		var why []string
		for j := i; j < len(s.InconsistencyCauses); j++ {
			if s.InconsistencyCauses[j] == cause {
				why = append(why, s.Inconsistencies[j])
			}
		}
		c.log.Warn("Trace timestamps out of order: marked "+phases.AttrInconsistent+" and left out of the histograms",
			"pod", tr.Pod.Namespace+"/"+tr.Pod.Name, "traceID", tr.TraceID.String(), "cause", cause, "detail", strings.Join(why, "; "))
	}
}

// stateful is the kubelet's definition, from its pod startup latency tracker (Kubernetes
// v1.37), which leaves such Pods out of kubelet_pod_start_sli_duration_seconds: a Pod with any
// volume other than secret, configMap, downwardAPI, emptyDir or projected.
func stateful(p *corev1.Pod) bool {
	for i := range p.Spec.Volumes {
		if v := &p.Spec.Volumes[i].VolumeSource; v.Secret == nil && v.ConfigMap == nil && v.DownwardAPI == nil && v.EmptyDir == nil && v.Projected == nil {
			return true
		}
	}
	return false
}
