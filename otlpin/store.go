package otlpin

import (
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/readyspan/readyspan/dataplane"
	"github.com/readyspan/readyspan/phases"
)

// Defaults of what is held.
const (
	// DefaultHold is how long a span that concerns a Pod or workload is held for a Pod's trace
	// to take it: longer than the slowest startup readyspan follows (--fail-after, 2 min by
	// default) plus its settle and wait.
	DefaultHold = 10 * time.Minute
	// DefaultMaxBytes bounds what is held, by the estimate the store keeps of its heap.
	DefaultMaxBytes = 64 << 20
	// undecidedFor is how long the spans of a trace whose root has not arrived, and none of
	// which says what it concerns, are held; and how long a trace decided unrelated is
	// remembered, so that its late spans are dropped at once: the components export in batches
	// of a few seconds (5 s by default for each of them), and a trace's root ends, so is
	// exported, last.
	undecidedFor = 30 * time.Second
	// maxKeysPerTrace is how many Pods one component trace may name: an apiserver request or a
	// kubelet syncPod concerns one; a trace that names more is not one readyspan can place.
	maxKeysPerTrace = 4
	// maxSpansPerTrace is how many spans of one component trace are held: a syncPod with its
	// CRI calls and containerd's spans, or an apiserver request, has tens; later ones are
	// dropped as crowded.
	maxSpansPerTrace = 1024
	// maxTracesPerKey is how many held traces one Pod may have (the kubelet syncs a Pod on
	// every change and once a minute): past it the oldest go, so no index list grows long.
	maxTracesPerKey = 256
)

// Reasons a span is dropped, as the readyspan_otlp_dropped_spans_total reason label.
const (
	ReasonUnrelated  = "unrelated"  // concerns no Pod or workload (at once)
	ReasonComponent  = "component"  // from a service readyspan does not join (at once)
	ReasonRead       = "read"       // a read request (GET, LIST, WATCH): never joined (at once)
	ReasonMalformed  = "malformed"  // no valid trace or span ID (at once)
	ReasonForbidden  = "forbidden"  // its sender may not write this component's spans, or for a Pod on another node
	ReasonAmbiguous  = "ambiguous"  // its trace names more Pods than one request or syncPod can
	ReasonUnresolved = "unresolved" // its trace's root never arrived to say what it concerns
	ReasonExpired    = "expired"    // held for --otlp-receive-hold, and no Pod's trace took it
	ReasonBytes      = "bytes"      // evicted, oldest first, to keep within the byte bound
	ReasonCrowded    = "crowded"    // past maxSpansPerTrace spans in a trace, or the oldest of more than maxTracesPerKey traces of one Pod
)

// componentLabels are the component label's values: the three components joined, readyspan's
// node component, and other.
var componentLabels = []string{phases.ServiceAPIServer, phases.ServiceKubelet, phases.ServiceContainerd, dataplane.Component, labelOther}

const labelOther = "other"

// component is the component a resource's service.name stands for, labelOther for any other.
func component(service string) string {
	switch service {
	case "apiserver", "kube-apiserver":
		return phases.ServiceAPIServer
	case "kubelet":
		return phases.ServiceKubelet
	case "containerd":
		return phases.ServiceContainerd
	case dataplane.Component:
		return dataplane.Component
	}
	return labelOther
}

// Store holds the components' spans that concern a Pod or workload, by trace, until a Pod's
// trace takes them or they expire. It is safe for concurrent use. Everything it keeps (spans,
// the strings they share, the indexes, the traces it remembers as unrelated) is charged to
// one byte count, bounded by maxBytes: the oldest goes first, what never concerned a Pod
// before what does. Every operation takes its lock for work linear in what it is given, and a
// request's spans are filed a chunk at a time, so a large request never holds the lock long.
type Store struct {
	mu       sync.Mutex
	hold     time.Duration
	maxBytes int64
	now      func() time.Time
	// dataplane files the node component's reports; they are not held here.
	dataplane *dataplane.Table

	traces    map[heldKey]*held
	all       queue                  // every held trace in arrival order: expiry and eviction
	undecided queue                  // the held traces not yet known to concern a Pod, in arrival order
	senders   map[string]*senderHeld // what each authenticated sender holds
	byPod     map[string][]*held     // "namespace/name" → apiserver requests on the Pod
	byUID     map[string][]*held     // Pod UID → kubelet traces
	unrelated map[phases.TraceID]*decided
	decided   decidedQueue
	strs      interner
	bytes     int64
	spans     int
	requests  uint64
	lastSeen  map[string]time.Time
	started   time.Time

	m *metrics
}

