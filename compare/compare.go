package compare

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/readyspan/readyspan/phases"
)

// Set is one side of a comparison: the Pods that became Ready, and how many did not, by outcome.
type Set struct {
	Label    string
	Pods     []Pod
	NotReady map[string]int
}

// Options are the bootstrap's: how many resamples, the seed, the confidence level.
type Options struct {
	Resamples int
	Seed      uint64
	Level     float64
}

// The defaults: 2,000 resamples put each end of a 95% interval on some 50 draws.
const (
	DefaultResamples = 2000
	DefaultSeed      = 1
	DefaultLevel     = 0.95
	// MaxPods bounds each side: the bootstrap's work grows with resamples × rows × Pods.
	MaxPods = 20000
)

// DefaultOptions are the bootstrap's defaults.
func DefaultOptions() Options {
	return Options{Resamples: DefaultResamples, Seed: DefaultSeed, Level: DefaultLevel}
}

// Validate checks the options.
func (o Options) Validate() error {
	switch {
	case o.Resamples < 100 || o.Resamples > 100000:
		return fmt.Errorf("resamples %d: want 100 to 100000", o.Resamples)
	case !(o.Level >= 0.5 && o.Level < 1):
		return fmt.Errorf("level %v: want 0.5 to 0.999", o.Level)
	}
	return nil
}

// Estimate is one statistic of one row on both sides and its shift (B − A), in seconds. The
// interval is the bootstrap's, widened by the uncertainty of the stamps on each side.
type Estimate struct {
	Stat        string   `json:"stat"`
	A           float64  `json:"a_seconds"`
	B           float64  `json:"b_seconds"`
	Shift       Interval `json:"shift_seconds"`
	Significant bool     `json:"significant"`
	// TooFewPods: a side has fewer Pods than the statistic needs (MinPods) for its shift to be
	// called significant, whatever the interval; Pods that share one step's length (a rollout's
	// Pods, the Deployment's step) count once.
	TooFewPods bool `json:"too_few_pods,omitempty"`
	MinPods    int  `json:"min_pods"`
	// TooFewRuns: a side has fewer runs than MinRuns, so the shift, whatever its interval, may
	// be the two runs' and not the setups'.
	TooFewRuns bool `json:"too_few_runs,omitempty"`
	// Family is, for a phase or a sub-step, the interval its significance is judged by: every
	// row's shifts tested at once at the stated level (Bonferroni over the rows' statistics), the
	// bootstrap's standard error times the normal quantile, widened as Shift is.
	Family *Interval `json:"family_interval_seconds,omitempty"`
}

// Row is one span name compared: the root (pod.startup), a phase or a sub-step. A Pod without a
// span of the name counts zero for it, so a phase's rows add up to the root's mean.
type Row struct {
	Span  string `json:"span"`
	Phase string `json:"phase,omitempty"` // the phase it lies under; the phase's own name for a phase
	Depth int    `json:"depth"`           // 0 the root, 1 a phase, 2 a sub-step
	// WithA and WithB count the Pods that have a span of the name.
	WithA int        `json:"pods_with_span_a"`
	WithB int        `json:"pods_with_span_b"`
	Stats []Estimate `json:"stats"`
	// Share is the row's mean shift as a share of the startup's (root: none).
	Share *Interval `json:"share_of_startup_shift,omitempty"`
}

func (r *Row) mean() *Estimate { return &r.Stats[StatMean] }

// Result is a comparison.
type Result struct {
	A      SideSummary `json:"a"`
	B      SideSummary `json:"b"`
	Method Method      `json:"method"`
	Rows   []Row       `json:"rows"`
	// Lead is where the shift lands: the phase with the largest mean shift whose interval excludes
	// zero and, beneath it, the sub-step with the largest; empty when no row's does.
	Lead []string `json:"lead,omitempty"`
	// Attribution splits the shift of the startup's mean and of the lead's deepest row by the
	// dimensions the sets differ in.
	Attribution []Attribution `json:"attribution"`
	Sentence    string        `json:"sentence"`
}

