package watch

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
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// A recording is a directory with one file per watched stream:
//
//	watch.<stream>.jsonl   one watch event per line: {"type":"ADDED","object":{…},"recv":"…"}
//	<stream>.json          a List snapshot (kubectl get -o json), used when no watch file exists
//
// audit.jsonl, if present, holds kube-apiserver audit log lines (the log backend's JSON lines).
//
// "recv" is readyspan's local receive time (RFC 3339, nanoseconds) and "initial" marks objects
// of the initial list. Recordings without "recv" (captured with curl ?watch=1) are replayed in
// resourceVersion order with object and event timestamps only.
//
// Streams: one per Kind of the Registry, named after its resource (but for views of one
// resource through two APIs, such as the Events of core/v1 and events.k8s.io/v1). A file of a
// stream the registry does not name is not read.

// Stream is one recorded stream: a resource read through one API.
type Stream string

// StreamFor returns the stream an object is recorded in.
func (r *Registry) StreamFor(obj runtime.Object) (Stream, bool) {
	k, ok := r.OfObject(obj)
	if !ok {
		return "", false
	}
	return k.Stream, true
}

// Line is one recorded watch event.
type Line struct {
	Type    DeltaType       `json:"type"`
	Object  json.RawMessage `json:"object"`
	Recv    *time.Time      `json:"recv,omitempty"`
	Initial bool            `json:"initial,omitempty"`
	// FinalStateUnknown: a deletion a relist found; the object holds its identity only.
	FinalStateUnknown bool `json:"finalStateUnknown,omitempty"`
}

// maxLineBytes is the longest line of a recording that is read; a longer one is skipped whole
// and counted. Real lines are far shorter (etcd refuses objects over 1.5 MiB by default), but
// a recording is a bug report from anyone: without a bound, one endless line would take all
// the memory there is. A variable so that tests can lower it.
var maxLineBytes = 256 << 20

// maxQuoted bounds how much of a recording's content one message quotes.
const maxQuoted = 80

// Problem is one part of a recording that loading skipped: a line of a watch or audit file, an
// item of a List snapshot, or a whole file.
type Problem struct {
	Path string // the file
	Line int    // 1-based line of a .jsonl file, or 0
	Item int    // 1-based item of a List snapshot, or 0
	Why  string // bounded and free of control bytes: safe to print
}

func (p Problem) String() string {
	switch {
	case p.Line > 0:
		return fmt.Sprintf("%s:%d: %s", printable(p.Path, 0), p.Line, p.Why)
	case p.Item > 0:
		return fmt.Sprintf("%s: items[%d]: %s", printable(p.Path, 0), p.Item-1, p.Why)
	}
	return fmt.Sprintf("%s: %s", printable(p.Path, 0), p.Why)
}

// LoadError lists what LoadRecording skipped: lines it could not read and objects it refused.
// Loading goes on past them, since one bad line must not lose the rest of a bug report; the
// caller decides whether a partial recording is good enough.
type LoadError struct {
	Problems []Problem
}

