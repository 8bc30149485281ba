package otlpin

import (
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/readyspan/readyspan/phases"
)

// Defaults of what is held.
const (
	// DefaultHold is how long a span that concerns a Pod or workload is held for a Pod's trace
	// to take it: longer than the slowest startup readyspan follows (--fail-after, 2 min by
	// default) plus its settle and wait.
	DefaultHold = 10 * time.Minute
	// DefaultMaxBytes bounds what is held, by the estimate spanBytes makes.
	DefaultMaxBytes = 64 << 20
	// undecidedFor is how long the spans of a trace whose root has not arrived, and none of
	// which says what it concerns, are held: the components export in batches of a few seconds
	// (5 s by default for each of them), and a trace's root ends, so is exported, last.
	undecidedFor = 30 * time.Second
	// expireEvery is how often the held traces are scanned for expiry.
	expireEvery = time.Second
)

// Reasons a span is dropped, as the readyspan_otlp_dropped_spans_total reason label.
const (
	ReasonUnrelated  = "unrelated"  // concerns no Pod or workload (at once)
	ReasonComponent  = "component"  // from a service readyspan does not join (at once)
	ReasonRead       = "read"       // a read request (GET, LIST, WATCH): never joined (at once)
	ReasonUnresolved = "unresolved" // its trace's root never arrived to say what it concerns
	ReasonExpired    = "expired"    // held for --otlp-receive-hold, and no Pod's trace took it
	ReasonBytes      = "bytes"      // evicted, oldest first, to keep within the byte bound
	ReasonMalformed  = "malformed"  // no valid trace or span ID
)

// componentLabels are the component label's values: the three components joined, and other.
var componentLabels = []string{phases.ServiceAPIServer, phases.ServiceKubelet, phases.ServiceContainerd, labelOther}

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
	}
	return labelOther
}

// Store holds the components' spans that concern a Pod or workload, by trace, until a Pod's
// trace takes them or they expire. It is safe for concurrent use.
type Store struct {
	mu       sync.Mutex
	hold     time.Duration
	maxBytes int64
	now      func() time.Time

	traces    map[phases.TraceID]*held
	order     []orderEntry                 // traces in arrival order, for eviction by bytes
	unrelated map[phases.TraceID]time.Time // decided: later spans of these are dropped at once
	byPod     map[string][]phases.TraceID  // "namespace/name" → apiserver requests on the Pod
	byUID     map[string][]phases.TraceID  // Pod UID → kubelet traces
	bytes     int64
	spans     int
	expired   time.Time // last expiry scan
	lastSeen  map[string]time.Time
	started   time.Time

	m *metrics
}

type orderEntry struct {
	id    phases.TraceID
	first time.Time
}

// held is one component trace's spans received so far.
type held struct {
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
}

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
		traces: map[phases.TraceID]*held{}, unrelated: map[phases.TraceID]time.Time{},
		byPod: map[string][]phases.TraceID{}, byUID: map[string][]phases.TraceID{},
		lastSeen: map[string]time.Time{},
	}
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

// Add takes the spans of one request, in the order received.
func (s *Store) Add(spans []phases.ComponentSpan) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.expire(now)
	groups := map[phases.TraceID][]int{}
	var ids []phases.TraceID
	for i := range spans {
		sp := &spans[i]
		s.m.received(sp.Service)
		if sp.TraceID == (phases.TraceID{}) || sp.SpanID.IsZero() {
			s.m.dropped(sp.Service, ReasonMalformed, 1)
			continue
		}
		if component(sp.Service) == labelOther {
			s.m.dropped(sp.Service, ReasonComponent, 1)
			continue
		}
		s.lastSeen[sp.Service] = now
		if _, ok := s.unrelated[sp.TraceID]; ok {
			s.m.dropped(sp.Service, ReasonUnrelated, 1)
			continue
		}
		if _, ok := groups[sp.TraceID]; !ok {
			ids = append(ids, sp.TraceID)
		}
		groups[sp.TraceID] = append(groups[sp.TraceID], i)
	}
	for _, id := range ids {
		h := s.traces[id]
		if h == nil {
			h = &held{first: now}
			s.traces[id] = h
			s.order = append(s.order, orderEntry{id, now})
		}
		for _, i := range groups[id] {
			s.addSpan(id, h, &spans[i])
		}
		switch {
		case h.rooted && h.read:
			s.drop(id, ReasonRead)
			s.unrelated[id] = now
		case h.rooted && !h.relevant:
			s.drop(id, ReasonUnrelated)
			s.unrelated[id] = now
		}
	}
	for s.bytes > s.maxBytes && len(s.order) > 0 {
		e := s.order[0]
		s.order = s.order[1:]
		if h := s.traces[e.id]; h != nil && h.first.Equal(e.first) {
			s.drop(e.id, ReasonBytes)
		}
	}
}

// addSpan adds one span to its trace and notes what it says the trace concerns.
func (s *Store) addSpan(id phases.TraceID, h *held, sp *phases.ComponentSpan) {
	b := spanBytes(sp)
	h.spans = append(h.spans, *sp)
	h.bytes += b
	s.bytes += b
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
		if r, ns, name, ok := concerns(sp); ok {
			h.relevant = true
			if r == "pods" && name != "" {
				key := ns + "/" + name
				if !contains(h.pods, key) {
					h.pods = append(h.pods, key)
					s.byPod[key] = append(s.byPod[key], id)
				}
			}
		}
	case phases.ServiceContainerd:
		h.runtime++
	case phases.ServiceKubelet:
		if uid := sp.Attr(phases.AttrPodUID); uid != "" {
			h.relevant = true
			if !contains(h.uids, uid) {
				h.uids = append(h.uids, uid)
				s.byUID[uid] = append(s.byUID[uid], id)
			}
		}
	}
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
		parts := strings.Split(strings.TrimPrefix(key, "/"), "/")
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
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
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