// heldKey is a held trace's identity: its trace ID and, for a node-bound sender's spans, the
// node they may join Pods of. A sender for another node that reuses a trace ID gets a trace
// of its own, never a share in the genuine one.
type heldKey struct {
	id   phases.TraceID
	node string
}

// held is one component trace's spans received so far.
type held struct {
	key      heldKey
	spans    []phases.ComponentSpan
	bytes    int64
	first    time.Time // when its first span arrived
	start    time.Time // the earliest start among its spans
	relevant bool      // one of its spans concerns a Pod or workload
	read     bool      // its root is a read request
	rooted   bool      // its root span arrived
	create   bool      // an apiserver request that created a Pod
	runtime  int       // spans from containerd
	pods     []string
	uids     []string
	request  uint64 // the last request that added to it
	sender   *senderHeld
	all, und links
	snd      links
}

// senderHeld is what one authenticated sender's requests hold: its traces in arrival order and
// their bytes, with the shared strings it brought first. No sender may hold more than half the bound: one that floods the input evicts
// its own oldest, not the spans other senders sent for the Pods starting now.
type senderHeld struct {
	name   string
	traces queue
	bytes  int64
}

// Fixed costs charged to the byte bound, besides strings: measured against the live heap by
// TestHeldBytesMatchHeap for every shape of input it feeds.
var (
	spanSize = int64(unsafe.Sizeof(phases.ComponentSpan{}))
	attrSize = int64(unsafe.Sizeof(phases.Attr{}))
)

const (
	heldTraceBytes = int64(unsafe.Sizeof(held{})) + 128 // with its slot in traces
	boxedBytes     = 16                                 // a string or number attribute value's box
	indexRefBytes  = 16                                 // a trace's place in an index list
	indexKeyBytes  = 96                                 // an index key's slot and list
	decidedBytes   = 112                                // a remembered unrelated trace: its record and map slot
)

// NewStore returns an empty store; reg, when not nil, gets its metrics.
func NewStore(hold time.Duration, maxBytes int64, reg prometheus.Registerer) *Store {
	if hold <= 0 {
		hold = DefaultHold
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	s := &Store{
		hold: hold, maxBytes: maxBytes, now: time.Now,
		traces: map[heldKey]*held{}, unrelated: map[phases.TraceID]*decided{},
		byPod: map[string][]*held{}, byUID: map[string][]*held{},
		lastSeen: map[string]time.Time{}, senders: map[string]*senderHeld{},
	}
	s.all.links = func(h *held) *links { return &h.all }
	s.undecided.links = func(h *held) *links { return &h.und }
	s.started = s.now()
	s.m = newMetrics(reg, s)
	return s
}

// SetNow replaces the store's clock, and starts the store anew by it: a test or a replay that
// feeds spans at times of its own.
func (s *Store) SetNow(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
	s.started = now()
}

// Add files one request's spans from a trusted sender (a replay, a test).
func (s *Store) Add(spans []phases.ComponentSpan) {
	r := s.Request(Trusted)
	for len(spans) > 0 {
		n := min(len(spans), chunkSpans)
		r.Add(spans[:n])
		spans = spans[n:]
	}
	r.End()
}

// Request is one request's filing: its spans come a chunk at a time (Add, each under one
// hold of the store's lock) and what its traces concern is decided when it ends (End), so a
// root and the span that says what the trace concerns may come in any order within it.
type Request struct {
	s       *Store
	sender  Sender
	seq     uint64
	touched []*held
}

// Request starts filing a request from sender.
func (s *Store) Request(sender Sender) *Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	return &Request{s: s, sender: sender, seq: s.requests}
}

