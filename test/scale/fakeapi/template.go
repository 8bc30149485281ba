package fakeapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/readyspan/readyspan/watch"
)

// Template is one unit of the recorded load: the watch events of one Deployment's startup (its
// Service, ReplicaSet, Pods, their Events and its EndpointSlice), in the order and with the
// spacing the recording shows, with holes where each copy gets its own names, UIDs, times and
// resourceVersions; and the cluster's Nodes, which every copy shares.
type Template struct {
	Unit   string // the recorded Deployment's name: every name of the unit starts with it
	Pods   int    // Pod startups in the unit
	Span   time.Duration
	events []tmplEvent
	nodes  [][]part // the Nodes' last recorded state, served as the initial state
	start  time.Time
	uids   int
	// podUIDs are the unit's Pods' UIDs, by which of the unit's UIDs each is.
	podUIDs []int
}

// tmplEvent is one watch event of the unit.
type tmplEvent struct {
	res  *Resource
	typ  string
	at   time.Duration // since the unit's first event
	obj  []part
	ns   string
	name []part
	// ready is the unit's Pod that this event shows Ready first, or -1; serving are the Pods
	// whose address it shows ready first in an EndpointSlice.
	ready   int
	serving []int
}

// holeKind says what a part of a template is filled with.
type holeKind int

const (
	literal  holeKind = iota
	unitName          // the copy's name in place of Template.Unit
	uid               // the copy's kth UID
	stamp             // a time, moved with the copy
	eventHex          // an Event name's hex nanoseconds, moved with the copy
	version           // the event's resourceVersion
)

type part struct {
	kind holeKind
	lit  string
	n    int       // uid: which
	t    time.Time // stamp, eventHex: the recorded time
	frac int       // stamp: digits of the second's fraction
}