func (e *LoadError) Error() string {
	if len(e.Problems) == 1 {
		return "skipped 1 entry: " + e.Problems[0].String()
	}
	// Per file, in the order met: how many and where (the first few places).
	const places = 5
	type file struct {
		n            int
		lines, items []string
		whole        bool
	}
	var order []string
	files := map[string]*file{}
	for _, p := range e.Problems {
		f := files[p.Path]
		if f == nil {
			f = &file{}
			files[p.Path] = f
			order = append(order, p.Path)
		}
		f.n++
		switch {
		case len(f.lines)+len(f.items) >= places:
		case p.Line > 0:
			f.lines = append(f.lines, strconv.Itoa(p.Line))
		case p.Item > 0:
			f.items = append(f.items, fmt.Sprintf("items[%d]", p.Item-1))
		default:
			f.whole = true
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "skipped %d entries (", len(e.Problems))
	for i, path := range order {
		f := files[path]
		if i > 0 {
			b.WriteString("; ")
		}
		var where []string
		if f.whole {
			where = append(where, "the whole file")
		}
		if len(f.lines) == 1 {
			where = append(where, "line "+f.lines[0])
		} else if len(f.lines) > 1 {
			where = append(where, "lines "+strings.Join(f.lines, ", "))
		}
		where = append(where, f.items...)
		if f.n > len(f.lines)+len(f.items) && !(f.whole && f.n == 1) {
			where = append(where, "…")
		}
		fmt.Fprintf(&b, "%d in %s: %s", f.n, printable(filepath.Base(path), 0), strings.Join(where, ", "))
	}
	fmt.Fprintf(&b, "); first: %s", e.Problems[0])
	return b.String()
}

// LoadRecording reads a recording directory into Deltas in replay order. It returns the deltas
// it could read together with a *LoadError listing what it skipped. A directory in which no
// file holds anything of a recording (only garbage, only empty files) is an error, not a
// recording with nothing in it.
func (r *Registry) LoadRecording(dir string) ([]Delta, error) {
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("recording: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("recording %s is not a directory", printable(dir, 0))
	}
	var deltas []Delta
	var problems []Problem
	var found []string // what each stream file held, for the error if none held a recording
	recognised := 0    // watch events and List snapshots of the right kind
	allRecv := true
	var snapshots []Delta
	for _, s := range r.snapshotOrder {
		watchPath := filepath.Join(dir, "watch."+string(s)+".jsonl")
		if f, err := os.Open(watchPath); err == nil {
			w := r.readWatch(f, s, watchPath)
			f.Close()
			deltas = append(deltas, w.deltas...)
			problems = append(problems, w.problems...)
			allRecv = allRecv && w.allRecv
			recognised += w.events
			found = append(found, foundText(filepath.Base(watchPath), w.lines, w.events, "watch event"))
			continue
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("open %s: %w", printable(watchPath, 0), err)
		}
		listPath := filepath.Join(dir, string(s)+".json")
		b, err := os.ReadFile(listPath)
		if errors.Is(err, os.ErrNotExist) {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("read %s: %w", printable(listPath, 0), err)
		}
		ds, probs, err := r.readList(b, s, listPath)
		if err != nil {
			problems = append(problems, Problem{Path: listPath, Why: err.Error()})
			if len(bytes.TrimSpace(b)) == 0 {
				found = append(found, filepath.Base(listPath)+" (empty)")
			} else {
				found = append(found, filepath.Base(listPath)+" (not a List)")
			}
			continue
		}
		recognised++
		found = append(found, fmt.Sprintf("%s (a List of %d)", filepath.Base(listPath), len(ds)+len(probs)))
		snapshots = append(snapshots, ds...)
		problems = append(problems, probs...)
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("%s is not a readyspan recording: no watch.<stream>.jsonl or <stream>.json files (streams: %s)", printable(dir, 0), r.streamNames())
	}
	if recognised == 0 {
		msg := fmt.Sprintf("%s is not a readyspan recording: found %s", printable(dir, 0), strings.Join(found, ", "))
		if len(problems) > 0 {
			msg += "; first: " + problems[0].String()
		}
		return nil, errors.New(msg)
	}
	audit, probs, err := r.readAuditFile(filepath.Join(dir, "audit.jsonl"))
	if err != nil {
		return nil, err
	}
	problems = append(problems, probs...)
	out := append(audit, inReplayOrder(snapshots, deltas, allRecv)...)
	if len(problems) > 0 {
		return out, &LoadError{Problems: problems}
	}
	return out, nil
}

// inReplayOrder puts the List snapshots first, then the watch streams' initial lists (they come
// before the changes that follow them, as in a live watch), then their changes: by receive time
// when every change has one, else by etcd revision across all resources.
func inReplayOrder(snapshots, deltas []Delta, allRecv bool) []Delta {
	var initial []Delta
	live := deltas[:0]
	for _, d := range deltas {
		if d.Initial {
			initial = append(initial, d)
		} else {
			live = append(live, d)
		}
	}
	snapshots = append(snapshots, initial...)
	deltas = live
	if allRecv {
		sort.SliceStable(deltas, func(i, j int) bool { return deltas[i].Recv.Before(deltas[j].Recv) })
	} else {
		for i := range deltas {
			deltas[i].Recv = time.Time{}
		}
		sort.SliceStable(deltas, func(i, j int) bool { return rvOf(deltas[i].Object) < rvOf(deltas[j].Object) })
	}
	return append(snapshots, deltas...)
}

// foundText describes a stream file for the error that says a directory is not a recording.
func foundText(name string, lines, events int, what string) string {
	switch {
	case lines == 0:
		return name + " (empty)"
	case events == 0:
		return fmt.Sprintf("%s (%d lines, none a %s)", name, lines, what)
	}
	return fmt.Sprintf("%s (%d lines, %d of them %ss)", name, lines, events, what)
}

func (r *Registry) streamNames() string {
	names := make([]string, len(r.snapshotOrder))
	for i, s := range r.snapshotOrder {
		names[i] = string(s)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func rvOf(o runtime.Object) uint64 {
	type rv interface{ GetResourceVersion() string }
	if m, ok := o.(rv); ok {
		n, _ := strconv.ParseUint(m.GetResourceVersion(), 10, 64)
		return n
	}
	return 0
}

// lineReader reads the lines of a recording file whatever their length, up to maxLineBytes:
// a bufio.Scanner stops for good at its first line over its buffer, losing the rest of the
// file.
type lineReader struct {
	r   *bufio.Reader
	n   int // the number of the line last returned
	buf []byte
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64*1024)}
}

// next returns the next line, without its line end, valid until the following call. A line
// over maxLineBytes is read to its end and dropped: next returns tooLong and its size. At the
// end of the input it returns io.EOF.
func (lr *lineReader) next() (line []byte, tooLong bool, size int, err error) {
	if cap(lr.buf) > 1<<20 {
		lr.buf = nil // one long line must not keep its memory for the rest of the file
	}
	lr.buf = lr.buf[:0]
	for {
		chunk, err := lr.r.ReadSlice('\n')
		size += len(chunk)
		if !tooLong && size > maxLineBytes {
			tooLong, lr.buf = true, nil
		}
		if !tooLong {
			lr.buf = append(lr.buf, chunk...)
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && size == 0:
			return nil, false, 0, io.EOF
		case err != nil && !errors.Is(err, io.EOF):
			return nil, false, size, err
		}
		lr.n++
		return bytes.TrimRight(lr.buf, "\r\n"), tooLong, size, nil
	}
}

// watchFile is what one watch.<stream>.jsonl file held.
type watchFile struct {
	deltas   []Delta
	problems []Problem
	allRecv  bool // every change has a receive time
	lines    int  // non-blank lines
	events   int  // lines that are watch events of the stream's kind, bookmarks included
}

func (r *Registry) readWatch(in io.Reader, s Stream, path string) watchFile {
	w := watchFile{allRecv: true}
	k, err := r.Of(s)
	if err != nil {
		w.problems = append(w.problems, Problem{Path: path, Why: printable(err.Error(), 6*maxQuoted)})
		return w
	}
	skip := func(n int, format string, args ...any) {
		w.problems = append(w.problems, Problem{Path: path, Line: n, Why: printable(fmt.Sprintf(format, args...), 6*maxQuoted)})
	}
	lr := newLineReader(in)
	for {
		raw, tooLong, size, err := lr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			skip(lr.n+1, "read: %v (the rest of the file is lost)", err)
			break
		}
		if tooLong {
			w.lines++
			skip(lr.n, "line of %d bytes, over the limit of %d MiB", size, maxLineBytes>>20)
			continue
		}
		text := bytes.TrimSpace(raw)
		if len(text) == 0 {
			continue
		}
		w.lines++
		var l Line
		if err := json.Unmarshal(text, &l); err != nil {
			skip(lr.n, "not a watch event: %v (line starts %s)", err, quoteStart(text))
			continue
		}
		switch l.Type {
		case Added, Modified, Deleted:
		case "BOOKMARK", "ERROR":
			w.events++
			continue
		default:
			skip(lr.n, "unknown watch event type %s", quoteStart([]byte(l.Type)))
			continue
		}
		obj := k.NewObject()
		if err := json.Unmarshal(l.Object, obj); err != nil {
			skip(lr.n, "object is not a %s: %v", k.Kind, err)
			continue
		}
		if why := k.refuse(obj); why != "" {
			skip(lr.n, "%s", why)
			continue
		}
		w.events++
		d := Delta{Resource: k.Resource, Type: l.Type, Object: obj, Initial: l.Initial, FinalStateUnknown: l.FinalStateUnknown}
		if l.Recv != nil {
			d.Recv = *l.Recv
		} else {
			w.allRecv = false
		}
		w.deltas = append(w.deltas, d)
	}
	return w
}