// Add files a chunk of the request's spans; it copies what it keeps. The node component's
// reports go to the table SetDataplane gave, once the store's lock is let go.
func (r *Request) Add(spans []phases.ComponentSpan) {
	s := r.s
	s.mu.Lock()
	reports, now := r.add(spans)
	table := s.dataplane
	s.mu.Unlock()
	for _, rep := range reports {
		table.Add(rep, now)
	}
}

func (r *Request) add(spans []phases.ComponentSpan) (reports []dataplane.Report, now time.Time) {
	s := r.s
	now = s.now()
	s.expire(now)
	for i := range spans {
		sp := &spans[i]
		s.m.received(sp.Service)
		if sp.TraceID == (phases.TraceID{}) || sp.SpanID.IsZero() {
			s.m.dropped(sp.Service, ReasonMalformed, 1)
			continue
		}
		if sp.Service == dataplane.Component {
			if rep, ok := r.report(sp, now); ok {
				reports = append(reports, rep)
			}
			continue
		}
		if component(sp.Service) == labelOther {
			s.m.dropped(sp.Service, ReasonComponent, 1)
			continue
		}
		node, ok := r.sender.may(sp.Service)
		if !ok {
			s.m.dropped(sp.Service, ReasonForbidden, 1)
			continue
		}
		s.lastSeen[sp.Service] = now
		if _, ok := s.unrelated[sp.TraceID]; ok {
			s.m.dropped(sp.Service, ReasonUnrelated, 1)
			continue
		}
		key := heldKey{sp.TraceID, node}
		h := s.traces[key]
		if h == nil {
			h = &held{key: key, first: now}
			s.traces[key] = h
			s.all.push(h)
			s.undecided.push(h)
			s.own(h, r.sender.Name)
			s.charge(h, heldTraceBytes)
		}
		if h.request != r.seq {
			h.request = r.seq
			r.touched = append(r.touched, h)
		}
		if len(h.spans) == maxSpansPerTrace {
			s.m.dropped(sp.Service, ReasonCrowded, 1)
			continue
		}
		s.addSpan(h, sp)
	}
	s.evict()
	return reports, now
}

// report checks one span of readyspan's node component: it must parse, and a node-bound
// sender reports only its own node's rules.
func (r *Request) report(sp *phases.ComponentSpan, now time.Time) (dataplane.Report, bool) {
	s := r.s
	if s.dataplane == nil {
		s.m.dropped(sp.Service, ReasonComponent, 1)
		return dataplane.Report{}, false
	}
	rep, err := dataplane.Parse(sp)
	if err != nil {
		s.m.dropped(sp.Service, ReasonMalformed, 1)
		return dataplane.Report{}, false
	}
	if !r.sender.mayReport(rep.Node()) {
		s.m.dropped(sp.Service, ReasonForbidden, 1)
		return dataplane.Report{}, false
	}
	s.lastSeen[sp.Service] = now
	s.m.joined(sp.Service)
	return rep, true
}

// SetDataplane has the node component's reports filed in t (nil: they are dropped, counted as
// component).
func (s *Store) SetDataplane(t *dataplane.Table) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dataplane = t
}

// End decides, for each trace the request added to, whether what has come of it says it
// concerns nothing readyspan joins.
func (r *Request) End() {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.expire(now)
	for _, h := range r.touched {
		if s.traces[h.key] != h {
			continue // taken, expired or evicted since
		}
		switch {
		case len(h.pods) > maxKeysPerTrace || len(h.uids) > maxKeysPerTrace:
			s.drop(h, ReasonAmbiguous)
			s.remember(h.key.id, now)
		case h.rooted && h.read:
			s.drop(h, ReasonRead)
			s.remember(h.key.id, now)
		case h.rooted && !h.relevant:
			s.drop(h, ReasonUnrelated)
			s.remember(h.key.id, now)
		}
	}
	r.touched = nil
	s.evict()
}

