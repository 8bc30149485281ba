package compare

import (
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
)

// Stat is a statistic of a row's distribution.
type Stat int

// The statistics compared.
const (
	StatMean Stat = iota
	StatP50
	StatP90
	StatP99
	numStats
)

// statInfo: each statistic's name, its quantile (mean: none) and the fewest Pods a side needs
// for its shift to be called significant: a mean or a percentile with fewer than minBeyond Pods
// beyond it rests on a handful of Pods (p99 of 100 Pods is the slowest one).
var statInfo = [numStats]struct {
	key string
	q   float64
}{
	StatMean: {"mean", -1},
	StatP50:  {"p50", 0.50},
	StatP90:  {"p90", 0.90},
	StatP99:  {"p99", 0.99},
}

// minBeyond is how many Pods a side needs beyond a percentile (above it), and minPods how many
// for a mean, before a shift of it is called significant.
const (
	minBeyond = 5
	minPods   = 10
)

// Key is the statistic's name in output.
func (s Stat) Key() string { return statInfo[s].key }

// MinPods is the fewest Pods a side needs for a shift of s to be called significant.
func (s Stat) MinPods() int {
	if statInfo[s].q < 0 {
		return minPods
	}
	return max(minPods, int(math.Ceil(minBeyond/(1-statInfo[s].q)-1e-9)))
}

// column is one side's values of one row: per Pod its value and its uncertainty, in seconds,
// and the Pods in ascending order of value (quantiles walk it).
type column struct {
	x, u  []float64
	order []int
}

func newColumn(x, u []float64) *column {
	c := &column{x: x, u: u, order: make([]int, len(x))}
	for i := range c.order {
		c.order[i] = i
	}
	sort.SliceStable(c.order, func(i, j int) bool { return x[c.order[i]] < x[c.order[j]] })
	return c
}

// stat is s of the sample that holds Pod i counts[i] times (n in all): the mean, or the
// quantile by linear interpolation between order statistics (R's type 7, numpy's default).
func (c *column) stat(s Stat, counts []int, n int) float64 {
	if n == 0 {
		return math.NaN()
	}
	q := statInfo[s].q
	if q < 0 {
		sum := 0.0
		for i, k := range counts {
			sum += float64(k) * c.x[i]
		}
		return sum / float64(n)
	}
	h := float64(n-1) * q
	lo := int(math.Floor(h))
	a, b := c.orderStat(lo, counts), c.orderStat(min(lo+1, n-1), counts)
	return a + (h-float64(lo))*(b-a)
}

// all is every statistic of the sample counts describes (n Pods in all), the order statistics
// the quantiles need read in one walk of the Pods in order: what the bootstrap calls per resample.
func (c *column) all(counts []int, n int) [numStats]float64 {
	var out [numStats]float64
	out[StatMean] = c.stat(StatMean, counts, n)
	// The ranks each quantile interpolates between, ascending (the quantiles are).
	var ranks [2 * (numStats - 1)]int
	for s := StatP50; s < numStats; s++ {
		lo := int(math.Floor(float64(n-1) * statInfo[s].q))
		ranks[2*(s-1)], ranks[2*(s-1)+1] = lo, min(lo+1, n-1)
	}
	order := ranks
	sort.Ints(order[:])
	var at [len(ranks)]float64 // the value at order[k]
	seen, next := 0, 0
	for _, i := range c.order {
		seen += counts[i]
		for next < len(order) && order[next] < seen {
			at[next] = c.x[i]
			next++
		}
		if next == len(order) {
			break
		}
	}
	valueAt := func(rank int) float64 { return at[sort.SearchInts(order[:], rank)] }
	for s := StatP50; s < numStats; s++ {
		h := float64(n-1) * statInfo[s].q
		a, b := valueAt(ranks[2*(s-1)]), valueAt(ranks[2*(s-1)+1])
		out[s] = a + (h-math.Floor(h))*(b-a)
	}
	return out
}

// orderStat is the k-th smallest (0-based) value of the sample counts describes.
func (c *column) orderStat(k int, counts []int) float64 {
	seen := 0
	for _, i := range c.order {
		seen += counts[i]
		if seen > k {
			return c.x[i]
		}
	}
	return c.x[c.order[len(c.order)-1]]
}