// readList reads a List snapshot. An unreadable file, or a List of another kind, is an error;
// an item that is not an object of the stream's kind is a Problem and is skipped.
func (r *Registry) readList(b []byte, s Stream, path string) ([]Delta, []Problem, error) {
	k, err := r.Of(s)
	if err != nil {
		return nil, nil, err
	}
	var list struct {
		Kind  string            `json:"kind"`
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, nil, fmt.Errorf("not a List: %s", printable(err.Error(), 6*maxQuoted))
	}
	// kubectl get -o json writes "List"; the API itself, <Kind>List.
	if lk := list.Kind; lk != "" && lk != "List" && lk != k.Kind+"List" {
		return nil, nil, fmt.Errorf("a %s, not a %sList", quoteStart([]byte(lk)), k.Kind)
	}
	var problems []Problem
	out := make([]Delta, 0, len(list.Items))
	for i, raw := range list.Items {
		obj := k.NewObject()
		why := ""
		if err := json.Unmarshal(raw, obj); err != nil {
			why = fmt.Sprintf("not a %s: %v", k.Kind, err)
		} else {
			why = k.refuse(obj)
		}
		if why != "" {
			problems = append(problems, Problem{Path: path, Item: i + 1, Why: printable(why, 6*maxQuoted)})
			continue
		}
		out = append(out, Delta{Resource: k.Resource, Type: Added, Object: obj, Initial: true})
	}
	return out, problems, nil
}