// addSpan adds one span to its trace, with its strings held once, and notes what it says the
// trace concerns.
func (s *Store) addSpan(h *held, in *phases.ComponentSpan) {
	// The shared strings are charged to the store, not to the trace: they outlive it while
	// another trace holds them.
	sp := *in
	before := s.strs.bytes
	sp.Name = s.strs.ref(sp.Name, h.sender)
	n := int64(allocBytes(len(sp.StatusMessage)))
	if len(sp.Attrs) > 0 {
		sp.Attrs = make([]phases.Attr, len(in.Attrs))
		n += int64(allocBytes(int(attrSize) * len(sp.Attrs)))
		for i, a := range in.Attrs {
			a.Key = s.strs.ref(a.Key, h.sender)
			switch v := a.Value.(type) {
			case string:
				n += boxedBytes
				if interned(v) {
					v = s.strs.ref(v, h.sender)
				} else {
					n += int64(allocBytes(len(v)))
				}
				a.Value = v
			case int64, float64:
				n += boxedBytes
			}
			sp.Attrs[i] = a
		}
	}
	if len(h.spans) == cap(h.spans) {
		grown := append(h.spans, sp)
		n += (int64(cap(grown)) - int64(cap(h.spans))) * spanSize
		h.spans = grown
	} else {
		h.spans = append(h.spans, sp)
	}
	s.charge(h, n)
	s.bytes += s.strs.bytes - before
	s.spans++
	if h.start.IsZero() || sp.Start.Before(h.start) {
		h.start = sp.Start
	}
	if sp.Parent.IsZero() {
		h.rooted = true
		if m := sp.Attr(attrHTTPMethod); m == "GET" || m == "HEAD" || m == "OPTIONS" {
			h.read = true
		}
	}
	switch sp.Service {
	case phases.ServiceAPIServer:
		if sp.Attr(attrResource) == "pods" && sp.Attr(attrVerb) == "POST" && sp.Attr(attrSubresource) == "" && sp.Attr(attrAuditID) != "" {
			h.create = true
		}
		if r, ns, name, ok := concerns(&sp); ok {
			s.relevant(h)
			if r == "pods" && name != "" {
				s.index(h, &h.pods, s.byPod, ns+"/"+name)
			}
		}
	case phases.ServiceContainerd:
		h.runtime++
	case phases.ServiceKubelet:
		if uid := sp.Attr(phases.AttrPodUID); uid != "" {
			s.relevant(h)
			s.index(h, &h.uids, s.byUID, uid)
		}
	}
}

// interned says which string attribute values are held once: the short ones repeat from span
// to span (a method, a status, an address, a resource, a Pod's UID), the long ones (URLs,
// audit IDs, keys) rarely do.
func interned(v string) bool { return len(v) <= maxInternedValue }

const maxInternedValue = 48

// relevant marks a trace as concerning a Pod or workload: it leaves the undecided.
func (s *Store) relevant(h *held) {
	if !h.relevant {
		h.relevant = true
		s.undecided.remove(h)
	}
}

// index notes that the trace concerns key, in its own list and the index; past
// maxKeysPerTrace keys it stops (End drops such a trace), and past maxTracesPerKey traces of
// one key the oldest goes.
func (s *Store) index(h *held, keys *[]string, idx map[string][]*held, key string) {
	for _, k := range *keys {
		if k == key {
			return
		}
	}
	if len(*keys) > maxKeysPerTrace {
		return
	}
	*keys = append(*keys, key)
	if len(*keys) > maxKeysPerTrace {
		return // not indexed: End drops it
	}
	list, ok := idx[key]
	n := int64(indexRefBytes + allocBytes(len(key)))
	if !ok {
		n += indexKeyBytes
	}
	if len(list) >= maxTracesPerKey {
		oldest := list[0]
		s.drop(oldest, ReasonCrowded)
		list = idx[key]
	}
	idx[key] = append(list, h)
	s.charge(h, n)
}