// Query is what a Pod's trace asks of the store: its UID (the kubelet's spans), its namespace
// and name (the apiserver's requests on it) and the window in which those requests count.
type Query struct {
	UID, Namespace, Name string
	From, To             time.Time
}

// Take removes and returns the traces that concern the Pod: every kubelet trace of its UID
// (with containerd's spans in it), and every apiserver request on its namespace and name
// that started within [From, To] (a later Pod of the same name has its own window). Their
// spans count as joined.
func (s *Store) Take(q Query) []phases.ComponentTrace {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(s.now())
	var out []phases.ComponentTrace
	take := func(id phases.TraceID) {
		h := s.traces[id]
		if h == nil || !h.relevant {
			return
		}
		for _, sp := range h.spans {
			s.m.joined(sp.Service)
		}
		out = append(out, h.spans)
		s.remove(id, h)
	}
	for _, id := range append([]phases.TraceID(nil), s.byUID[q.UID]...) {
		take(id)
	}
	for _, id := range append([]phases.TraceID(nil), s.byPod[q.Namespace+"/"+q.Name]...) {
		if h := s.traces[id]; h != nil && !h.start.Before(q.From) && !h.start.After(q.To) {
			take(id)
		}
	}
	return out
}

// Presence is which of the spans a Pod's trace expects the store holds.
type Presence struct {
	Create  bool // the apiserver's request that created the Pod, complete
	Sync    bool // the kubelet's syncPod that started the Pod (phases.StartedPod), complete
	Runtime bool // containerd's spans in such a kubelet trace
}

// Present says which of the spans the query's Pod expects are held, without taking them.
func (s *Store) Present(q Query) Presence {
	s.mu.Lock()
	defer s.mu.Unlock()
	var p Presence
	for _, id := range s.byUID[q.UID] {
		if h := s.traces[id]; h != nil && h.rooted && phases.StartedPod(h.spans) {
			p.Sync = true
			p.Runtime = p.Runtime || h.runtime > 0
		}
	}
	for _, id := range s.byPod[q.Namespace+"/"+q.Name] {
		if h := s.traces[id]; h != nil && h.rooted && h.create && !h.start.Before(q.From) && !h.start.After(q.To) {
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

// Held is how many spans and bytes the store holds.
func (s *Store) Held() (spans int, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.spans, s.bytes
}

// expire drops what was held too long, at most once per expireEvery.
func (s *Store) expire(now time.Time) {
	if now.Sub(s.expired) < expireEvery {
		return
	}
	s.expired = now
	for id, h := range s.traces {
		age := now.Sub(h.first)
		switch {
		case !h.relevant && age > min(undecidedFor, s.hold):
			s.drop(id, ReasonUnresolved)
		case h.relevant && age > s.hold:
			s.drop(id, ReasonExpired)
		}
	}
	for id, t := range s.unrelated {
		if now.Sub(t) > s.hold {
			delete(s.unrelated, id)
		}
	}
	// The arrival queue keeps entries of traces already gone until they reach its head.
	i := 0
	for i < len(s.order) && s.traces[s.order[i].id] == nil {
		i++
	}
	s.order = s.order[i:]
}

// drop removes a trace, counting its spans as dropped for the reason.
func (s *Store) drop(id phases.TraceID, reason string) {
	h := s.traces[id]
	if h == nil {
		return
	}
	for _, sp := range h.spans {
		s.m.dropped(sp.Service, reason, 1)
	}
	s.remove(id, h)
}

func (s *Store) remove(id phases.TraceID, h *held) {
	delete(s.traces, id)
	s.bytes -= h.bytes
	s.spans -= len(h.spans)
	for _, k := range h.pods {
		s.byPod[k] = without(s.byPod[k], id)
		if len(s.byPod[k]) == 0 {
			delete(s.byPod, k)
		}
	}
	for _, u := range h.uids {
		s.byUID[u] = without(s.byUID[u], id)
		if len(s.byUID[u]) == 0 {
			delete(s.byUID, u)
		}
	}
}

// spanBytes estimates what a held span costs in memory, as measured on a real capture
// (TestSpanBytesEstimate): the span with its share of the trace's slice and indexes, and per
// attribute its slot, its boxed value and the strings that are not interned (decode.go).
func spanBytes(sp *phases.ComponentSpan) int64 {
	n := heldSpanBytes + len(sp.Name) + len(sp.StatusMessage)
	for _, a := range sp.Attrs {
		n += heldAttrBytes
		if v, ok := a.Value.(string); ok && len(v) > maxInternedValue {
			n += len(v)
		}
	}
	return int64(n)
}

// The fixed parts of spanBytes.
const (
	heldSpanBytes = 420 // phases.ComponentSpan (160 bytes), the slice's spare room, its trace's share of the indexes
	heldAttrBytes = 48  // phases.Attr (32 bytes) and its boxed value (16)
)

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func without(ids []phases.TraceID, id phases.TraceID) []phases.TraceID {
	out := ids[:0]
	for _, x := range ids {
		if x != id {
			out = append(out, x)
		}
	}
	return out
}
