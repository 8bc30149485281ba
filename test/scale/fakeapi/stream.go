package fakeapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"runtime"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
)

// object is one object as served: its JSON and, when the stream has it, its protobuf (with the
// "k8s\0" envelope, as the apiserver sends it).
type object struct {
	res   *Resource
	ns    string
	key   string // namespace/name
	rv    uint64
	json  []byte
	proto []byte
}

// event is one watch event of a stream.
type event struct {
	object
	typ string
	at  time.Duration // since the stream's start
}

// Options choose a stream.
type Options struct {
	Rate     float64       // Pod startups per second
	Duration time.Duration // copies start over this long; the stream ends a template's span later
	Protobuf bool          // encode protobuf too (JSON always)
	// Base is the time the stream's first copy starts at, in the objects' timestamps; its
	// events are sent relative to when the server starts, whatever Base is.
	Base time.Time
	// ID tells this stream's UIDs from another's: each stream's objects are new objects.
	ID uint32
}

// Stream is a generated, encoded stream of watch events: copies of a template started at a rate.
type Stream struct {
	events  []event
	initial []object // before the first event: the Nodes
	firstRV uint64   // the resourceVersion of the initial state
	// Pods are the stream's Pod startups: which event shows each Ready and which its address
	// ready in an EndpointSlice (indexes into the events, -1 for none).
	Pods     []PodStartup
	Startups int
	Duration time.Duration // from the first event to the last
	Protobuf bool
}

// PodStartup is one Pod the stream starts.
type PodStartup struct {
	UID            string
	Ready, Serving int
}

// Len is the number of watch events in the stream.
func (s *Stream) Len() int { return len(s.events) }

// initialRV is the resourceVersion of the state before the stream's first event.
const initialRV = 1000

// Generate makes the stream of copies of t started at opts.Rate over opts.Duration, each copy a
// new Deployment with the recorded timing, encoded in both encodings when opts.Protobuf.
func Generate(t *Template, opts Options) (*Stream, error) {
	if opts.Rate <= 0 || opts.Duration <= 0 {
		return nil, fmt.Errorf("rate %g and duration %s must be positive", opts.Rate, opts.Duration)
	}
	copies := int(math.Ceil(opts.Rate * opts.Duration.Seconds() / float64(t.Pods)))
	every := time.Duration(float64(t.Pods) / opts.Rate * float64(time.Second))
	s := &Stream{Protobuf: opts.Protobuf, Startups: copies * t.Pods, firstRV: initialRV}
	type slot struct {
		copy, ev int
		at       time.Duration
	}
	slots := make([]slot, 0, copies*len(t.events))
	for c := 0; c < copies; c++ {
		for i, e := range t.events {
			slots = append(slots, slot{c, i, time.Duration(c)*every + e.at})
		}
	}
	sort.SliceStable(slots, func(i, j int) bool { return slots[i].at < slots[j].at })
	cs := make([]copyOf, copies)
	for c := range cs {
		cs[c] = copyOf{name: fmt.Sprintf("ceil%d-%06d", opts.ID%1000, c), shift: opts.Base.Sub(t.start) + time.Duration(c)*every}
		cs[c].uids = make([]string, t.uids)
		for k := range cs[c].uids {
			cs[c].uids[k] = fmt.Sprintf("%08x-%04x-4000-8000-%012x", opts.ID, k, c)
		}
	}
	s.events = make([]event, len(slots))
	podIndex := map[[2]int]int{} // copy, the template's Pod → PodStartup
	pod := func(c, p int) *PodStartup {
		i, ok := podIndex[[2]int{c, p}]
		if !ok {
			i = len(s.Pods)
			podIndex[[2]int{c, p}] = i
			s.Pods = append(s.Pods, PodStartup{Ready: -1, Serving: -1})
		}
		return &s.Pods[i]
	}
	for i, sl := range slots {
		e := &t.events[sl.ev]
		if e.ready >= 0 {
			pod(sl.copy, e.ready).Ready = i
		}
		for _, p := range e.serving {
			pod(sl.copy, p).Serving = i
		}
	}
	for key, i := range podIndex {
		s.Pods[i].UID = cs[key[0]].uids[t.podUIDs[key[1]]]
	}
	// Render in parallel: each event's text depends only on its copy and its resourceVersion.
	var enc *protobuf.Serializer
	if opts.Protobuf {
		enc = protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	}
	workers := runtime.GOMAXPROCS(0)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(slots); i += workers {
				sl, e := slots[i], &t.events[slots[i].ev]
				c := &cs[sl.copy]
				rv := initialRV + uint64(i) + 1
				ev := &s.events[i]
				ev.typ, ev.at, ev.res, ev.ns, ev.rv = e.typ, sl.at, e.res, e.ns, rv
				ev.key = e.ns + "/" + string(c.render(nil, e.name, rv))
				ev.json = c.render(make([]byte, 0, 4096), e.obj, rv)
				if enc != nil {
					p, err := toProto(enc, ev.json)
					if err != nil && errs[w] == nil {
						errs[w] = fmt.Errorf("%s %s: %w", e.res.GVR.Resource, ev.key, err)
					}
					ev.proto = p
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	if n := len(s.events); n > 0 {
		s.Duration = s.events[n-1].at
	}
	// The Nodes, as the first copy saw them.
	nodes := mustLookup("", "v1", "nodes")
	res := resources[nodes.GVR]
	for i, n := range t.nodes {
		rv := uint64(initialRV - len(t.nodes) + i)
		o := object{res: res, rv: rv, json: cs[0].render(nil, n, rv)}
		o.key = "/" + nameFromJSON(o.json)
		if enc != nil {
			p, err := toProto(enc, o.json)
			if err != nil {
				return nil, fmt.Errorf("node: %w", err)
			}
			o.proto = p
		}
		s.initial = append(s.initial, o)
	}
	return s, nil
}

// nameFromJSON reads an object's name.
func nameFromJSON(b []byte) string {
	var o struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(b, &o)
	return o.Metadata.Name
}

// toProto encodes an object's JSON as the apiserver's protobuf, in its envelope.
func toProto(enc *protobuf.Serializer, js []byte) ([]byte, error) {
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(js, nil, nil)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := enc.Encode(obj, &b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