func (s *Store) charge(h *held, n int64) {
	h.bytes += n
	s.bytes += n
	if h.sender != nil {
		h.sender.bytes += n
	}
}

// own records which authenticated sender a new trace came from (none on a trusted address).
func (s *Store) own(h *held, name string) {
	if name == "" {
		return
	}
	sh := s.senders[name]
	if sh == nil {
		sh = &senderHeld{name: name}
		sh.traces.links = func(h *held) *links { return &h.snd }
		s.senders[name] = sh
	}
	h.sender = sh
	sh.traces.push(h)
}

// greediest is the authenticated sender holding more than half the bound, if one does.
func (s *Store) greediest() *senderHeld {
	for _, sh := range s.senders {
		if sh.bytes > s.maxBytes/2 {
			return sh
		}
	}
	return nil
}

// Attributes of the apiserver's spans that say what a request concerns.
const (
	attrStorageKey  = "key"      // the storage spans': /pods/NS/NAME (the etcd prefix cut)
	attrResource    = "resource" // the handler's and the storage spans'
	attrNamespace   = "namespace"
	attrName        = "name"
	attrURLPath     = "url.path"
	attrHTTPTarget  = "http.target"
	attrHTTPMethod  = "http.request.method"
	attrVerb        = "verb" // the handler's: POST, PUT, PATCH
	attrSubresource = "subresource"
	attrAuditID     = "audit-id"
)

// workloads are the resources whose requests are held.
var workloads = map[string]bool{"pods": true, "deployments": true, "replicasets": true, "statefulsets": true, "daemonsets": true, "jobs": true}

// concerns says which object of a watched resource an apiserver span concerns, if any: by its
// storage key, else its handler's resource and name, else its request path.
func concerns(sp *phases.ComponentSpan) (resource, ns, name string, ok bool) {
	if key := sp.Attr(attrStorageKey); key != "" {
		key = strings.TrimPrefix(key, "/registry")
		parts := strings.SplitN(strings.TrimPrefix(key, "/"), "/", 4)
		if len(parts) >= 3 && workloads[parts[0]] {
			return parts[0], parts[1], parts[2], true
		}
		if len(parts) >= 1 && workloads[parts[0]] {
			return parts[0], "", "", true
		}
		return "", "", "", false
	}
	if r := sp.Attr(attrResource); r != "" {
		return r, sp.Attr(attrNamespace), sp.Attr(attrName), workloads[r]
	}
	path := sp.Attr(attrURLPath)
	if path == "" {
		path, _, _ = strings.Cut(sp.Attr(attrHTTPTarget), "?")
	}
	return requestPath(path)
}

// requestPath reads /api/v1/namespaces/NS/RESOURCE[/NAME…] and
// /apis/GROUP/VERSION/namespaces/NS/RESOURCE[/NAME…].
func requestPath(path string) (resource, ns, name string, ok bool) {
	parts := strings.SplitN(strings.TrimPrefix(path, "/"), "/", 8)
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return "", "", "", false
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		ns, parts = parts[1], parts[2:]
	}
	if len(parts) == 0 || !workloads[parts[0]] {
		return "", "", "", false
	}
	if len(parts) >= 2 {
		name = parts[1]
	}
	return parts[0], ns, name, true
}

// Query is what a Pod's trace asks of the store: its UID (the kubelet's spans), the node it is
// bound to (whose senders may write them), its namespace and name (the apiserver's requests on
// it) and the window in which those requests count.
type Query struct {
	UID, Node, Namespace, Name string
	From, To                   time.Time
}

