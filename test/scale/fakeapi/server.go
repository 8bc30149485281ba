package fakeapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
)

// Content types, as the apiserver names them.
const (
	ContentJSON     = "application/json"
	ContentProtobuf = "application/vnd.kubernetes.protobuf"
)

// initialEventsEnd is the annotation of the bookmark that ends a streamed initial list
// (metav1.InitialEventsAnnotationKey).
const initialEventsEnd = metav1.InitialEventsAnnotationKey

// Server serves a Stream: list and watch of every built-in resource, the stream's resources from
// it and the others empty, from when Start is called.
type Server struct {
	stream *Stream
	// BookmarkEvery is how often a watch that allows bookmarks gets one (the apiserver's is
	// about a minute; shorter here, so that short runs see them).
	BookmarkEvery time.Duration

	mu       sync.Mutex
	notify   chan struct{} // closed and replaced when events are released
	released int           // events[:released] are out
	sentAt   []time.Time   // when each released event was released
	logs     map[*Resource][]int
	state    map[*Resource]map[string]*object
	start    time.Time
	done     chan struct{} // closed once every event is released
	delivery []time.Duration
	unknown  map[string]int
	watches  map[string]int // watch requests by resource
	lists    map[string]int // list requests by resource
	protoReq int            // requests answered in protobuf
	open     map[*watcher]bool
}

// watcher is one open watch: its resource and how much of the resource's log it has written.
type watcher struct {
	res     *Resource
	written int
}

// NewServer serves s; Start releases its events.
func NewServer(s *Stream) *Server {
	srv := &Server{stream: s, BookmarkEvery: 5 * time.Second, notify: make(chan struct{}), done: make(chan struct{}),
		logs: map[*Resource][]int{}, state: map[*Resource]map[string]*object{}, sentAt: make([]time.Time, len(s.events)),
		unknown: map[string]int{}, watches: map[string]int{}, lists: map[string]int{}, open: map[*watcher]bool{}}
	for i := range s.initial {
		o := &s.initial[i]
		srv.stateOf(o.res)[o.key] = o
	}
	return srv
}

func (s *Server) stateOf(r *Resource) map[string]*object {
	m := s.state[r]
	if m == nil {
		m = map[string]*object{}
		s.state[r] = m
	}
	return m
}

// Start releases the stream's events at their times from now on, until they are all out or ctx
// ends. It returns at once; Done is closed when the last is out.
func (s *Server) Start(ctx context.Context) {
	s.mu.Lock()
	s.start = time.Now()
	s.mu.Unlock()
	go s.release(ctx)
}

// Done is closed once every event has been released.
func (s *Server) Done() <-chan struct{} { return s.done }

func (s *Server) release(ctx context.Context) {
	defer close(s.done)
	ev := s.stream.events
	t := time.NewTimer(0)
	defer t.Stop()
	for i := 0; i < len(ev); {
		due := s.start.Add(ev[i].at)
		if wait := time.Until(due); wait > 0 {
			t.Reset(wait)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
		now := time.Now()
		s.mu.Lock()
		for ; i < len(ev) && !s.start.Add(ev[i].at).After(now); i++ {
			e := &ev[i]
			s.sentAt[i] = now
			s.logs[e.res] = append(s.logs[e.res], i)
			if e.typ == "DELETED" {
				delete(s.stateOf(e.res), e.key)
			} else {
				s.stateOf(e.res)[e.key] = &e.object
			}
		}
		s.released = i
		close(s.notify)
		s.notify = make(chan struct{})
		s.mu.Unlock()
	}
}

// Delivered tells whether every event is out and every open watch has written all of its
// resource's events to its connection (what a watcher still decodes then is in its buffers).
func (s *Server) Delivered() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released < len(s.stream.events) {
		return false
	}
	for w := range s.open {
		if w.written < len(s.logs[w.res]) {
			return false
		}
	}
	return true
}

// SentAt is when the stream's ith event was released (zero if it was not).
func (s *Server) SentAt(i int) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i < 0 || i >= len(s.sentAt) {
		return time.Time{}
	}
	return s.sentAt[i]
}

// Behind is how late the releases were: the last released event's release time less its due.
func (s *Server) Behind() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released == 0 {
		return 0
	}
	i := s.released - 1
	return s.sentAt[i].Sub(s.start.Add(s.stream.events[i].at))
}

