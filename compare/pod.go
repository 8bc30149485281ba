package compare

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/readyspan/readyspan/phases"
)

// Dim is a dimension two sets of Pods may differ in.
type Dim int

// The dimensions, in the order a tie between dimensions that explain a shift equally (they are
// confounded) names them: the nearest cause first, the set a Pod merely belongs to last.
const (
	DimImageCache Dim = iota
	DimImage
	DimKubelet
	DimRuntime
	DimWebhooks
	DimScheduler
	DimNodePool
	DimNode
	DimNamespace
	numDims
)

// dimInfo names a dimension in JSON (key) and in sentences (words).
var dimInfo = [numDims]struct{ key, words string }{
	DimImageCache: {"image_cache", "image cache"},
	DimImage:      {"image", "image"},
	DimKubelet:    {"kubelet_version", "kubelet version"},
	DimRuntime:    {"container_runtime", "container runtime"},
	DimWebhooks:   {"webhooks", "admission webhooks"},
	DimScheduler:  {"scheduler", "scheduler"},
	DimNodePool:   {"node_pool", "node pool"},
	DimNode:       {"node", "node"},
	DimNamespace:  {"namespace", "namespace"},
}

// Key is the dimension's name in JSON output.
func (d Dim) Key() string { return dimInfo[d].key }

// Words is the dimension's name in a sentence.
func (d Dim) Words() string { return dimInfo[d].words }

// Unknown is the value of a dimension a Pod's trace does not state (a trace built without the
// Nodes carries no kubelet version).
const Unknown = "unknown"

// Bounds of what one Pod contributes: a value's length, the images named in one value.
const (
	maxValue  = 128
	maxImages = 4
)

// Pod is one Pod's startup as compared: its length (created → Ready), the time spent in each
// span name (the sum over its spans of that name: a Pod with two containers pulls twice), its
// value of each dimension, and the bytes of the images it pulled (0: none stated).
//
// Uncertain holds, per span name (the root's included), how far the time stated may lie from the
// true one: the sum over its spans of each one's stated uncertainty (readyspan.time.uncertainty.*: a
// whole-second stamp is ±1 s). Intervals widen by it, so a shift smaller than the stamps can
// tell is never called significant.
type Pod struct {
	Name      string // namespace/name, for the report
	Startup   time.Duration
	Spans     map[string]time.Duration
	Uncertain map[string]time.Duration
	Dims      [numDims]string
	ImageSize int64
	// Run is the rollout that started the Pod: its namespace and the ReplicaSet, StatefulSet,
	// DaemonSet or Job that owns it; "" when the trace names none (a bare Pod). Pods of one run
	// start together on the same nodes' load, so they are not independent draws of a setup: the
	// intervals resample runs, and a side of one run cannot tell a setup from a run.
	Run string
}

// Span is one span of a Pod's trace as every input states it: the trace in memory, a JSON line
// of `-o json`, a row of the UI's API.
type Span struct {
	Name     string
	Duration time.Duration
	Attrs    map[string]any
}

// ErrNotReady is returned for a trace that did not end Ready: it has no startup to compare.
var ErrNotReady = errors.New("the Pod did not become Ready")

// FromTrace reduces a trace built in memory (a recording replayed).
func FromTrace(t *phases.Trace) (Pod, string, error) {
	spans := make([]Span, len(t.Spans))
	for i := range t.Spans {
		s := &t.Spans[i]
		attrs := map[string]any{}
		for _, a := range s.AllAttrs() {
			attrs[a.Key] = a.Value
		}
		spans[i] = Span{Name: s.Name, Duration: s.Duration(), Attrs: attrs}
	}
	return FromSpans(spans)
}