// Take removes and returns the traces that concern the Pod: every kubelet trace of its UID
// (with containerd's spans in it) from a sender that may write for its node, and every
// apiserver request on its namespace and name that started within [From, To] (a later Pod of
// the same name has its own window). Their spans count as joined; a node-bound sender's spans
// for this Pod from another node are dropped as forbidden.
func (s *Store) Take(q Query) []phases.ComponentTrace {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(s.now())
	var out []phases.ComponentTrace
	take := func(h *held) {
		if !h.relevant {
			return
		}
		for _, sp := range h.spans {
			s.m.joined(sp.Service)
		}
		out = append(out, h.spans)
		s.remove(h)
	}
	for _, h := range append([]*held(nil), s.byUID[q.UID]...) {
		if !mayJoin(h, q) {
			s.drop(h, ReasonForbidden)
			continue
		}
		take(h)
	}
	for _, h := range append([]*held(nil), s.byPod[q.Namespace+"/"+q.Name]...) {
		if !h.start.Before(q.From) && !h.start.After(q.To) {
			take(h)
		}
	}
	return out
}

// mayJoin says whether a held trace's sender may write for the query's Pod: any node, or the
// node the Pod is bound to.
func mayJoin(h *held, q Query) bool { return h.key.node == "" || h.key.node == q.Node }

// Presence is which of the spans a Pod's trace expects the store holds.
type Presence struct {
	Create  bool // the apiserver's request that created the Pod, complete
	Sync    bool // the kubelet's syncPod that started the Pod (phases.StartedPod), complete
	Runtime bool // containerd's side of that syncPod's RunPodSandbox (phases.SandboxRuntimeIn)
}

// Present says which of the spans the query's Pod expects are held, without taking them.
func (s *Store) Present(q Query) Presence {
	s.mu.Lock()
	defer s.mu.Unlock()
	var p Presence
	for _, h := range s.byUID[q.UID] {
		if mayJoin(h, q) && h.rooted && phases.StartedPod(h.spans) {
			p.Sync = true
			p.Runtime = p.Runtime || h.runtime > 0 && phases.SandboxRuntimeIn(h.spans)
		}
	}
	for _, h := range s.byPod[q.Namespace+"/"+q.Name] {
		if h.rooted && h.create && !h.start.Before(q.From) && !h.start.After(q.To) {
			p.Create = true
		}
	}
	return p
}

// startupGrace is how long after the store started a component it has not heard from yet
// counts as sending: the components export every 5 s, so a readyspan that just started has not
// heard from them, and the first Pods it finishes would not wait for their spans.
const startupGrace = 15 * time.Second

// Sending reports whether the component sent a span within the last window (or the store
// started less than startupGrace ago): a trace waits only for the components that send at all.
func (s *Store) Sending(component string, window time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	t, ok := s.lastSeen[component]
	return ok && now.Sub(t) <= window || now.Sub(s.started) < startupGrace
}

// Held is how many spans the store holds and the bytes it counts for all it keeps.
func (s *Store) Held() (spans int, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.spans, s.bytes
}

// expire drops what was held too long and forgets unrelated traces remembered long enough;
// each queue is in arrival order, so it looks at no more than it removes.
func (s *Store) expire(now time.Time) {
	for h := s.all.head; h != nil && now.Sub(h.first) > s.hold; h = s.all.head {
		if h.relevant {
			s.drop(h, ReasonExpired)
		} else {
			s.drop(h, ReasonUnresolved)
		}
	}
	for h := s.undecided.head; h != nil && now.Sub(h.first) > min(undecidedFor, s.hold); h = s.undecided.head {
		s.drop(h, ReasonUnresolved)
	}
	for d := s.decided.head; d != nil && now.Sub(d.at) > undecidedFor; d = s.decided.head {
		s.forget(d)
	}
}

// evict keeps what is counted within the bound: the unrelated traces remembered go first,
// then the oldest of a sender that holds more than half the bound, then the undecided traces,
// then the oldest held.
func (s *Store) evict() {
	for s.bytes > s.maxBytes {
		greedy := s.greediest()
		switch {
		case s.decided.head != nil:
			s.forget(s.decided.head)
		case greedy != nil && greedy.traces.head != nil:
			s.drop(greedy.traces.head, ReasonBytes)
		case s.undecided.head != nil:
			s.drop(s.undecided.head, ReasonBytes)
		case s.all.head != nil:
			s.drop(s.all.head, ReasonBytes)
		default:
			return
		}
	}
}

