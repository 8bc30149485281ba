package web

import (
	"encoding/json"
	"sort"
	"sync"
	"time"
	"unsafe"

	"github.com/readyspan/readyspan/node"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
)

// Default ring sizes: enough for a day of an ordinary cluster's rollouts and the Pods of its
// recent ones, in a few tens of MiB at most (a rollout of 1,000 Pods is about 0.5 MiB of view).
const (
	DefaultMaxRollouts = 200
	DefaultMaxPods     = 2000
	DefaultMaxBytes    = 64 << 20
	// DefaultMaxNodes bounds the node startup traces. A cluster adds far fewer Nodes than it
	// starts Pods, and a node's trace is a few kB (its steps and at most 32 DaemonSet Pods), so
	// this count is rarely what bounds them: MaxBytes, shared with the other kinds, is.
	DefaultMaxNodes = 500
)

// entryOverhead approximates what an entry costs besides its view and strings: the entry
// struct, its map slot and its queue slot.
const entryOverhead = 256

// RingConfig bounds the ring. A zero field takes its default.
type RingConfig struct {
	MaxRollouts int
	MaxPods     int
	MaxNodes    int
	// MaxBytes bounds the views held (see Ring.Bytes); the oldest traces of any kind leave first
	// when it is exceeded.
	MaxBytes int64
}

// Ring holds the most recent Pod, rollout and node startup traces, the oldest leaving first: a
// Pod's or a node's trace as its list line and its spans, encoded as its waterfall when asked
// for, and a rollout's as its view's JSON. It is safe for concurrent use.
//
// A Pod's waterfall is encoded on read because nearly every Pod trace leaves the ring unread and
// encoding each one as it arrived was a twentieth of readyspan's CPU. The spans are shared with
// the other sinks, which only read them too: an exported trace is not changed. A rollout's view
// is kept encoded: it reads the rollout's Pod traces, which it would otherwise keep.
type Ring struct {
	cfg      RingConfig
	mu       sync.RWMutex
	seq      uint64
	bytes    int64
	rollouts queue
	pods     queue
	nodes    queue
}

// entry is one trace: the summary the lists filter on and what its view is served from.
type entry struct {
	id      string
	seq     uint64 // insertion order across the kinds
	start   time.Time
	rollout RolloutSummary // rollouts
	body    []byte         // rollouts: the view's JSON
	rotate  []byte         // rollouts: the rotation views' JSON, nil for none
	pod     PodSummary     // Pods
	node    NodeSummary    // nodes
	waited  []WaiterView   // nodes: the Pods that waited for it, Held not set
	spans   []phases.Span  // Pods and nodes: the trace's spans, read only
	size    int64
	dead    bool // replaced by a newer entry of the same ID; skipped when it reaches the head
}

// queue is one kind's entries in insertion order, and by ID.
type queue struct {
	max   int
	byID  map[string]*entry
	order []*entry
}

func (q *queue) head() *entry {
	for len(q.order) > 0 && q.order[0].dead {
		q.order[0] = nil
		q.order = q.order[1:]
	}
	if len(q.order) == 0 {
		return nil
	}
	return q.order[0]
}