// refuse says why a decoded object does not belong in the stream, or returns "". JSON decodes
// any object into any struct, so a Node in the Pods' file would otherwise become a Pod with no
// namespace, and every object without a UID would share the trace ID of the empty UID. Objects
// that name no kind (informers drop TypeMeta) are taken as the stream's; each of its kinds has
// a UID.
func (k *Kind) refuse(obj runtime.Object) string {
	tm, ok := obj.(interface {
		GetObjectKind() schema.ObjectKind
		GetUID() types.UID
	})
	if !ok {
		return fmt.Sprintf("%T is not an API object", obj)
	}
	gvk := tm.GetObjectKind().GroupVersionKind()
	apiVersion, kind := gvk.ToAPIVersionAndKind()
	if kind != "" && kind != k.Kind {
		return fmt.Sprintf("a %s object in the %s stream, which holds %ss", quoteStart([]byte(kind)), k.Stream, k.Kind)
	}
	if apiVersion != "" {
		gv, err := schema.ParseGroupVersion(apiVersion)
		if err != nil || gv.Group != k.GVR.Group || !apiVersionPattern.MatchString(gv.Version) {
			return fmt.Sprintf("apiVersion %s in the %s stream, which holds %s", quoteStart([]byte(apiVersion)), k.Stream, k.apiName())
		}
	}
	if tm.GetUID() == "" {
		return fmt.Sprintf("a %s without metadata.uid", k.Kind)
	}
	return ""
}

// apiVersionPattern is what a Kubernetes API version looks like (v1, v1beta2, v2alpha1).
var apiVersionPattern = regexp.MustCompile(`^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$`)

// apiName is the stream's kind with its group, as an error names it.
func (k *Kind) apiName() string {
	if g := k.GVR.Group; g != "" {
		return k.Kind + "s of " + g
	}
	return k.Kind + "s of the core API"
}

// quoteStart quotes at most maxQuoted bytes of b, escaped: recordings come from anyone, and what a
// message quotes reaches a terminal.
func quoteStart(b []byte) string {
	if len(b) <= maxQuoted {
		return strconv.Quote(string(b))
	}
	cut := maxQuoted
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return strconv.Quote(string(b[:cut])) + "…"
}

// printable bounds s to max bytes (0: no bound) and shows what is not printable (control
// bytes, invalid UTF-8, bidi overrides) as Go escapes, so an error message that carries content
// from a recording (through a decoder's error, say) cannot drive the terminal it is printed on.
func printable(s string, max int) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		if max > 0 && b.Len() >= max {
			b.WriteString("…")
			break
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case strconv.IsPrint(r):
			b.WriteRune(r)
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
	return b.String()
}

func (r *Registry) readAuditFile(path string) ([]Delta, []Problem, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	} else if err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", printable(path, 0), err)
	}
	defer f.Close()
	var out []Delta
	var problems []Problem
	lr := newLineReader(f)
	for {
		line, tooLong, size, err := lr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return out, problems, fmt.Errorf("read %s: %w", printable(path, 0), err)
		}
		if tooLong {
			problems = append(problems, Problem{Path: path, Line: lr.n, Why: fmt.Sprintf("line of %d bytes, over the limit of %d MiB", size, maxLineBytes>>20)})
			continue
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		a, err := r.ParseAuditLine(line)
		if err != nil {
			problems = append(problems, Problem{Path: path, Line: lr.n, Why: printable(err.Error(), 6*maxQuoted)})
			continue
		}
		if a != nil {
			out = append(out, Delta{Resource: ResourceAudit, Type: Added, Audit: a})
		}
	}
	return out, problems, nil
}
