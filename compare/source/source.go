// Package source reads one side of `readyspan compare`: a recording (replayed through package
// pipeline exactly as `readyspan replay` does), a file of exported traces (`replay -o json` or
// `watch -o json` lines, or the UI API's Pod views), or a window of a live daemon's ring through
// the UI's JSON API. Everything read is bounded (bytes, Pods, spans) and treated as hostile: a
// malformed entry is an error naming where it is, never a Pod silently left out.
package source

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/readyspan/readyspan/compare"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/pipeline"
	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/watch"
	"github.com/readyspan/readyspan/web/apiclient"
)

// Bounds of what one side reads.
const (
	// MaxFileBytes bounds a file of exported traces: some 30,000 Pods' spans as JSON lines.
	MaxFileBytes = 1 << 30
	// MaxSpans bounds the spans of one Pod's trace (a real one has a few dozen, a hundred with
	// every component's spans joined).
	MaxSpans = 4096
	// maxLine bounds one JSON line of a file.
	maxLine = 16 << 20
	// maxOutcomes bounds the outcomes counted apart.
	maxOutcomes = 16
)

// adder collects the Pods of one side: those that became Ready, and the others counted by
// outcome, up to compare.MaxPods.
type adder struct {
	set compare.Set
}

// newAdder starts a side labelled label.
func newAdder(label string) *adder {
	return &adder{set: compare.Set{Label: label, NotReady: map[string]int{}}}
}

// add reduces one Pod's spans, the root first.
func (a *adder) add(spans []compare.Span) error {
	if len(a.set.Pods) >= compare.MaxPods {
		return fmt.Errorf("more than %d Pods: narrow the set", compare.MaxPods)
	}
	p, outcome, err := compare.FromSpans(spans)
	return a.addReduced(p, outcome, err)
}

// result is the side collected, its Pods in a stable order (by name).
func (a *adder) result() compare.Set {
	s := a.set
	sort.SliceStable(s.Pods, func(i, j int) bool { return s.Pods[i].Name < s.Pods[j].Name })
	return s
}

// Path reads a side from a path: a directory is a recording (replayed with cfg, as `readyspan
// replay` would with the same flags), a file exported traces.
func Path(path string, cfg tracer.Config, allowPartial bool) (compare.Set, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return compare.Set{}, err
	}
	label := filepath.Base(filepath.Clean(path))
	if fi.IsDir() {
		return Recording(path, label, cfg, allowPartial)
	}
	f, err := os.Open(path)
	if err != nil {
		return compare.Set{}, err
	}
	defer f.Close()
	return File(f, label)
}

// Recording replays a recording as `readyspan replay` does and reduces its Pod traces. A
// recording with unreadable lines is refused unless allowPartial: its Pods would be missing,
// not marked.
func Recording(dir, label string, cfg tracer.Config, allowPartial bool) (compare.Set, error) {
	deltas, err := tracer.Kinds.LoadRecording(dir)
	var le *watch.LoadError
	if err != nil && (!errors.As(err, &le) || !allowPartial) {
		return compare.Set{}, fmt.Errorf("read recording %s: %w", label, err)
	}
	add := newAdder(label)
	var addErr error
	pipeline.Replay(pipeline.Options{Trace: cfg}, deltas, pipeline.Sinks{
		Pods: tracer.SinkFunc(func(t *phases.Trace) {
			if addErr == nil {
				p, outcome, err := compare.FromTrace(t)
				addErr = add.addReduced(p, outcome, err)
			}
		}),
	})
	if addErr != nil {
		return compare.Set{}, fmt.Errorf("recording %s: %w", label, addErr)
	}
	return add.result(), nil
}

func (a *adder) addReduced(p compare.Pod, outcome string, err error) error {
	switch {
	case errors.Is(err, compare.ErrNotReady):
		// Outcomes are a handful of words; a hostile file's are bounded in number.
		if len(a.set.NotReady) >= maxOutcomes && a.set.NotReady[outcome] == 0 {
			outcome = "other"
		}
		a.set.NotReady[outcome]++
		return nil
	case err != nil:
		return err
	case len(a.set.Pods) >= compare.MaxPods:
		return fmt.Errorf("more than %d Pods: narrow the set", compare.MaxPods)
	}
	a.set.Pods = append(a.set.Pods, p)
	return nil
}

// jsonSpan is a span line of `-o json` (exporters/terminal.JSONSpan): the fields read.
type jsonSpan struct {
	TraceID    string         `json:"trace_id"`
	SpanID     string         `json:"span_id"`
	ParentID   string         `json:"parent_span_id"`
	Name       string         `json:"name"`
	Start      time.Time      `json:"start"`
	End        time.Time      `json:"end"`
	DurationMs *float64       `json:"duration_ms"`
	Attributes map[string]any `json:"attributes"`
}

