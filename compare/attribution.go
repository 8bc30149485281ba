package compare

import (
	"math"
	"sort"
)

// Attribution splits one row's mean shift by the dimensions its Pods differ in.
type Attribution struct {
	Span  string     `json:"span"`
	Shift Interval   `json:"shift_seconds"` // the mean's shift as its row states it
	Dims  []DimShare `json:"dimensions"`    // ranked: what explains most first
}

// DimShare is one dimension's part in a shift: the shift of the mean split exactly into the part
// the mix changing explains (more Pods on a slow value) and the part each value getting slower
// explains, each with its interval:
//
//	shift = Σv (wB(v) − wA(v)) · (mA(v) + mB(v))/2  +  Σv (wA(v) + wB(v))/2 · (mB(v) − mA(v))
//
// with w a value's share of a side's Pods and m its Pods' mean (a value on one side only has
// its one mean, and no part in the rate). Their intervals are the bootstrap's alone: the stamps'
// uncertainty widens the shift's (Attribution.Shift), not how it splits.
type DimShare struct {
	Dim    string       `json:"dimension"`
	Words  string       `json:"words"`
	Values []ValueShare `json:"values"`
	Mix    Interval     `json:"mix_seconds"`
	Rate   Interval     `json:"rate_seconds"`
	// Share is Mix over the shift: how much of it the dimension explains.
	Share Interval `json:"explained_share"`
	// Separates: no value has Pods on both sides; such a dimension explains all of the shift by
	// construction, and so does every other that separates them: they are confounded.
	Separates bool `json:"separates_sets"`
	// ConfoundedWith are the dimensions that split the Pods exactly as this one does (or, for a
	// dimension that separates the sets, that separate them too): the data cannot tell them apart.
	ConfoundedWith []string `json:"confounded_with,omitempty"`
}

// ValueShare is one value of a dimension on both sides.
type ValueShare struct {
	Value string   `json:"value"`
	PodsA int      `json:"pods_a"`
	PodsB int      `json:"pods_b"`
	MeanA *float64 `json:"mean_a_seconds,omitempty"`
	MeanB *float64 `json:"mean_b_seconds,omitempty"`
	// Rate is this value's part of the rate term: its Pods getting slower (or faster).
	Rate float64 `json:"rate_seconds"`
}

// maxValues bounds the values a dimension tells apart; the rest are counted as one, "other".
const maxValues = 64

// coded is a dimension's values as small integers for the Pods of both sides.
type coded struct {
	dim   Dim
	names []string
	a, b  []int // each Pod's value, by side
}

func codeDim(d Dim, a, b []Pod) *coded {
	c := &coded{dim: d}
	idx := map[string]int{}
	code := func(v string) int {
		if i, ok := idx[v]; ok {
			return i
		}
		if len(c.names) == maxValues-1 {
			v = "other"
			if i, ok := idx[v]; ok {
				return i
			}
		}
		idx[v] = len(c.names)
		c.names = append(c.names, v)
		return idx[v]
	}
	for _, p := range a {
		c.a = append(c.a, code(p.Dims[d]))
	}
	for _, p := range b {
		c.b = append(c.b, code(p.Dims[d]))
	}
	return c
}

// decompose is the mix and rate parts of the shift of x's mean, the Pods weighted by counts.
func (c *coded) decompose(xa, xb []float64, ca, cb []int) (mix, rate float64, perValue []float64) {
	k := len(c.names)
	sum := [2][]float64{make([]float64, k), make([]float64, k)}
	cnt := [2][]float64{make([]float64, k), make([]float64, k)}
	var tot [2]float64
	for side, codes := range [2][]int{c.a, c.b} {
		xs, counts := xa, ca
		if side == 1 {
			xs, counts = xb, cb
		}
		for i, v := range codes {
			w := float64(counts[i])
			sum[side][v] += w * xs[i]
			cnt[side][v] += w
			tot[side] += w
		}
	}
	perValue = make([]float64, k)
	for v := range k {
		wa, wb := cnt[0][v]/tot[0], cnt[1][v]/tot[1]
		switch {
		case cnt[0][v] > 0 && cnt[1][v] > 0:
			ma, mb := sum[0][v]/cnt[0][v], sum[1][v]/cnt[1][v]
			mix += (wb - wa) * (ma + mb) / 2
			perValue[v] = (wa + wb) / 2 * (mb - ma)
			rate += perValue[v]
		case cnt[0][v] > 0:
			mix -= wa * sum[0][v] / cnt[0][v]
		case cnt[1][v] > 0:
			mix += wb * sum[1][v] / cnt[1][v]
		}
	}
	return mix, rate, perValue
}

// separates reports whether no value has Pods on both sides.
func (c *coded) separates() bool {
	inA := map[int]bool{}
	for _, v := range c.a {
		inA[v] = true
	}
	for _, v := range c.b {
		if inA[v] {
			return false
		}
	}
	return true
}