// SideSummary describes one side.
type SideSummary struct {
	Label    string         `json:"label"`
	Pods     int            `json:"pods"`
	Runs     int            `json:"runs"` // rollouts among the Pods; each bare Pod one
	NotReady map[string]int `json:"not_ready,omitempty"`
	// ImageBytes is the mean size of the images its Pods pulled, over the Pods whose pulls state
	// one (the kubelet's Pulled message), 0 when none does.
	ImageBytes float64 `json:"image_bytes,omitempty"`
}

// Method states how the intervals were made, for the reader and for a rerun.
type Method struct {
	Interval  string  `json:"interval"`
	Level     float64 `json:"level"`
	Resamples int     `json:"resamples"`
	Seed      uint64  `json:"seed"`
}

// methodText is Method.Interval.
const methodText = "percentile bootstrap: the runs (rollouts) of each set resampled with replacement, then the Pods " +
	"of each run drawn, the statistic's shift recomputed each time; the interval then widened by the stamps' own " +
	"uncertainty on each side"

// MinRuns is how many runs (rollouts; a bare Pod is a run of its own) each side needs for a
// shift to be called significant. The Pods of one run do not show the variation between runs
// of one setup, so a side of one run cannot tell a setup from a run; and resampling runs shows
// their spread only with several of them (two runs a side make three distinct draws).
const MinRuns = 5

// ErrEmpty is returned when a side has no Pod that became Ready.
var ErrEmpty = errors.New("no Pod of the set became Ready: nothing to compare")

// Compare compares b against a (shift = b − a).
func Compare(a, b Set, o Options) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	for _, s := range []Set{a, b} {
		if len(s.Pods) == 0 {
			return nil, fmt.Errorf("%s: %w", s.Label, ErrEmpty)
		}
		if len(s.Pods) > MaxPods {
			return nil, fmt.Errorf("%s: %d Pods, more than the %d compared: narrow the window or the set", s.Label, len(s.Pods), MaxPods)
		}
	}
	res := &Result{A: summarize(a), B: summarize(b),
		Method: Method{Interval: methodText, Level: o.Level, Resamples: o.Resamples, Seed: o.Seed}}
	names := rowNames(a.Pods, b.Pods)
	cols := make([][2]*column, len(names))
	for i, n := range names {
		cols[i] = [2]*column{columnOf(a.Pods, n), columnOf(b.Pods, n)}
	}
	runs := [2][][]int{runsOf(a.Pods), runsOf(b.Pods)}
	res.A.Runs, res.B.Runs = len(runs[0]), len(runs[1])
	draws := bootstrapRows(cols, runs, o)
	// The phases' and sub-steps' shifts are one family of tests: with twenty of them, one would
	// leave its own 95% interval by chance.
	family := (len(names) - 1) * int(numStats)
	for i, n := range names {
		res.Rows = append(res.Rows, rowOf(n, cols[i], draws[i], o, family, a.Pods, b.Pods))
		for s := range res.Rows[i].Stats {
			e := &res.Rows[i].Stats[s]
			e.TooFewRuns = min(res.A.Runs, res.B.Runs) < MinRuns
			e.Significant = e.Significant && !e.TooFewRuns
		}
	}
	shareOfStartup(res.Rows, draws, o.Level)
	res.Lead = leadOf(res.Rows)
	targets := []string{phases.RootSpanName}
	if len(res.Lead) > 0 {
		targets = append(targets, res.Lead[len(res.Lead)-1])
	}
	for _, t := range targets {
		at := attribute(t, a.Pods, b.Pods, o)
		for i := range res.Rows {
			if res.Rows[i].Span == t {
				at.Shift = res.Rows[i].mean().Shift // widened by the stamps, as the row states it
			}
		}
		res.Attribution = append(res.Attribution, at)
	}
	res.Sentence = sentence(res)
	return res, nil
}