// drop removes a trace, counting its spans as dropped for the reason.
func (s *Store) drop(h *held, reason string) {
	for _, sp := range h.spans {
		s.m.dropped(sp.Service, reason, 1)
	}
	s.remove(h)
}

// remove takes a trace out of the store and its indexes, freeing what it was charged.
func (s *Store) remove(h *held) {
	if s.traces[h.key] != h {
		return
	}
	delete(s.traces, h.key)
	s.all.remove(h)
	s.undecided.remove(h)
	if sh := h.sender; sh != nil {
		sh.traces.remove(h)
		sh.bytes -= h.bytes
	}
	before := s.strs.bytes
	for _, sp := range h.spans {
		s.strs.unref(sp.Name)
		for _, a := range sp.Attrs {
			s.strs.unref(a.Key)
			if v, ok := a.Value.(string); ok && interned(v) {
				s.strs.unref(v)
			}
		}
	}
	s.bytes -= before - s.strs.bytes
	s.bytes -= h.bytes
	// A sender is forgotten once nothing it sent is held, its strings included.
	if sh := h.sender; sh != nil && sh.traces.head == nil && sh.bytes <= 0 {
		delete(s.senders, sh.name)
	}
	s.spans -= len(h.spans)
	for _, k := range h.pods {
		unindex(s.byPod, k, h)
	}
	for _, u := range h.uids {
		unindex(s.byUID, u, h)
	}
	h.spans = nil
}

func unindex(idx map[string][]*held, key string, h *held) {
	list := idx[key]
	for i, x := range list {
		if x == h {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(idx, key)
	} else {
		idx[key] = list
	}
}

// decided is a trace remembered as unrelated until at.
type decided struct {
	id         phases.TraceID
	at         time.Time
	prev, next *decided
}

// remember notes that a trace concerns nothing readyspan joins, so that its later spans are
// dropped at once.
func (s *Store) remember(id phases.TraceID, now time.Time) {
	if _, ok := s.unrelated[id]; ok {
		return
	}
	d := &decided{id: id, at: now}
	s.unrelated[id] = d
	s.decided.push(d)
	s.bytes += decidedBytes
}

func (s *Store) forget(d *decided) {
	s.decided.remove(d)
	delete(s.unrelated, d.id)
	s.bytes -= decidedBytes
}

// links place a held trace in one of the store's queues.
type links struct{ prev, next *held }

// queue is a list of held traces in arrival order, linked through the traces themselves so
// that a trace leaves it in constant time.
type queue struct {
	head, tail *held
	links      func(*held) *links
}

func (q *queue) push(h *held) {
	l := q.links(h)
	l.prev, l.next = q.tail, nil
	if q.tail != nil {
		q.links(q.tail).next = h
	} else {
		q.head = h
	}
	q.tail = h
}

// remove takes h out of the queue; a trace not in it is left alone.
func (q *queue) remove(h *held) {
	l := q.links(h)
	if l.prev == nil && q.head != h {
		return
	}
	if l.prev != nil {
		q.links(l.prev).next = l.next
	} else {
		q.head = l.next
	}
	if l.next != nil {
		q.links(l.next).prev = l.prev
	} else {
		q.tail = l.prev
	}
	l.prev, l.next = nil, nil
}

// decidedQueue is the remembered unrelated traces in the order they were decided.
type decidedQueue struct{ head, tail *decided }

func (q *decidedQueue) push(d *decided) {
	d.prev = q.tail
	if q.tail != nil {
		q.tail.next = d
	} else {
		q.head = d
	}
	q.tail = d
}

func (q *decidedQueue) remove(d *decided) {
	if d.prev != nil {
		d.prev.next = d.next
	} else {
		q.head = d.next
	}
	if d.next != nil {
		d.next.prev = d.prev
	} else {
		q.tail = d.prev
	}
	d.prev, d.next = nil, nil
}