// samePartition reports whether c and d split the Pods of both sides alike (a one-to-one map
// between their values).
func (c *coded) samePartition(d *coded) bool {
	fwd, back := map[int]int{}, map[int]int{}
	all := func(x, y []int) bool {
		for i := range x {
			if v, ok := fwd[x[i]]; ok && v != y[i] {
				return false
			}
			if v, ok := back[y[i]]; ok && v != x[i] {
				return false
			}
			fwd[x[i]], back[y[i]] = y[i], x[i]
		}
		return true
	}
	return all(c.a, d.a) && all(c.b, d.b)
}

// attribute splits the mean shift of row name by each dimension that takes more than one value
// over both sides, with bootstrap intervals drawn as the rows' are.
func attribute(name string, a, b []Pod, o Options) Attribution {
	xa, xb := seconds(a, name), seconds(b, name)
	var dims []*coded
	for d := range numDims {
		if c := codeDim(d, a, b); len(c.names) > 1 {
			dims = append(dims, c)
		}
	}
	total := mean(xb, ones(len(xb))) - mean(xa, ones(len(xa)))
	totals := make([]float64, o.Resamples)
	mixes := make([][]float64, len(dims))
	rates := make([][]float64, len(dims))
	for i := range dims {
		mixes[i], rates[i] = make([]float64, o.Resamples), make([]float64, o.Resamples)
	}
	rs := newResampler(o.Seed)
	ca, cb := make([]int, len(xa)), make([]int, len(xb))
	for r := range o.Resamples {
		rs.draw(ca)
		rs.draw(cb)
		totals[r] = mean(xb, cb) - mean(xa, ca)
		for i, c := range dims {
			mixes[i][r], rates[i][r], _ = c.decompose(xa, xb, ca, cb)
		}
	}
	at := Attribution{Span: name, Shift: intervalOf(total, totals, o.Level)}
	for i, c := range dims {
		at.Dims = append(at.Dims, shareOf(c, xa, xb, total, totals, mixes[i], rates[i], o.Level))
	}
	return rankDims(at, dims)
}

func shareOf(c *coded, xa, xb []float64, total float64, totals, mixes, rates []float64, level float64) DimShare {
	mix, rate, per := c.decompose(xa, xb, ones(len(xa)), ones(len(xb)))
	ds := DimShare{Dim: c.dim.Key(), Words: c.dim.Words(), Separates: c.separates(),
		Mix: intervalOf(mix, mixes, level), Rate: intervalOf(rate, rates, level)}
	shares := make([]float64, len(mixes))
	for r := range mixes {
		shares[r] = math.NaN()
		if totals[r] != 0 {
			shares[r] = mixes[r] / totals[r]
		}
	}
	est := math.NaN()
	if total != 0 {
		est = mix / total
	}
	ds.Share = intervalOf(est, shares, level)
	for v, name := range c.names {
		vs := ValueShare{Value: name, Rate: per[v]}
		vs.PodsA, vs.MeanA = valueMean(c.a, xa, v)
		vs.PodsB, vs.MeanB = valueMean(c.b, xb, v)
		ds.Values = append(ds.Values, vs)
	}
	sort.SliceStable(ds.Values, func(i, j int) bool {
		return ds.Values[i].PodsA+ds.Values[i].PodsB > ds.Values[j].PodsA+ds.Values[j].PodsB
	})
	return ds
}

func valueMean(codes []int, xs []float64, v int) (int, *float64) {
	n, sum := 0, 0.0
	for i, c := range codes {
		if c == v {
			n++
			sum += xs[i]
		}
	}
	if n == 0 {
		return 0, nil
	}
	m := sum / float64(n)
	return n, &m
}

// rankDims folds confounded dimensions into the first of them (in Dim order: the nearest
// cause) and ranks: the dimensions that separate the sets first, then by explained share.
func rankDims(at Attribution, dims []*coded) Attribution {
	var kept []DimShare
	folded := make([]bool, len(dims))
	for i, c := range dims {
		if folded[i] {
			continue
		}
		ds := at.Dims[i]
		for j := i + 1; j < len(dims); j++ {
			if folded[j] {
				continue
			}
			if ds.Separates && at.Dims[j].Separates || c.samePartition(dims[j]) {
				folded[j] = true
				ds.ConfoundedWith = append(ds.ConfoundedWith, dims[j].dim.Key())
			}
		}
		kept = append(kept, ds)
	}
	sort.SliceStable(kept, func(i, j int) bool {
		if kept[i].Separates != kept[j].Separates {
			return kept[i].Separates
		}
		return shareKey(kept[i]) > shareKey(kept[j])
	})
	at.Dims = kept
	return at
}

// shareKey orders by explained share, an undefined one (no shift) by the mix part's size.
func shareKey(d DimShare) float64 {
	if math.IsNaN(d.Share.Est) {
		return math.Abs(d.Mix.Est) - 1e9
	}
	return d.Share.Est
}

func seconds(ps []Pod, name string) []float64 {
	xs := make([]float64, len(ps))
	for i := range ps {
		d, _ := valueOf(&ps[i], name)
		xs[i] = d.Seconds()
	}
	return xs
}

func mean(xs []float64, counts []int) float64 {
	n, sum := 0, 0.0
	for i, k := range counts {
		n += k
		sum += float64(k) * xs[i]
	}
	return sum / float64(n)
}