// NewRing returns an empty ring.
func NewRing(cfg RingConfig) *Ring {
	if cfg.MaxRollouts <= 0 {
		cfg.MaxRollouts = DefaultMaxRollouts
	}
	if cfg.MaxPods <= 0 {
		cfg.MaxPods = DefaultMaxPods
	}
	if cfg.MaxNodes <= 0 {
		cfg.MaxNodes = DefaultMaxNodes
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	return &Ring{cfg: cfg,
		rollouts: queue{max: cfg.MaxRollouts, byID: map[string]*entry{}},
		pods:     queue{max: cfg.MaxPods, byID: map[string]*entry{}},
		nodes:    queue{max: cfg.MaxNodes, byID: map[string]*entry{}}}
}

// AddPod keeps a Pod's trace, replacing an earlier one of the same Pod.
func (r *Ring) AddPod(t *phases.Trace) {
	if e := podEntry(t); e != nil {
		r.add(&r.pods, e)
	}
}

// AddRollout keeps a rollout's trace, replacing an earlier one with the same trace ID (a new
// leader exports a rollout again).
func (r *Ring) AddRollout(t *rollout.Trace) {
	if e := rolloutEntry(t); e != nil {
		r.add(&r.rollouts, e)
	}
}

// AddNode keeps a node's startup trace, replacing an earlier one with the same trace ID (a new
// leader exports it again; its ID is its NodeClaim's or Node's UID).
func (r *Ring) AddNode(t *node.Trace) {
	r.add(&r.nodes, nodeEntry(t))
}

func podEntry(t *phases.Trace) *entry {
	v := podSummary(t)
	e := &entry{id: v.UID, start: t.Root().Start, pod: v, spans: t.Spans}
	e.size = spansBytes(t.Spans) + entryOverhead + int64(len(v.UID)+len(v.TraceID)+len(v.Namespace)+len(v.Name)+
		len(v.Node)+len(v.Workload)+len(v.Outcome)+len(v.Start)+len(v.Error)+len(v.Rollout))
	return e
}

// Sizes of what a Pod entry's spans hold, for spansBytes.
var (
	spanSize  = int64(unsafe.Sizeof(phases.Span{}))
	attrSize  = int64(unsafe.Sizeof(phases.Attr{}))
	eventSize = int64(unsafe.Sizeof(phases.Event{}))
	linkSize  = int64(unsafe.Sizeof(phases.Link{}))
)

// spansBytes approximates the heap a trace's spans take: the spans, their own strings, their
// attributes (boxed values included), events and links. Names, services and attribute keys
// are counted too, though most are constants, so it errs high.
func spansBytes(spans []phases.Span) int64 {
	n := int64(cap(spans)) * spanSize
	for i := range spans {
		s := &spans[i]
		n += int64(len(s.Name)+len(s.Path)+len(s.Service)+len(s.StatusMessage)) + attrsBytes(s.Attrs)
		evs, ls := s.Events(), s.Links()
		if evs != nil || ls != nil {
			n += 48 // the notes: two slice headers
		}
		for _, e := range evs {
			n += eventSize + int64(len(e.Name)) + attrsBytes(e.Attrs)
		}
		for _, l := range ls {
			n += linkSize + attrsBytes(l.Attrs)
		}
	}
	return n
}

func attrsBytes(as []phases.Attr) int64 {
	n := int64(cap(as)) * attrSize
	for _, a := range as {
		n += int64(len(a.Key))
		switch v := a.Value.(type) {
		case string:
			n += 16 + int64(len(v))
		case bool, nil:
		default:
			n += 8
		}
	}
	return n
}

func rolloutEntry(t *rollout.Trace) *entry {
	v := rolloutView(t)
	body, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	s := v.RolloutSummary
	e := &entry{id: s.ID, start: t.Root().Start, rollout: s, body: body, rotate: rotationBody(t)}
	e.size = int64(len(body)+len(e.rotate)) + entryOverhead + int64(len(s.ID)+len(s.Namespace)+len(s.Workload)+
		len(s.WorkloadKind)+len(s.Kind)+len(s.Outcome)+len(s.Reason)+len(s.Start)+len(s.Sentence))
	return e
}

func (r *Ring) add(q *queue, e *entry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	e.seq = r.seq
	if old := q.byID[e.id]; old != nil {
		old.dead = true
		r.bytes -= old.size
	}
	q.byID[e.id] = e
	q.order = append(q.order, e)
	r.bytes += e.size
	if len(q.order) > 2*q.max+16 {
		q.compact()
	}
	for len(q.byID) > q.max {
		r.evict(q)
	}
	for r.bytes > r.cfg.MaxBytes {
		// The oldest head of the kinds leaves; the newest trace always stays.
		var oldest *queue
		var seq uint64
		for _, k := range [...]*queue{&r.rollouts, &r.pods, &r.nodes} {
			if h := k.head(); h != nil && h != e && (oldest == nil || h.seq < seq) {
				oldest, seq = k, h.seq
			}
		}
		if oldest == nil {
			return
		}
		r.evict(oldest)
	}
}

func (r *Ring) evict(q *queue) {
	h := q.head()
	if h == nil {
		return
	}
	q.order[0] = nil
	q.order = q.order[1:]
	delete(q.byID, h.id)
	r.bytes -= h.size
}

// compact drops the replaced entries, so re-adding one ID again and again stays bounded.
func (q *queue) compact() {
	live := make([]*entry, 0, len(q.byID))
	for _, e := range q.order {
		if !e.dead {
			live = append(live, e)
		}
	}
	q.order = live
}

// Bytes is what the ring holds: the Pods' and nodes' spans (spansBytes), the rollouts' views'
// JSON, the summaries' strings and a fixed cost per trace. MaxBytes bounds it.
func (r *Ring) Bytes() int64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.bytes
}