// runsOf groups a side's Pods (their indexes) by run, in the order first met; a Pod with no run
// named is a run of its own.
func runsOf(ps []Pod) [][]int {
	var runs [][]int
	at := map[string]int{}
	for i := range ps {
		k := ps[i].Run
		j, ok := at[k]
		if !ok || k == "" {
			j = len(runs)
			runs = append(runs, nil)
			if k != "" {
				at[k] = j
			}
		}
		runs[j] = append(runs[j], i)
	}
	return runs
}

func summarize(s Set) SideSummary {
	sum := SideSummary{Label: s.Label, Pods: len(s.Pods), NotReady: s.NotReady}
	n := 0
	for _, p := range s.Pods {
		if p.ImageSize > 0 {
			sum.ImageBytes += float64(p.ImageSize)
			n++
		}
	}
	if n > 0 {
		sum.ImageBytes /= float64(n)
	}
	return sum
}

// rowNames are the root, then each phase followed by its sub-steps in the catalogue's order,
// of the names either side has time in.
func rowNames(a, b []Pod) []string {
	has := map[string]bool{}
	for _, ps := range [][]Pod{a, b} {
		for _, p := range ps {
			for n, d := range p.Spans {
				if d > 0 {
					has[n] = true
				}
			}
		}
	}
	names := []string{phases.RootSpanName}
	for _, ph := range phases.Phases {
		if has[ph] {
			names = append(names, ph)
		}
		for _, s := range phases.Catalogue {
			if s.Phase == ph && has[s.Name] {
				names = append(names, s.Name)
			}
		}
	}
	return names
}

// valueOf is a Pod's time in a row, and its uncertainty.
func valueOf(p *Pod, name string) (time.Duration, time.Duration) {
	if name == phases.RootSpanName {
		return p.Startup, p.Uncertain[name]
	}
	return p.Spans[name], p.Uncertain[name]
}

func columnOf(ps []Pod, name string) *column {
	x, u := make([]float64, len(ps)), make([]float64, len(ps))
	for i := range ps {
		d, un := valueOf(&ps[i], name)
		x[i], u[i] = d.Seconds(), un.Seconds()
	}
	return newColumn(x, u)
}

// bootstrapRows draws the resamples once for every row (so rows' shifts are drawn together and
// their ratios mean something): draws[row][stat][r] is the shift of the r-th resample.
func bootstrapRows(cols [][2]*column, runs [2][][]int, o Options) [][numStats][]float64 {
	nA, nB := len(cols[0][0].x), len(cols[0][1].x)
	draws := make([][numStats][]float64, len(cols))
	for i := range draws {
		for s := range numStats {
			draws[i][s] = make([]float64, o.Resamples)
		}
	}
	rs := newResampler(o.Seed)
	ca, cb := make([]int, nA), make([]int, nB)
	for r := range o.Resamples {
		na, nb := rs.drawRuns(ca, runs[0]), rs.drawRuns(cb, runs[1])
		for i, c := range cols {
			va, vb := c[0].all(ca, na), c[1].all(cb, nb)
			for s := range numStats {
				draws[i][s][r] = vb[s] - va[s]
			}
		}
	}
	return draws
}