// podView is a Pod's view of the UI's API (web.PodView): the fields read.
type podView struct {
	UID     string `json:"uid"`
	Outcome string `json:"outcome"`
	Spans   []struct {
		Name  string         `json:"name"`
		Depth int            `json:"depth"`
		DurMs *float64       `json:"durMs"`
		Attrs map[string]any `json:"attrs"`
	} `json:"spans"`
}

// File reads exported traces: JSON values one after another, each a span line of `-o json`
// (Pod traces' spans; rollouts' and nodes' are skipped), a Pod's view of the UI's API
// (GET /api/v1/pods/UID), or an array of such views.
func File(r io.Reader, label string) (compare.Set, error) {
	lr := &io.LimitedReader{R: r, N: MaxFileBytes + 1}
	dec := json.NewDecoder(bufio.NewReaderSize(lr, 1<<16))
	dec.UseNumber()
	traces := newTraceLines()
	add := newAdder(label)
	for n := 1; ; n++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err == io.EOF {
			break
		} else if err != nil {
			return compare.Set{}, fmt.Errorf("%s: value %d: %w", label, n, err)
		}
		if lr.N <= 0 {
			return compare.Set{}, fmt.Errorf("%s: more than %d bytes", label, MaxFileBytes)
		}
		if len(raw) > maxLine {
			return compare.Set{}, fmt.Errorf("%s: value %d: more than %d bytes", label, n, maxLine)
		}
		if err := fileValue(raw, traces, add); err != nil {
			return compare.Set{}, fmt.Errorf("%s: value %d: %w", label, n, err)
		}
	}
	if err := traces.flush(add); err != nil {
		return compare.Set{}, fmt.Errorf("%s: %w", label, err)
	}
	return add.result(), nil
}

// fileValue files one JSON value of a file: an array of views, a view, or a span line.
func fileValue(raw json.RawMessage, traces *traceLines, add *adder) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '[' {
		var views []podView
		if err := decodeNumbers(raw, &views); err != nil {
			return err
		}
		for i := range views {
			if err := addView(&views[i], add); err != nil {
				return fmt.Errorf("view %d: %w", i+1, err)
			}
		}
		return nil
	}
	var probe struct {
		Spans   json.RawMessage `json:"spans"`
		TraceID string          `json:"trace_id"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return err
	}
	switch {
	case probe.Spans != nil:
		var v podView
		if err := decodeNumbers(raw, &v); err != nil {
			return err
		}
		return addView(&v, add)
	case probe.TraceID != "":
		var s jsonSpan
		if err := decodeNumbers(raw, &s); err != nil {
			return err
		}
		return traces.add(&s)
	}
	return errors.New("neither a span line (trace_id) nor a Pod's view (spans)")
}

// decodeNumbers decodes as the daemon's answers are decoded.
var decodeNumbers = apiclient.DecodeNumbers

// addView reduces a Pod's view: its rows in tree order, the root first.
func addView(v *podView, add *adder) error {
	if len(v.Spans) > MaxSpans {
		return fmt.Errorf("the Pod with UID %q: more than %d spans", cutName(v.UID), MaxSpans)
	}
	spans := make([]compare.Span, 0, len(v.Spans))
	for i, s := range v.Spans {
		if s.DurMs == nil {
			return fmt.Errorf("the Pod with UID %q: span %d has no durMs", cutName(v.UID), i+1)
		}
		spans = append(spans, compare.Span{Name: s.Name, Duration: msDuration(*s.DurMs), Attrs: attrs(s.Attrs)})
	}
	if len(spans) > 0 && spans[0].Attrs[phases.AttrOutcome] == nil {
		// The view states its outcome beside its rows, not on the root's attributes.
		spans[0].Attrs[phases.AttrOutcome] = v.Outcome
	}
	return add.add(spans)
}

// attrs converts decoded attributes: JSON numbers to float64, the rest as decoded. A size the
// UI printed ("34.7 MB") is read back to bytes.
func attrs(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		switch x := v.(type) {
		case json.Number:
			f, err := x.Float64()
			if err == nil {
				out[k] = f
			}
		case string:
			out[k] = x
			if k == phases.AttrImageSize {
				if n, ok := parseSize(x); ok {
					out[k] = n
				}
			}
		case bool:
			out[k] = x
		}
	}
	return out
}

// parseSize reads a size as web's megabytes prints it: "812.0 kB", "34.7 MB", "1.25 GB".
func parseSize(s string) (float64, bool) {
	var n float64
	var unit string
	if _, err := fmt.Sscanf(s, "%g %s", &n, &unit); err != nil || n < 0 {
		return 0, false
	}
	mult := map[string]float64{"kB": 1e3, "MB": 1e6, "GB": 1e9}[unit]
	return n * mult, mult > 0
}

func msDuration(ms float64) time.Duration {
	if ms != ms || ms < 0 || ms > 1e12 {
		return -1 // refused by compare.FromSpans's checks of each span
	}
	return time.Duration(ms * float64(time.Millisecond))
}

var cutName = apiclient.Cut