// FromSpans reduces a Pod's trace given as its spans, the root (pod.startup) first. It returns
// the Pod's outcome, and ErrNotReady for a Pod that did not become Ready. Span names outside the
// catalogue (a hostile file's) are not compared; every string kept is bounded.
func FromSpans(spans []Span) (Pod, string, error) {
	if len(spans) == 0 || spans[0].Name != phases.RootSpanName {
		return Pod{}, "", fmt.Errorf("a Pod trace starts with its %s span", phases.RootSpanName)
	}
	root := spans[0]
	outcome := bounded(str(root.Attrs[phases.AttrOutcome]))
	if outcome != string(phases.OutcomeReady) {
		return Pod{}, outcome, ErrNotReady
	}
	if root.Duration < 0 {
		return Pod{}, outcome, errors.New("the Pod's startup has a negative length")
	}
	p := Pod{Startup: root.Duration, Spans: map[string]time.Duration{}, Uncertain: map[string]time.Duration{}}
	p.Uncertain[phases.RootSpanName] = uncertainty(root.Attrs)
	ns, name := bounded(str(root.Attrs[phases.AttrNamespace])), bounded(str(root.Attrs[phases.AttrPodName]))
	p.Name = ns + "/" + name
	p.Dims[DimNamespace] = ns
	p.Dims[DimNode] = bounded(str(root.Attrs[phases.AttrNodeName]))
	p.Dims[DimKubelet] = bounded(str(root.Attrs[phases.AttrKubeletVersion]))
	p.Dims[DimRuntime] = bounded(strings.TrimSpace(str(root.Attrs[phases.AttrRuntimeName]) + " " + str(root.Attrs[phases.AttrRuntimeVersion])))
	p.Dims[DimScheduler] = bounded(str(root.Attrs[phases.AttrSchedulerName]))
	p.Dims[DimNodePool] = bounded(str(root.Attrs[phases.AttrNodePoolName]))
	p.Run = runOf(ns, root.Attrs)
	var cache, images, hooks []string
	for _, s := range spans[1:] {
		if !compared(s.Name) || s.Duration < 0 {
			continue
		}
		p.Spans[s.Name] += s.Duration
		p.Uncertain[s.Name] += uncertainty(s.Attrs)
		switch s.Name {
		case phases.SpanImagePull:
			cache = append(cache, str(s.Attrs[phases.AttrImageCache]))
			images = append(images, str(s.Attrs[phases.AttrImageName]))
			if n, ok := number(s.Attrs[phases.AttrImageSize]); ok && n > 0 {
				p.ImageSize += int64(min(n, 1<<50))
			}
		case phases.SpanAPIMutatingHook, phases.SpanAPIValidatingHook:
			hooks = append(hooks, str(s.Attrs[phases.AttrComponentWebhook]))
		}
	}
	p.Dims[DimImageCache] = cacheOf(cache)
	p.Dims[DimImage] = setOf(images, "none")
	p.Dims[DimWebhooks] = setOf(hooks, "none")
	for i, v := range p.Dims {
		if v == "" {
			p.Dims[i] = Unknown
		}
	}
	return p, outcome, nil
}

// runOf names the run a Pod's root attributes put it in: namespace, owner kind and name.
func runOf(ns string, attrs map[string]any) string {
	for _, k := range []string{phases.AttrReplicaSetName, phases.AttrStatefulSetName, phases.AttrDaemonSetName, phases.AttrJobName} {
		if name := bounded(str(attrs[k])); name != "" {
			return ns + "/" + k + "/" + name
		}
	}
	return ""
}

// compared reports whether a span name is one readyspan draws below the root: a phase or a
// name of the catalogue.
func compared(name string) bool {
	if _, ok := phases.Catalogued(name); ok {
		return true
	}
	for _, ph := range phases.Phases {
		if name == ph {
			return true
		}
	}
	return false
}

// cacheOf is a Pod's image cache: cold when any of its images was pulled, warm when all were
// present, none when it pulled nothing.
func cacheOf(pulls []string) string {
	switch {
	case len(pulls) == 0:
		return "none"
	case containsStr(pulls, "cold"):
		return "cold"
	case containsStr(pulls, "warm"):
		return "warm"
	}
	return Unknown
}

func containsStr(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// setOf is a Pod's value of a dimension it may hold several of (its images, its webhooks): the
// distinct values sorted, at most maxImages of them, or none.
func setOf(xs []string, none string) string {
	seen := map[string]bool{}
	var vs []string
	for _, x := range xs {
		if x = bounded(x); x != "" && !seen[x] {
			seen[x] = true
			vs = append(vs, x)
		}
	}
	if len(vs) == 0 {
		return none
	}
	sort.Strings(vs)
	if len(vs) > maxImages {
		vs = append(vs[:maxImages], fmt.Sprintf("+%d more", len(vs)-maxImages))
	}
	return bounded(strings.Join(vs, ","))
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// number reads an attribute's number: an int64 from a trace in memory, a float64 from JSON.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case float64:
		return n, !math.IsNaN(n) && !math.IsInf(n, 0)
	case int:
		return float64(n), true
	}
	return 0, false
}

// bounded cuts a value to maxValue bytes at a rune's start.
func bounded(s string) string {
	if len(s) <= maxValue {
		return s
	}
	n := maxValue
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// uncertainty is how far a span's length may lie from the truth: the wider of the windows its
// ends state, in ms (absent: precise), bounded to a day; the rule of phases.LengthUncertainty.
func uncertainty(attrs map[string]any) time.Duration {
	var d time.Duration
	for _, k := range []string{phases.AttrUncertaintyStart, phases.AttrUncertaintyEnd} {
		if ms, ok := number(attrs[k]); ok && ms > 0 {
			d = max(d, time.Duration(min(ms, 86400e3)*float64(time.Millisecond)))
		}
	}
	return d
}