// Len is how many rollout and Pod traces the ring holds.
func (r *Ring) Len() (rollouts, pods int) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.rollouts.byID), len(r.pods.byID)
}

// Filter narrows the lists: an empty field matches everything.
type Filter struct {
	Namespace string
	Workload  string
}

func (f Filter) match(namespace, workload string) bool {
	return (f.Namespace == "" || f.Namespace == namespace) && (f.Workload == "" || f.Workload == workload)
}

// Rollouts lists the rollouts held, newest first.
func (r *Ring) Rollouts(f Filter) []RolloutSummary {
	return summaries(r, &r.rollouts, func(e *entry) bool { return f.match(e.rollout.Namespace, e.rollout.Workload) },
		func(e *entry) RolloutSummary { return e.rollout })
}

// Pods lists the Pod traces held, newest first.
func (r *Ring) Pods(f Filter) []PodSummary {
	return summaries(r, &r.pods, func(e *entry) bool { return f.match(e.pod.Namespace, e.pod.Workload) },
		func(e *entry) PodSummary { return e.pod })
}

// summaries is the summary of each entry of q that keep keeps, newest first.
func summaries[T any](r *Ring, q *queue, keep func(*entry) bool, summary func(*entry) T) []T {
	r.mu.RLock()
	es := live(q.byID, keep)
	r.mu.RUnlock()
	out := make([]T, len(es))
	for i, e := range es {
		out[i] = summary(e)
	}
	return out
}

// live is the entries that match, newest start first (ties: the later added first).
func live(byID map[string]*entry, keep func(*entry) bool) []*entry {
	var es []*entry
	for _, e := range byID {
		if keep(e) {
			es = append(es, e)
		}
	}
	sort.Slice(es, func(i, j int) bool {
		if !es[i].start.Equal(es[j].start) {
			return es[i].start.After(es[j].start)
		}
		return es[i].seq > es[j].seq
	})
	return es
}

// Rollout is a rollout's view as JSON, or nil.
func (r *Ring) Rollout(id string) []byte {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if e := r.rollouts.byID[id]; e != nil {
		return e.body
	}
	return nil
}

// Rotation is a rollout's rotation views as JSON (RotationView), by its root span ID: [] for a
// rollout without any, nil for a rollout not held.
func (r *Ring) Rotation(id string) []byte {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e := r.rollouts.byID[id]
	switch {
	case e == nil:
		return nil
	case e.rotate == nil:
		return []byte("[]")
	}
	return e.rotate
}

// Pod is a Pod's view as JSON, by its UID, or nil.
func (r *Ring) Pod(uid string) []byte {
	r.mu.RLock()
	e := r.pods.byID[uid]
	r.mu.RUnlock()
	if e == nil {
		return nil
	}
	// An entry is not changed once added: it is read without the lock.
	v := &PodView{PodSummary: e.pod, Spans: spanRows(e.spans)}
	r.mu.RLock()
	markNodesHeld(v.Spans, func(id string) bool { return r.nodes.byID[id] != nil })
	r.mu.RUnlock()
	body, err := json.Marshal(v)
	if err != nil {
		return nil // a view holds strings, numbers and booleans only
	}
	return body
}

// Nodes lists the node startup traces held, newest first. Nodes belong to no namespace or
// workload: no filter narrows them.
func (r *Ring) Nodes() []NodeSummary {
	return summaries(r, &r.nodes, func(*entry) bool { return true }, func(e *entry) NodeSummary { return e.node })
}

// Node is a node's startup view as JSON, by its trace ID, or nil. Whether each Pod that waited
// for it is held is read now: the page links only to the Pods it can open.
func (r *Ring) Node(id string) []byte {
	r.mu.RLock()
	e := r.nodes.byID[id]
	var waited []WaiterView
	if e != nil {
		waited = markPodsHeld(e.waited, func(uid string) bool { return r.pods.byID[uid] != nil })
	}
	r.mu.RUnlock()
	if e == nil {
		return nil
	}
	body, err := json.Marshal(&NodeView{NodeSummary: e.node, Spans: nodeSpanRows(e.spans), Waited: waited})
	if err != nil {
		return nil
	}
	return body
}