// rowOf is a row's estimates: each statistic on both sides, its shift's interval widened by
// both sides' uncertainty. The root's shift is significant when that interval excludes zero and
// both sides have the Pods; a phase's or sub-step's when its family interval does (familyZ).
func rowOf(name string, c [2]*column, draws [numStats][]float64, o Options, family int, a, b []Pod) Row {
	row := Row{Span: name}
	switch info, ok := phases.Catalogued(name); {
	case name == phases.RootSpanName:
	case ok:
		row.Phase, row.Depth = info.Phase, 2
	default:
		row.Phase, row.Depth = name, 1
	}
	row.WithA, row.WithB = countWith(a, name), countWith(b, name)
	nA, nB := len(c[0].x), len(c[1].x)
	for s := range numStats {
		va, vb := c[0].stat(s, ones(nA), nA), c[1].stat(s, ones(nB), nB)
		iv := intervalOf(vb-va, draws[s], o.Level)
		widen := c[0].bound(s) + c[1].bound(s)
		iv.Low, iv.High = iv.Low-widen, iv.High+widen
		e := Estimate{Stat: s.Key(), A: va, B: vb, Shift: iv, MinPods: s.MinPods()}
		e.TooFewPods = min(c[0].independent(), c[1].independent()) < e.MinPods
		judged := iv
		if row.Depth > 0 {
			half := familyZ(o.Level, family)*stddev(draws[s]) + widen
			fam := Interval{Est: iv.Est, Low: iv.Est - half, High: iv.Est + half}
			e.Family, judged = &fam, fam
		}
		e.Significant = judged.excludesZero() && !e.TooFewPods
		row.Stats = append(row.Stats, e)
	}
	return row
}

// familyZ is the normal quantile of a family of m tests at level (Bonferroni): each of the m at
// 1 − (1 − level)/m, two-sided.
func familyZ(level float64, m int) float64 {
	p := 1 - (1-level)/float64(2*max(m, 1))
	return math.Sqrt2 * math.Erfinv(2*p-1)
}

// stddev is the bootstrap's standard error: the standard deviation of its draws.
func stddev(xs []float64) float64 {
	n, sum, sq := 0.0, 0.0, 0.0
	for _, x := range xs {
		if !math.IsNaN(x) {
			n++
			sum += x
			sq += x * x
		}
	}
	if n < 2 {
		return math.NaN()
	}
	m := sum / n
	return math.Sqrt(max(sq/n-m*m, 0) * n / (n - 1))
}

func countWith(ps []Pod, name string) int {
	if name == phases.RootSpanName {
		return len(ps)
	}
	n := 0
	for i := range ps {
		if _, ok := ps[i].Spans[name]; ok {
			n++
		}
	}
	return n
}

// shareOfStartup sets each row's mean shift as a share of the root's, with the interval of the
// ratio over the resamples (resamples whose startup did not move are left out).
func shareOfStartup(rows []Row, draws [][numStats][]float64, level float64) {
	root := rows[0].mean().Shift.Est
	if root == 0 {
		return
	}
	for i := 1; i < len(rows); i++ {
		ratios := make([]float64, len(draws[i][StatMean]))
		for r, d := range draws[i][StatMean] {
			ratios[r] = math.NaN()
			if den := draws[0][StatMean][r]; den != 0 {
				ratios[r] = d / den
			}
		}
		iv := intervalOf(rows[i].mean().Shift.Est/root, ratios, level)
		rows[i].Share = &iv
	}
}

// leadOf is where the shift lands: of the phases and sub-steps whose mean shift's own interval
// excludes zero (however few the Pods; whether it is significant is the row's to say), the one
// that moved most; for a phase, then the sub-step beneath it that moved
// most with its interval excluding zero. Nothing when no interval excludes zero.
func leadOf(rows []Row) []string {
	best := func(depth int, phase string) *Row {
		var b *Row
		for i := range rows {
			r := &rows[i]
			if r.Depth == 0 || depth != 0 && r.Depth != depth || phase != "" && r.Phase != phase || !r.mean().Shift.excludesZero() {
				continue
			}
			if b == nil || math.Abs(r.mean().Shift.Est) > math.Abs(b.mean().Shift.Est) {
				b = r
			}
		}
		return b
	}
	top := best(0, "")
	switch {
	case top == nil:
		return nil
	case top.Depth == 2:
		return []string{top.Phase, top.Span}
	}
	if sub := best(2, top.Span); sub != nil {
		return []string{top.Span, sub.Span}
	}
	return []string{top.Span}
}
