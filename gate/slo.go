package gate

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
)

// Version is the only SLO file version this readyspan reads.
const Version = 1

// MaxFileBytes bounds an SLO file: a real one is a few dozen lines.
const MaxFileBytes = 1 << 20

// File is an SLO file: the objectives one gate run judges. Parse reads it strictly; Validate
// checks what the YAML decoder cannot (span names, reasons, thresholds that contradict).
type File struct {
	// Version must be 1.
	Version int `yaml:"version"`
	// MinPods is the fewest samples a percentile is judged on, for every span that does not
	// set its own (default 1). Below it a percentile is "not judged", said so, never passed.
	MinPods int `yaml:"min_pods"`
	// Spans are the duration objectives, by span name: pod.startup, a phase (scheduling,
	// kubelet…), a sub-step of the catalogue (container.image_pull, container.readiness…) or
	// workload.rollout (the rollout as a whole; max only).
	Spans map[string]Thresholds `yaml:"spans"`
	// Failures are the Pods allowed to fail, by failure reason (ErrImagePull,
	// CrashLoopBackOff, Unschedulable…, stuck for a Pod not Ready without a reason, other
	// for every reason not listed). A reason not listed, with no other, is allowed none.
	Failures map[string]int `yaml:"failures"`
	// Rotation bounds the old Pods kube-proxy kept in rotation after they were told to stop
	// (rollout.pod.rotation); nil: not judged.
	Rotation *Rotation `yaml:"rotation"`

	// lines are where each key stood, for Validate's errors: "spans.<name>", "failures.<reason>",
	// "rotation", "version", "min_pods".
	lines map[string]int
}

// Thresholds are one span's objectives: percentiles over the Pods' values and the maximum.
type Thresholds struct {
	P50 *Duration `yaml:"p50"`
	P90 *Duration `yaml:"p90"`
	P95 *Duration `yaml:"p95"`
	P99 *Duration `yaml:"p99"`
	Max *Duration `yaml:"max"`
	// MinPods overrides the file's min_pods for this span's percentiles.
	MinPods *int `yaml:"min_pods"`
}

// Rotation is the objective on old Pods left in kube-proxy's rules after their stop.
type Rotation struct {
	// MaxPods is how many old Pods may still be in some node's rules after their stop.
	MaxPods *int `yaml:"max_pods"`
	// MaxAfterStop is how long after its stop the last node may take an old Pod out.
	MaxAfterStop *Duration `yaml:"max_after_stop"`
	// WhenNotObserved is what the objective is when no node component reported: fail (the
	// default) or pass.
	WhenNotObserved string `yaml:"when_not_observed"`
}

// Duration is a duration written as Go writes one ("1.5s", "300ms", "2m"); a bare number is
// refused, since its unit would be a guess.
type Duration time.Duration

// UnmarshalYAML reads a Duration from a string scalar.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		return fmt.Errorf("line %d: want a duration with its unit (300ms, 1.5s, 2m), got %q", n.Line, cut(n.Value))
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: want a duration with its unit (300ms, 1.5s, 2m), got %q", n.Line, cut(n.Value))
	}
	if v < 0 {
		return fmt.Errorf("line %d: duration %s is negative", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes it back as it is read.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// The values of Rotation.WhenNotObserved.
const (
	NotObservedFail = "fail"
	NotObservedPass = "pass"
)

// Failure reasons of the file beside the traces' own.
const (
	// ReasonStuck is a Pod not Ready when its trace ended (the stuck deadline, or still starting
	// when the gate stopped waiting) with no failure reason.
	ReasonStuck = "stuck"
	// ReasonOther is every reason the file does not list.
	ReasonOther = "other"
)

// KnownReasons are the failure reasons a file may name: the containers' and volumes'
// (phases.FailureReasons), the scheduler's for a Pod never bound, a Pod's own status reasons,
// stuck and other.
var KnownReasons = func() []string {
	r := slices.Clone(phases.FailureReasons)
	r = append(r, "Unschedulable", "SchedulingGated", "Evicted", "DeadlineExceeded", "OutOfcpu", "OutOfmemory",
		ReasonStuck, ReasonOther)
	return r
}()

// Parse reads an SLO file strictly: a field the format does not have is an error with its line,
// as is a second document.
func Parse(r io.Reader) (*File, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("larger than %d bytes", MaxFileBytes)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f File
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty: want version: 1 and the objectives")
		}
		return nil, yamlError(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one YAML document: an SLO file is one")
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, yamlError(err)
	}
	f.lines = keyLines(&root)
	return &f, nil
}

// yamlError words a decoder's error on one line per problem, without the "yaml: " prefix.
func yamlError(err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		return errors.New(strings.Join(te.Errors, "; "))
	}
	return errors.New(strings.TrimPrefix(err.Error(), "yaml: "))
}

// keyLines maps the keys Validate names to their lines.
func keyLines(root *yaml.Node) map[string]int {
	lines := map[string]int{}
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return lines
	}
	top := root.Content[0].Content
	for i := 0; i+1 < len(top); i += 2 {
		k, v := top[i], top[i+1]
		lines[k.Value] = k.Line
		if v.Kind != yaml.MappingNode || (k.Value != "spans" && k.Value != "failures") {
			continue
		}
		for j := 0; j+1 < len(v.Content); j += 2 {
			lines[k.Value+"."+v.Content[j].Value] = v.Content[j].Line
		}
	}
	return lines
}