// Delivery returns how long each event written to a watch waited between its release and its
// write to the watcher's connection returning (the watcher reading too slowly shows here), and
// forgets them.
func (s *Server) Delivery() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.delivery
	s.delivery = nil
	return d
}

// Requests are the requests served, for a report: lists and watches by resource, how many were
// answered in protobuf, and the paths the server does not serve.
type Requests struct {
	Lists, Watches, Unknown map[string]int
	Protobuf                int
}

// Requests returns what was asked so far.
func (s *Server) Requests() Requests {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Requests{Lists: clone(s.lists), Watches: clone(s.watches), Unknown: clone(s.unknown), Protobuf: s.protoReq}
}

func clone(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// currentRV is the resourceVersion of the state served now; s.mu held.
func (s *Server) currentRV() uint64 {
	if s.released == 0 {
		return s.stream.firstRV
	}
	return s.stream.events[s.released-1].rv
}

// ServeHTTP answers the API's paths: /version, health, and list and watch of every resource.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/version":
		writeJSON(w, http.StatusOK, map[string]string{"major": "1", "minor": "37", "gitVersion": "v1.37.0-fakeapi", "platform": "linux/amd64"})
		return
	case "/healthz", "/readyz", "/livez":
		_, _ = w.Write([]byte("ok"))
		return
	}
	res, ns, ok := parsePath(r.URL.Path)
	if !ok || r.Method != http.MethodGet {
		s.mu.Lock()
		s.unknown[r.Method+" "+r.URL.Path]++
		s.mu.Unlock()
		status(w, apierrors.NewNotFound(schema.GroupResource{}, r.URL.Path))
		return
	}
	q := r.URL.Query()
	proto := s.stream.Protobuf && strings.Contains(r.Header.Get("Accept"), ContentProtobuf)
	if q.Get("watch") == "true" || q.Get("watch") == "1" {
		s.watch(w, r, res, ns, proto)
		return
	}
	s.list(w, res, ns, q.Get("resourceVersion"), proto)
}

// parsePath reads /api/v1[/namespaces/NS]/RESOURCE and /apis/GROUP/VERSION[/namespaces/NS]/RESOURCE.
func parsePath(p string) (*Resource, string, bool) {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	var gv schema.GroupVersion
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		gv, parts = schema.GroupVersion{Version: parts[1]}, parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		gv, parts = schema.GroupVersion{Group: parts[1], Version: parts[2]}, parts[3:]
	default:
		return nil, "", false
	}
	ns := ""
	if len(parts) == 3 && parts[0] == "namespaces" {
		ns, parts = parts[1], parts[2:]
	}
	if len(parts) != 1 {
		return nil, "", false
	}
	r, ok := resources[gv.WithResource(parts[0])]
	if !ok || (ns != "" && !r.Namespaced) {
		return nil, "", false
	}
	return r, ns, true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", ContentJSON)
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func status(w http.ResponseWriter, err apierrors.APIStatus) {
	st := err.Status()
	st.Kind, st.APIVersion = "Status", "v1"
	writeJSON(w, int(st.Code), st)
}