// independent is how many of the column's Pods count as separate observations: Pods that share
// the very same non-zero length count once. They share it because it is one step they all
// inherit (the Deployment's, for every Pod of its rollout): one observation, however many
// Pods carry it. A zero (no such span) is each Pod's own.
func (c *column) independent() int {
	n := 0
	seen := map[float64]bool{}
	for _, x := range c.x {
		if x == 0 || !seen[x] {
			n++
		}
		seen[x] = true
	}
	return n
}

// bound is how far s of the sample may lie from s of the true lengths, the uncertainty of each
// Pod's value given: a mean by the mean uncertainty, a quantile by the largest (moving each value
// by at most u moves every order statistic by at most u).
func (c *column) bound(s Stat) float64 {
	if len(c.u) == 0 {
		return 0
	}
	if statInfo[s].q < 0 {
		sum := 0.0
		for _, u := range c.u {
			sum += u
		}
		return sum / float64(len(c.u))
	}
	m := 0.0
	for _, u := range c.u {
		m = max(m, u)
	}
	return m
}

// ones is the sample itself: every Pod once.
func ones(n int) []int {
	c := make([]int, n)
	for i := range c {
		c[i] = 1
	}
	return c
}

// resampler draws the bootstrap's samples: each a draw of n Pods with replacement from a side's
// n, as counts. Its generator is seeded: the same sets give the same intervals.
type resampler struct{ rng *rand.Rand }

func newResampler(seed uint64) *resampler {
	return &resampler{rng: rand.New(rand.NewPCG(seed, 0x5eed))}
}

// drawRuns draws a side's runs with replacement, as many as it has, and for each run drawn as
// many of its Pods with replacement as it holds: a two-stage (cluster) bootstrap, so the
// variation between runs is in the draws. It returns how many Pods the sample holds.
func (r *resampler) drawRuns(counts []int, runs [][]int) int {
	clear(counts)
	n := 0
	for range runs {
		run := runs[r.rng.IntN(len(runs))]
		for range run {
			counts[run[r.rng.IntN(len(run))]]++
		}
		n += len(run)
	}
	return n
}

func (r *resampler) draw(counts []int) {
	clear(counts)
	n := len(counts)
	for range n {
		counts[r.rng.IntN(n)]++
	}
}

// percentile is the p-th quantile (0..1) of xs by type 7, NaN values left out; xs is sorted in
// place.
func percentile(xs []float64, p float64) float64 {
	kept := xs[:0]
	for _, x := range xs {
		if !math.IsNaN(x) {
			kept = append(kept, x)
		}
	}
	if len(kept) == 0 {
		return math.NaN()
	}
	sort.Float64s(kept)
	h := float64(len(kept)-1) * p
	lo := int(math.Floor(h))
	hi := min(lo+1, len(kept)-1)
	return kept[lo] + (h-float64(lo))*(kept[hi]-kept[lo])
}

// Interval is an estimate and its confidence interval.
type Interval struct {
	Est  float64 `json:"estimate"`
	Low  float64 `json:"low"`
	High float64 `json:"high"`
}

// excludesZero reports whether the interval lies wholly on one side of zero (nil: none does).
func (i *Interval) excludesZero() bool { return i != nil && (i.Low > 0 || i.High < 0) }

// intervalOf is the percentile interval of the bootstrap's draws at level, around est.
func intervalOf(est float64, draws []float64, level float64) Interval {
	tail := (1 - level) / 2
	sorted := append([]float64(nil), draws...)
	lo := percentile(sorted, tail)
	hi := percentile(sorted, 1-tail)
	return Interval{Est: est, Low: lo, High: hi}
}

// MarshalJSON writes an end the bootstrap could not state (a share of no shift) as null: JSON
// has no NaN.
func (i Interval) MarshalJSON() ([]byte, error) {
	f := func(x float64) string {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return "null"
		}
		return strconv.FormatFloat(x, 'g', 6, 64)
	}
	return []byte(`{"estimate":` + f(i.Est) + `,"low":` + f(i.Low) + `,"high":` + f(i.High) + `}`), nil
}