// Validate checks what the decoder cannot: the version, each span name against the catalogue
// (an unknown one names the closest known), each reason, thresholds that contradict each other.
// Every problem is reported, each with its line.
func (f *File) Validate() error {
	var errs []error
	add := func(key, format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		if l := f.lines[key]; l > 0 {
			msg = fmt.Sprintf("line %d: %s", l, msg)
		}
		errs = append(errs, errors.New(msg))
	}
	switch {
	case f.Version == 0:
		errs = append(errs, errors.New("version is missing: write version: 1"))
	case f.Version != Version:
		add("version", "version %d: this readyspan reads version %d", f.Version, Version)
	}
	if f.MinPods < 0 {
		add("min_pods", "min_pods %d is negative", f.MinPods)
	}
	for _, name := range slices.Sorted(maps.Keys(f.Spans)) {
		for _, msg := range validateSpan(name, f.Spans[name]) {
			add("spans."+name, "spans: %s", msg)
		}
	}
	for _, reason := range slices.Sorted(maps.Keys(f.Failures)) {
		if !slices.Contains(KnownReasons, reason) {
			add("failures."+reason, "failures: unknown reason %q%s (the rest are other)", cut(reason), didYouMean(reason, KnownReasons))
		}
		if n := f.Failures[reason]; n < 0 {
			add("failures."+reason, "failures: %s: %d is negative", reason, n)
		}
	}
	if r := f.Rotation; r != nil {
		if r.MaxPods == nil && r.MaxAfterStop == nil {
			add("rotation", "rotation: set max_pods, max_after_stop or both")
		}
		if r.MaxPods != nil && *r.MaxPods < 0 {
			add("rotation", "rotation: max_pods %d is negative", *r.MaxPods)
		}
		if w := r.WhenNotObserved; w != "" && w != NotObservedFail && w != NotObservedPass {
			add("rotation", "rotation: when_not_observed %q: use fail or pass", cut(w))
		}
	}
	if len(f.Spans) == 0 && f.Rotation == nil && len(f.Failures) == 0 {
		errs = append(errs, errors.New("no objectives: set spans, failures or rotation"))
	}
	return errors.Join(errs...)
}

// validateSpan is what is wrong with one span's objectives.
func validateSpan(name string, t Thresholds) []string {
	known := spanNames()
	if !slices.Contains(known, name) {
		return []string{fmt.Sprintf("unknown span name %q%s", cut(name), didYouMean(name, known))}
	}
	var out []string
	ps := t.percentiles()
	if len(ps) == 0 && t.Max == nil {
		out = append(out, fmt.Sprintf("%s: no threshold: set p50, p90, p95, p99 or max", name))
	}
	if name == rollout.RootSpanName && len(ps) > 0 {
		out = append(out, fmt.Sprintf("%s: max only: a rollout is one sample", name))
	}
	if t.MinPods != nil && *t.MinPods < 0 {
		out = append(out, fmt.Sprintf("%s: min_pods %d is negative", name, *t.MinPods))
	}
	// A higher percentile (or the maximum) below a lower one can never be met together.
	bounds := append(ps, percentile{"max", 100, t.Max})
	for i := range bounds {
		for j := i + 1; j < len(bounds); j++ {
			if bounds[j].limit != nil && bounds[i].limit != nil && *bounds[j].limit < *bounds[i].limit {
				out = append(out, fmt.Sprintf("%s: %s %s is below %s %s", name, bounds[j].name,
					time.Duration(*bounds[j].limit), bounds[i].name, time.Duration(*bounds[i].limit)))
			}
		}
	}
	return out
}

// percentile is one percentile objective: its name, rank (0–100) and limit.
type percentile struct {
	name  string
	rank  float64
	limit *Duration
}

// percentiles are the ones set, lowest first.
func (t Thresholds) percentiles() []percentile {
	var out []percentile
	for _, p := range []percentile{{"p50", 50, t.P50}, {"p90", 90, t.P90}, {"p95", 95, t.P95}, {"p99", 99, t.P99}} {
		if p.limit != nil {
			out = append(out, p)
		}
	}
	return out
}

// spanNames are the names a file may set objectives on: the root, the phases, the catalogue
// (conventions.yaml) and the rollout as a whole.
func spanNames() []string {
	names := []string{phases.RootSpanName, rollout.RootSpanName}
	names = append(names, phases.Phases...)
	for _, s := range phases.Catalogue {
		names = append(names, s.Name)
	}
	return names
}

// didYouMean is `, did you mean "x"?` for the known name closest to name, when one is close.
func didYouMean(name string, known []string) string {
	best, bestD := "", -1
	for _, k := range known {
		if d := editDistance(strings.ToLower(name), strings.ToLower(k)); bestD < 0 || d < bestD {
			best, bestD = k, d
		}
	}
	if bestD < 0 || bestD > max(3, len(name)/3) {
		return ""
	}
	return fmt.Sprintf(", did you mean %q?", best)
}

// editDistance is the Levenshtein distance of a and b, in bytes (names are ASCII).
func editDistance(a, b string) int {
	if len(a) > 256 || len(b) > 256 {
		return max(len(a), len(b)) // a hostile key is no near miss; bound the work
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// cut bounds a string of the file quoted back in an error.
func cut(s string) string {
	const n = 80
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// minPods is the fewest samples span's percentiles are judged on.
func (f *File) minPods(t Thresholds) int {
	if t.MinPods != nil {
		return max(*t.MinPods, 1)
	}
	return max(f.MinPods, 1)
}

// notObservedPasses says whether an unobserved rotation objective passes.
func (r *Rotation) notObservedPasses() bool { return r.WhenNotObserved == NotObservedPass }