var (
	timeRE  = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$`)
	uuidRE  = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	holeRE  = regexp.MustCompile(`@@h(\d+)@@`)
	hexName = regexp.MustCompile(`^(.*)\.([0-9a-f]{15,16})$`)
)

// recorded is one line of a recording, decoded.
type recorded struct {
	res  *Resource
	typ  string
	recv time.Time
	obj  map[string]any
}

// LoadTemplate reads a recording (watch.<stream>.jsonl files of whole objects, as `ceiling record`
// writes) and makes the template of the Deployment named unit; "" takes the middle one of those
// the recording saw created, away from the load's start and end.
func LoadTemplate(dir, unit string) (*Template, error) {
	var all []recorded
	for _, r := range Recorded {
		lines, err := readStream(filepath.Join(dir, "watch."+string(r.Stream)+".jsonl"), resources[r.GVR])
		if err != nil {
			return nil, err
		}
		all = append(all, lines...)
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].recv.Before(all[j].recv) })
	if unit == "" {
		var names []string
		for _, l := range all {
			if l.res.GVR.Resource == "deployments" && l.typ == "ADDED" {
				names = append(names, nameOf(l.obj))
			}
		}
		if len(names) == 0 {
			return nil, fmt.Errorf("recording %s: no Deployment was created while it recorded", dir)
		}
		unit = names[len(names)/2]
	}
	t := &Template{Unit: unit}
	b := &builder{t: t, uids: map[string]int{}}
	// The unit's UIDs first: any string equal to one is a reference to the unit's object.
	for _, l := range all {
		if b.inUnit(l.obj) {
			if u, _ := dig(l.obj, "metadata", "uid").(string); u != "" {
				if _, ok := b.uids[u]; !ok {
					b.uids[u] = len(b.uids)
				}
			}
		}
	}
	t.uids = len(b.uids)
	pods := map[string]int{} // a Pod's UID → its index in the unit
	readySeen, servingSeen := map[int]bool{}, map[int]bool{}
	nodes := map[string]map[string]any{}
	var nodeOrder []string
	for _, l := range all {
		if l.res.GVR.Resource == "nodes" {
			if t.start.IsZero() { // the Nodes as they were when the unit started, or at the end
				n := nameOf(l.obj)
				if _, ok := nodes[n]; !ok {
					nodeOrder = append(nodeOrder, n)
				}
				nodes[n] = l.obj
				if l.typ == "DELETED" {
					delete(nodes, n)
				}
			}
			continue
		}
		if !b.inUnit(l.obj) || (l.typ != "ADDED" && l.typ != "MODIFIED" && l.typ != "DELETED") {
			continue
		}
		if t.start.IsZero() {
			t.start = l.recv
		}
		ev := tmplEvent{res: l.res, typ: l.typ, at: l.recv.Sub(t.start), ready: -1}
		ev.ns, _ = dig(l.obj, "metadata", "namespace").(string)
		ev.name = b.parts(nameOf(l.obj), true)
		switch l.res.GVR.Resource {
		case "pods":
			u, _ := dig(l.obj, "metadata", "uid").(string)
			i, ok := pods[u]
			if !ok {
				i = len(pods)
				pods[u] = i
				t.podUIDs = append(t.podUIDs, b.uids[u])
			}
			if !readySeen[i] && podReady(l.obj) {
				readySeen[i], ev.ready = true, i
			}
		case "endpointslices":
			eps, _ := l.obj["endpoints"].([]any)
			for _, e := range eps {
				u, _ := dig(e, "targetRef", "uid").(string)
				i, ok := pods[u]
				if ready, _ := dig(e, "conditions", "ready").(bool); ok && ready && !servingSeen[i] {
					servingSeen[i] = true
					ev.serving = append(ev.serving, i)
				}
			}
		}
		obj, err := b.object(l.obj)
		if err != nil {
			return nil, err
		}
		ev.obj = obj
		t.events = append(t.events, ev)
	}
	if len(t.events) == 0 {
		return nil, fmt.Errorf("recording %s holds nothing of Deployment %q", dir, unit)
	}
	t.Pods = len(pods)
	if t.Pods == 0 || len(readySeen) < t.Pods {
		return nil, fmt.Errorf("recording %s: Deployment %q started %d Pods, %d seen Ready: record until every Pod is Ready", dir, unit, t.Pods, len(readySeen))
	}
	t.Span = t.events[len(t.events)-1].at
	for _, n := range nodeOrder {
		if o, ok := nodes[n]; ok {
			p, err := b.object(o)
			if err != nil {
				return nil, err
			}
			t.nodes = append(t.nodes, p)
		}
	}
	return t, nil
}

func readStream(path string, r *Resource) ([]recorded, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil // a stream the load made nothing of
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []recorded
	rd := bufio.NewReaderSize(f, 1<<20)
	for n := 1; ; n++ {
		line, err := rd.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var l watch.Line
			if err := json.Unmarshal(line, &l); err != nil {
				return nil, fmt.Errorf("%s:%d: %w", path, n, err)
			}
			if l.Recv == nil {
				return nil, fmt.Errorf("%s:%d: no receive time: a recording of ceiling record is needed", path, n)
			}
			dec := json.NewDecoder(bytes.NewReader(l.Object))
			dec.UseNumber()
			var obj map[string]any
			if err := dec.Decode(&obj); err != nil {
				return nil, fmt.Errorf("%s:%d: object: %w", path, n, err)
			}
			if _, ok := obj["kind"]; !ok {
				return nil, fmt.Errorf("%s:%d: the object has no kind: a recording of whole objects (ceiling record) is needed, not readyspan record's", path, n)
			}
			out = append(out, recorded{res: r, typ: string(l.Type), recv: *l.Recv, obj: obj})
		}
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func nameOf(o map[string]any) string { s, _ := dig(o, "metadata", "name").(string); return s }

func dig(o any, path ...string) any {
	for _, p := range path {
		m, ok := o.(map[string]any)
		if !ok {
			return nil
		}
		o = m[p]
	}
	return o
}

func podReady(o map[string]any) bool {
	conds, _ := dig(o, "status", "conditions").([]any)
	for _, c := range conds {
		if t, _ := dig(c, "type").(string); t == "Ready" {
			s, _ := dig(c, "status").(string)
			return s == "True"
		}
	}
	return false
}

// builder turns recorded objects into templates.
type builder struct {
	t     *Template
	uids  map[string]int
	holes []part
}

func (b *builder) inUnit(o map[string]any) bool {
	n := nameOf(o)
	u := b.t.Unit
	return n == u || strings.HasPrefix(n, u+"-") || strings.HasPrefix(n, u+".")
}

// parts splits a string into literals and holes; name says it is an object's name, whose hex
// suffix (an Event's) is a time.
func (b *builder) parts(s string, name bool) []part {
	if uuidRE.MatchString(s) {
		if k, ok := b.uids[s]; ok {
			return []part{{kind: uid, n: k}}
		}
	}
	if timeRE.MatchString(s) {
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			frac := 0
			if i := strings.IndexByte(s, '.'); i >= 0 {
				frac = len(s) - i - 2
			}
			return []part{{kind: stamp, t: t, frac: frac}}
		}
	}
	var tail []part
	if m := hexName.FindStringSubmatch(s); name && m != nil {
		if ns, err := strconv.ParseInt(m[2], 16, 64); err == nil {
			s = m[1] + "."
			tail = []part{{kind: eventHex, t: time.Unix(0, ns)}}
		}
	}
	var out []part
	for {
		i := strings.Index(s, b.t.Unit)
		if i < 0 {
			break
		}
		if i > 0 {
			out = append(out, part{lit: s[:i]})
		}
		out = append(out, part{kind: unitName})
		s = s[i+len(b.t.Unit):]
	}
	if s != "" {
		out = append(out, part{lit: s})
	}
	return append(out, tail...)
}

// object makes the template of one object: its JSON with a hole for each name, UID, time and
// its own resourceVersion.
func (b *builder) object(o map[string]any) ([]part, error) {
	b.holes = b.holes[:0]
	walked := b.walk(o, nil)
	raw, err := json.Marshal(walked)
	if err != nil {
		return nil, err
	}
	var out []part
	s, prev := string(raw), 0
	for _, m := range holeRE.FindAllStringSubmatchIndex(s, -1) {
		out = append(out, part{lit: s[prev:m[0]]})
		k, _ := strconv.Atoi(s[m[2]:m[3]])
		out = append(out, b.holes[k])
		prev = m[1]
	}
	out = append(out, part{lit: s[prev:]})
	return compact(out), nil
}

func (b *builder) walk(v any, path []string) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if len(path) == 1 && path[0] == "metadata" && k == "resourceVersion" {
				out[k] = b.hole(part{kind: version})
				continue
			}
			out[k] = b.walk(e, append(path, k))
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = b.walk(e, append(path, "[]"))
		}
		return out
	case string:
		ps := b.parts(x, len(path) == 2 && path[0] == "metadata" && path[1] == "name")
		if len(ps) == 1 && ps[0].kind == literal {
			return x
		}
		var s strings.Builder
		for _, p := range ps {
			if p.kind == literal {
				// Literal pieces are JSON-escaped by Marshal; holes are marked with @@hN@@.
				s.WriteString(p.lit)
				continue
			}
			s.WriteString(b.holeMark(p))
		}
		return s.String()
	}
	return v
}

func (b *builder) hole(p part) string { return b.holeMark(p) }

func (b *builder) holeMark(p part) string {
	b.holes = append(b.holes, p)
	return fmt.Sprintf("@@h%d@@", len(b.holes)-1)
}

// compact merges adjacent literals.
func compact(ps []part) []part {
	var out []part
	for _, p := range ps {
		if p.kind == literal {
			if p.lit == "" {
				continue
			}
			if n := len(out); n > 0 && out[n-1].kind == literal {
				out[n-1].lit += p.lit
				continue
			}
		}
		out = append(out, p)
	}
	return out
}

// copyOf is what one copy of the template is rendered with.
type copyOf struct {
	name  string        // in place of the unit's name
	uids  []string      // in place of the unit's UIDs
	shift time.Duration // added to every recorded time
}

// render appends a template's object filled for one copy.
func (c *copyOf) render(dst []byte, ps []part, rv uint64) []byte {
	for _, p := range ps {
		switch p.kind {
		case literal:
			dst = append(dst, p.lit...)
		case unitName:
			dst = append(dst, c.name...)
		case uid:
			dst = append(dst, c.uids[p.n]...)
		case stamp:
			t := p.t.Add(c.shift).UTC()
			if p.frac == 0 {
				dst = t.AppendFormat(dst, "2006-01-02T15:04:05Z")
			} else {
				dst = t.AppendFormat(dst, "2006-01-02T15:04:05."+strings.Repeat("0", p.frac)+"Z")
			}
		case eventHex:
			dst = strconv.AppendInt(dst, p.t.Add(c.shift).UnixNano(), 16)
		case version:
			dst = strconv.AppendUint(dst, rv, 10)
		}
	}
	return dst
}

// Events is the number of watch events of one copy.
func (t *Template) Events() int { return len(t.events) }