// matching returns the objects of the current state of a resource in a namespace ("" all),
// sorted by key; s.mu held.
func (s *Server) matching(res *Resource, ns string) []*object {
	var out []*object
	for _, o := range s.state[res] {
		if ns == "" || o.ns == ns {
			out = append(out, o)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}

// list answers a list with the current state, whatever resourceVersion is asked (the newest
// state is never older than what any client saw), in one page.
func (s *Server) list(w http.ResponseWriter, res *Resource, ns, rv string, proto bool) {
	s.mu.Lock()
	objs, cur := s.matching(res, ns), s.currentRV()
	s.lists[res.GVR.Resource]++
	if proto {
		s.protoReq++
	}
	s.mu.Unlock()
	if rv != "" && rv != "0" {
		if n, err := strconv.ParseUint(rv, 10, 64); err != nil || n > cur {
			status(w, apierrors.NewTimeoutError("Too large resource version", 1))
			return
		}
	}
	gv := res.GVR.GroupVersion()
	if !proto {
		var b bytes.Buffer
		fmt.Fprintf(&b, `{"kind":%q,"apiVersion":%q,"metadata":{"resourceVersion":"%d"},"items":[`, res.Kind+"List", gv.String(), cur)
		for i, o := range objs {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(o.json)
		}
		b.WriteString("]}\n")
		w.Header().Set("Content-Type", ContentJSON)
		_, _ = w.Write(b.Bytes())
		return
	}
	list, err := scheme.Scheme.New(gv.WithKind(res.Kind + "List"))
	if err != nil {
		status(w, apierrors.NewInternalError(err))
		return
	}
	items := make([]runtime.Object, 0, len(objs))
	for _, o := range objs {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(o.json, nil, nil)
		if err != nil {
			status(w, apierrors.NewInternalError(err))
			return
		}
		items = append(items, obj)
	}
	if err := meta.SetList(list, items); err != nil {
		status(w, apierrors.NewInternalError(err))
		return
	}
	lm, _ := meta.ListAccessor(list)
	lm.SetResourceVersion(strconv.FormatUint(cur, 10))
	list.GetObjectKind().SetGroupVersionKind(gv.WithKind(res.Kind + "List"))
	var b bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(list, &b); err != nil {
		status(w, apierrors.NewInternalError(err))
		return
	}
	w.Header().Set("Content-Type", ContentProtobuf)
	_, _ = w.Write(b.Bytes())
}

// watch streams a resource's events after the resourceVersion asked: with sendInitialEvents,
// the current state as ADDED and then a bookmark marking its end (client-go's WatchList); from
// "" or "0", the current state as ADDED; from an older resourceVersion than the server holds,
// 410 Gone. It ends at timeoutSeconds, or when the client goes.
func (s *Server) watch(w http.ResponseWriter, r *http.Request, res *Resource, ns string, proto bool) {
	q := r.URL.Query()
	rv := q.Get("resourceVersion")
	initial := q.Get("sendInitialEvents") == "true"
	bookmarks := q.Get("allowWatchBookmarks") == "true"
	timeout := time.Duration(0)
	if t, err := strconv.Atoi(q.Get("timeoutSeconds")); err == nil && t > 0 {
		timeout = time.Duration(t) * time.Second
	}
	var from uint64
	if rv != "" && rv != "0" {
		n, err := strconv.ParseUint(rv, 10, 64)
		if err != nil {
			status(w, apierrors.NewBadRequest("invalid resourceVersion "+strconv.Quote(rv)))
			return
		}
		if n < s.stream.firstRV {
			status(w, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", n, s.stream.firstRV)))
			return
		}
		from = n
	}
	if initial && rv != "" && rv != "0" {
		status(w, apierrors.NewBadRequest("sendInitialEvents needs resourceVersion \"\" or \"0\" here"))
		return
	}

	s.mu.Lock()
	me := &watcher{res: res}
	s.open[me] = true
	defer func() { s.mu.Lock(); delete(s.open, me); s.mu.Unlock() }()
	s.watches[res.GVR.Resource]++
	if proto {
		s.protoReq++
	}
	var snapshot []*object
	pos := 0 // index into s.logs[res] of the next event to send
	log := s.logs[res]
	if rv == "" || rv == "0" {
		snapshot, pos = s.matching(res, ns), len(log)
		from = s.currentRV()
	} else {
		pos = sort.Search(len(log), func(i int) bool { return s.stream.events[log[i]].rv > from })
	}
	me.written = pos
	s.mu.Unlock()

	ct := ContentJSON
	if proto {
		ct = ContentProtobuf + ";stream=watch"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Transfer-Encoding", "chunked")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	bw := bufio.NewWriterSize(w, 64<<10)
	fw := &frames{w: bw, proto: proto}
	for _, o := range snapshot {
		fw.event("ADDED", o)
	}
	last := from
	if initial {
		fw.bookmark(res, last, true)
	}
	if bw.Flush() != nil || rc.Flush() != nil {
		return
	}
	var deadline <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		deadline = t.C
	}
	tick := time.NewTicker(s.BookmarkEvery)
	defer tick.Stop()
	ctx := r.Context()
	for {
		s.mu.Lock()
		log := s.logs[res]
		batch := slices.Clone(log[pos:])
		pos = len(log)
		notify := s.notify
		done := s.released == len(s.stream.events)
		s.mu.Unlock()
		var sent []int
		for _, i := range batch {
			e := &s.stream.events[i]
			if ns != "" && e.ns != ns {
				continue
			}
			fw.event(e.typ, &e.object)
			last = e.rv
			sent = append(sent, i)
		}
		if len(batch) > 0 {
			if bw.Flush() != nil || rc.Flush() != nil {
				return
			}
			now := time.Now()
			s.mu.Lock()
			me.written = pos
			for _, i := range sent {
				s.delivery = append(s.delivery, now.Sub(s.sentAt[i]))
			}
			s.mu.Unlock()
			continue // more may have come meanwhile
		}
		if done {
			notify = nil // nothing more will come: bookmarks and the timeout only
		}
		select {
		case <-ctx.Done():
			return
		case <-deadline:
			return
		case <-notify:
		case <-tick.C:
			if bookmarks {
				s.mu.Lock()
				if pos == len(s.logs[res]) {
					last = max(last, s.currentRV()) // nothing of ours is pending: the client is current
				}
				s.mu.Unlock()
				fw.bookmark(res, last, false)
				if bw.Flush() != nil || rc.Flush() != nil {
					return
				}
			}
		}
	}
}

// frames writes watch events in the encoding the client asked for: JSON lines, or the
// apiserver's length-prefixed protobuf metav1.WatchEvent holding the object's enveloped bytes.
type frames struct {
	w     *bufio.Writer
	proto bool
	buf   []byte
}

func (f *frames) event(typ string, o *object) {
	if !f.proto {
		f.w.WriteString(`{"type":"`)
		f.w.WriteString(typ)
		f.w.WriteString(`","object":`)
		f.w.Write(o.json)
		f.w.WriteString("}\n")
		return
	}
	f.protoEvent(typ, o.proto)
}

// protoEvent writes metav1.WatchEvent{Type: typ, Object: RawExtension{Raw: raw}}: field 1 the
// type, field 2 the RawExtension, whose field 1 is the raw bytes; after a 4-byte big-endian
// length (the apiserver's LengthDelimitedFramer).
func (f *frames) protoEvent(typ string, raw []byte) {
	ext := 1 + uvarintLen(uint64(len(raw))) + len(raw)
	msg := 1 + uvarintLen(uint64(len(typ))) + len(typ) + 1 + uvarintLen(uint64(ext)) + ext
	b := f.buf[:0]
	b = binary.BigEndian.AppendUint32(b, uint32(msg))
	b = append(b, 0x0a)
	b = binary.AppendUvarint(b, uint64(len(typ)))
	b = append(b, typ...)
	b = append(b, 0x12)
	b = binary.AppendUvarint(b, uint64(ext))
	b = append(b, 0x0a)
	b = binary.AppendUvarint(b, uint64(len(raw)))
	f.buf = b
	f.w.Write(b)
	f.w.Write(raw)
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// bookmark writes a BOOKMARK: an empty object of the kind holding only the resourceVersion
// (and, ending a streamed initial list, the annotation that says so).
func (f *frames) bookmark(res *Resource, rv uint64, end bool) {
	gvk := res.GVR.GroupVersion().WithKind(res.Kind)
	ann := ""
	if end {
		ann = fmt.Sprintf(`,"annotations":{%q:"true"}`, initialEventsEnd)
	}
	js := fmt.Sprintf(`{"kind":%q,"apiVersion":%q,"metadata":{"resourceVersion":"%d"%s}}`, gvk.Kind, gvk.GroupVersion().String(), rv, ann)
	o := &object{json: []byte(js)}
	if f.proto {
		obj, err := scheme.Scheme.New(gvk)
		if err != nil {
			return
		}
		m, _ := meta.Accessor(obj)
		m.SetResourceVersion(strconv.FormatUint(rv, 10))
		if end {
			m.SetAnnotations(map[string]string{initialEventsEnd: "true"})
		}
		obj.GetObjectKind().SetGroupVersionKind(gvk)
		var b bytes.Buffer
		if protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(obj, &b) != nil {
			return
		}
		o.proto = b.Bytes()
	}
	f.event("BOOKMARK", o)
}
