package compare

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/readyspan/readyspan/phases"
)

// TestQuantileType7 holds the quantiles to R's type 7 (numpy's default), computed by hand.
func TestQuantileType7(t *testing.T) {
	c := newColumn([]float64{4, 1, 3, 2}, nil)
	for _, tc := range []struct {
		s    Stat
		want float64
	}{{StatMean, 2.5}, {StatP50, 2.5}, {StatP90, 3.7}, {StatP99, 3.97}} {
		if got := c.stat(tc.s, ones(4), 4); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: %v, want %v", tc.s.Key(), got, tc.want)
		}
	}
	// A resample holding the smallest value twice and the largest not at all.
	if got := c.stat(StatP50, []int{0, 2, 1, 1}, 4); got != 1.5 {
		t.Errorf("p50 of 1,1,2,3: %v", got)
	}
}

func TestMinPods(t *testing.T) {
	for s, want := range map[Stat]int{StatMean: 10, StatP50: 10, StatP90: 50, StatP99: 500} {
		if got := s.MinPods(); got != want {
			t.Errorf("%s: %d, want %d", s.Key(), got, want)
		}
	}
}

// synth makes n Pods: each a startup of base seconds plus noise, a pull of pull seconds on slow
// ones, their dimension values from dims(i).
func synth(rng *rand.Rand, n int, startup func(i int) float64, dims func(i int, p *Pod)) []Pod {
	ps := make([]Pod, n)
	for i := range ps {
		d := time.Duration(startup(i) * float64(time.Second))
		ps[i] = Pod{Name: "ns/p", Startup: d, Spans: map[string]time.Duration{phases.PhaseKubelet: d},
			Uncertain: map[string]time.Duration{}}
		for k := range ps[i].Dims {
			ps[i].Dims[k] = "same"
		}
		dims(i, &ps[i])
	}
	return ps
}

func noise(rng *rand.Rand) float64 { return rng.NormFloat64() * 0.3 }

// TestPlantedMixShift: B has more Pods on the slow node pool; nothing else differs but a
// namespace drawn at random. The comparison finds the startup slower, the node pool first with
// the whole shift its share, and the namespace explaining next to nothing.
func TestPlantedMixShift(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	pool := func(slowShare float64) func(i int, p *Pod) {
		return func(i int, p *Pod) {
			p.Dims[DimNodePool] = "fast"
			if rng.Float64() < slowShare {
				p.Dims[DimNodePool] = "slow"
			}
			p.Dims[DimNamespace] = []string{"a", "b", "c"}[rng.IntN(3)]
		}
	}
	mk := func(slowShare float64) []Pod {
		ps := synth(rng, 300, func(int) float64 { return 0 }, pool(slowShare))
		for i := range ps {
			s := 3 + noise(rng)
			if ps[i].Dims[DimNodePool] == "slow" {
				s += 4
			}
			d := time.Duration(s * float64(time.Second))
			ps[i].Startup, ps[i].Spans[phases.PhaseKubelet] = d, d
		}
		return ps
	}
	a, b := Set{Label: "a", Pods: mk(0.2)}, Set{Label: "b", Pods: mk(0.6)}
	res, err := Compare(a, b, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	root := res.Rows[0]
	if !root.Stats[StatMean].Significant || root.Stats[StatMean].Shift.Est < 1 {
		t.Fatalf("startup mean: %+v", root.Stats[StatMean])
	}
	at := res.Attribution[0]
	top := at.Dims[0]
	if top.Dim != "node_pool" || top.Separates || len(top.ConfoundedWith) > 0 {
		t.Fatalf("top dimension %+v", top)
	}
	// Both pools kept their speed: the mix explains it all, within the interval stated.
	if top.Share.Low > 1 || top.Share.High < 1 || top.Share.Low < 0.7 {
		t.Errorf("node pool's share %+v, want an interval around 1", top.Share)
	}
	for _, d := range at.Dims[1:] {
		if d.Dim == "namespace" && math.Abs(d.Share.Est) > 0.15 {
			t.Errorf("the random namespace explains %v", d.Share)
		}
	}
	if !strings.Contains(res.Sentence, "Node pool (") || !strings.Contains(res.Sentence, "kubelet") {
		t.Errorf("sentence: %s", res.Sentence)
	}
}

// TestPlantedRateShift: same mix on both sides, one pool's Pods got 2 s slower in B: the mix
// explains nothing, the rate all of it, and the slow value's part is the rate.
func TestPlantedRateShift(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	mk := func(extra float64) []Pod {
		ps := synth(rng, 200, func(int) float64 { return 0 }, func(i int, p *Pod) {
			p.Dims[DimNodePool] = []string{"p1", "p2"}[i%2]
		})
		for i := range ps {
			s := 3 + noise(rng)
			if ps[i].Dims[DimNodePool] == "p2" {
				s += extra
			}
			ps[i].Startup = time.Duration(s * float64(time.Second))
		}
		return ps
	}
	res, err := Compare(Set{Label: "a", Pods: mk(0)}, Set{Label: "b", Pods: mk(2)}, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	top := res.Attribution[0].Dims[0]
	if top.Dim != "node_pool" || math.Abs(top.Mix.Est) > 1e-9 || top.Rate.Low > 1 || top.Rate.High < 1 {
		t.Fatalf("%+v", top)
	}
	for _, v := range top.Values {
		if v.Value == "p2" && math.Abs(v.Rate-top.Rate.Est) > 0.1 || v.Value == "p1" && math.Abs(v.Rate) > 0.1 {
			t.Errorf("value %s's rate part %v (total %v)", v.Value, v.Rate, top.Rate.Est)
		}
	}
}

// rowNamesForTest are phases and sub-steps the synthetic Pods spend time in.
var rowNamesForTest = []string{phases.PhaseControllers, phases.PhaseScheduling, phases.PhaseStatus,
	phases.SpanImagePull, phases.SpanControllersReplicaSet, phases.SpanReadiness, phases.SpanImagePullTransfer}

// withRows gives each Pod time in every name of rowNamesForTest, drawn from one distribution,
// plus shift in the one named.
func withRows(rng *rand.Rand, ps []Pod, name string, shift time.Duration) {
	for i := range ps {
		for _, n := range rowNamesForTest {
			ps[i].Spans[n] = time.Duration(math.Exp(-1+0.5*rng.NormFloat64()) * float64(time.Second))
		}
		ps[i].Spans[name] += shift
	}
}

// TestNoShiftFalsePositives: both sets drawn from one distribution, 200 times: the startup's
// mean is called significant in about 5% of them (the level), not more; and no phase or sub-step
// is, but in about 5% of the comparisons at most (they are tested as one family).
func TestNoShiftFalsePositives(t *testing.T) {
	o := DefaultOptions()
	o.Resamples = 400
	const trials = 200
	flagged, rowsFlagged := 0, 0
	for seed := range uint64(trials) {
		rng := rand.New(rand.NewPCG(seed, 99))
		lognormal := func(int) float64 { return math.Exp(1 + 0.4*rng.NormFloat64()) }
		dims := func(i int, p *Pod) { p.Dims[DimNode] = []string{"n1", "n2", "n3"}[rng.IntN(3)] }
		a := Set{Label: "a", Pods: synth(rng, 40, lognormal, dims)}
		b := Set{Label: "b", Pods: synth(rng, 40, lognormal, dims)}
		withRows(rng, a.Pods, "", 0)
		withRows(rng, b.Pods, "", 0)
		res, err := Compare(a, b, o)
		if err != nil {
			t.Fatal(err)
		}
		if res.Rows[0].Stats[StatMean].Significant {
			flagged++
		}
	rows:
		for _, r := range res.Rows[1:] {
			for _, e := range r.Stats {
				if e.Significant {
					rowsFlagged++
					break rows
				}
			}
		}
	}
	// Binomial(200, 0.05): mean 10, sd 3.1; the percentile bootstrap runs a little liberal at n=40.
	if flagged > 22 || rowsFlagged > 22 {
		t.Errorf("no shift, yet %d of %d comparisons called the mean's shift significant, %d a row's", flagged, trials, rowsFlagged)
	}
	t.Logf("%d of %d flagged the startup, %d a phase or sub-step, at 95%%", flagged, trials, rowsFlagged)
}

// TestPlantedSubStep: 300 ms more readiness in B, nothing else: that row is significant (the
// family's interval too), it is where the shift lands, and no other sub-step is flagged.
func TestPlantedSubStep(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 11))
	same := func(int, *Pod) {}
	base := func(int) float64 { return 3 + 0.2*rng.NormFloat64() }
	a, b := Set{Label: "a", Pods: synth(rng, 100, base, same)}, Set{Label: "b", Pods: synth(rng, 100, base, same)}
	withRows(rng, a.Pods, phases.SpanReadiness, 0)
	withRows(rng, b.Pods, phases.SpanReadiness, 1500*time.Millisecond)
	res, err := Compare(a, b, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if res.Lead[len(res.Lead)-1] != phases.SpanReadiness {
		t.Fatalf("lands in %v", res.Lead)
	}
	for _, r := range res.Rows[1:] {
		m := r.Stats[StatMean]
		if got, want := m.Significant, r.Span == phases.SpanReadiness; got != want {
			t.Errorf("%s: significant %v, family %+v", r.Span, got, m.Family)
		}
	}
}

// TestConfounded: every slow Pod is on the new kubelet and on node n2: the two are reported
// together, the kubelet version named (the nearer cause), the node as confounded with it.
func TestConfounded(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	mk := func(newShare float64) []Pod {
		return synth(rng, 100, func(int) float64 { return 0 }, func(i int, p *Pod) {
			p.Dims[DimKubelet], p.Dims[DimNode] = "v1.34", "n1"
			p.Startup = time.Duration((2 + noise(rng)) * float64(time.Second))
			if float64(i) < newShare*100 {
				p.Dims[DimKubelet], p.Dims[DimNode] = "v1.37", "n2"
				p.Startup += 3 * time.Second
			}
		})
	}
	res, err := Compare(Set{Label: "a", Pods: mk(0.1)}, Set{Label: "b", Pods: mk(0.5)}, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	dims := res.Attribution[0].Dims
	if len(dims) != 1 || dims[0].Dim != "kubelet_version" || strings.Join(dims[0].ConfoundedWith, ",") != "node" {
		t.Fatalf("%+v", dims)
	}
	if !strings.Contains(res.Sentence, "confounded with node") {
		t.Errorf("sentence: %s", res.Sentence)
	}
}

// TestTooFewPods: a large shift on 5 Pods a side is not called significant, and says why.
func TestTooFewPods(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	same := func(int, *Pod) {}
	a := Set{Label: "a", Pods: synth(rng, 5, func(int) float64 { return 1 + 0.01*rng.Float64() }, same)}
	b := Set{Label: "b", Pods: synth(rng, 5, func(int) float64 { return 9 + 0.01*rng.Float64() }, same)}
	res, err := Compare(a, b, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	m := res.Rows[0].Stats[StatMean]
	if m.Significant || !m.TooFewPods || !m.Shift.excludesZero() {
		t.Fatalf("%+v", m)
	}
	if !strings.Contains(res.Sentence, "too few Pods") {
		t.Errorf("sentence: %s", res.Sentence)
	}
}

// TestStampUncertainty: a 0.3 s shift measured with whole-second stamps (±1 s) is not a shift.
func TestStampUncertainty(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	mk := func(base float64) []Pod {
		return synth(rng, 50, func(int) float64 { return base }, func(i int, p *Pod) {
			p.Uncertain[phases.RootSpanName] = time.Second
		})
	}
	res, err := Compare(Set{Label: "a", Pods: mk(3)}, Set{Label: "b", Pods: mk(3.3)}, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if m := res.Rows[0].Stats[StatMean]; m.Significant || m.Shift.Low > -1.5 {
		t.Fatalf("%+v", m)
	}
}

// TestDeterministic: the same sets give byte-identical JSON; another seed gives other intervals.
func TestDeterministic(t *testing.T) {
	mkSets := func() (Set, Set) {
		rng := rand.New(rand.NewPCG(6, 6))
		f := func(int) float64 { return 2 + rng.Float64() }
		d := func(i int, p *Pod) { p.Dims[DimNode] = []string{"x", "y"}[i%2] }
		return Set{Label: "a", Pods: synth(rng, 30, f, d)}, Set{Label: "b", Pods: synth(rng, 30, f, d)}
	}
	run := func(seed uint64) string {
		a, b := mkSets()
		o := DefaultOptions()
		o.Seed = seed
		res, err := Compare(a, b, o)
		if err != nil {
			t.Fatal(err)
		}
		j, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		return string(j)
	}
	if first, again := run(1), run(1); first != again {
		t.Fatal("two runs differ")
	}
	if run(1) == run(2) {
		t.Fatal("the seed changes nothing")
	}
}

// TestFromSpansHostile: names outside the catalogue are not compared, values are bounded, a
// trace without its root or with a negative root is refused, a Pod not Ready is counted apart.
func TestFromSpansHostile(t *testing.T) {
	long := strings.Repeat("é", 300)
	root := Span{Name: phases.RootSpanName, Duration: time.Second, Attrs: map[string]any{
		phases.AttrOutcome: "ready", phases.AttrNamespace: long, phases.AttrNodeName: 42}}
	p, _, err := FromSpans([]Span{root,
		{Name: "evil.span", Duration: time.Hour},
		{Name: phases.SpanImagePull, Duration: -time.Second},
		{Name: phases.SpanImagePull, Duration: time.Second, Attrs: map[string]any{
			phases.AttrImageCache: "cold", phases.AttrImageSize: math.Inf(1), phases.AttrImageName: long}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.Spans["evil.span"]; ok || p.Spans[phases.SpanImagePull] != time.Second {
		t.Errorf("spans %v", p.Spans)
	}
	if len(p.Dims[DimNamespace]) > maxValue || p.Dims[DimNode] != Unknown || p.Dims[DimImageCache] != "cold" || p.ImageSize != 0 {
		t.Errorf("dims %q, size %d", p.Dims, p.ImageSize)
	}
	if !strings.HasPrefix(long, p.Dims[DimNamespace]) {
		t.Errorf("namespace cut inside a rune: %q", p.Dims[DimNamespace])
	}
	if _, _, err := FromSpans([]Span{{Name: "kubelet"}}); err == nil {
		t.Error("a trace without its root was accepted")
	}
	neg := root
	neg.Duration = -time.Second
	if _, _, err := FromSpans([]Span{neg}); err == nil {
		t.Error("a negative startup was accepted")
	}
	failed := root
	failed.Attrs = map[string]any{phases.AttrOutcome: "failed"}
	if _, outcome, err := FromSpans([]Span{failed}); err != ErrNotReady || outcome != "failed" {
		t.Errorf("failed Pod: %q %v", outcome, err)
	}
}

func TestCompareRefuses(t *testing.T) {
	one := Set{Label: "x", Pods: []Pod{{Startup: time.Second}}}
	if _, err := Compare(Set{Label: "empty"}, one, DefaultOptions()); err == nil {
		t.Error("an empty side was compared")
	}
	o := DefaultOptions()
	o.Level = 1
	if _, err := Compare(one, one, o); err == nil {
		t.Error("level 1 accepted")
	}
}

// TestAllMatchesStat: the one-walk statistics equal each one computed alone, on resamples.
func TestAllMatchesStat(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for n := 1; n < 40; n++ {
		x := make([]float64, n)
		for i := range x {
			x[i] = math.Round(rng.Float64()*10) / 10 // ties too
		}
		c := newColumn(x, nil)
		counts := make([]int, n)
		newResampler(uint64(n)).draw(counts)
		got := c.all(counts, n)
		for s := range numStats {
			if want := c.stat(s, counts, n); math.Abs(got[s]-want) > 1e-12 {
				t.Fatalf("n=%d %s: %v, want %v", n, s.Key(), got[s], want)
			}
		}
	}
}

// TestSharedStepCountsOnce: every Pod of a rollout carries its Deployment's one step; 50 Pods a
// side of one rollout each are one observation of it, however different the two lengths are.
func TestSharedStepCountsOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 12))
	mk := func(step time.Duration) []Pod {
		ps := synth(rng, 50, func(int) float64 { return 2 + rng.Float64() }, func(int, *Pod) {})
		for i := range ps {
			ps[i].Spans[phases.SpanControllersDeployment] = step
			ps[i].Spans[phases.SpanImagePull] = 0
		}
		return ps
	}
	res, err := Compare(Set{Label: "a", Pods: mk(10 * time.Millisecond)}, Set{Label: "b", Pods: mk(40 * time.Millisecond)}, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Rows {
		if r.Span == phases.SpanControllersDeployment {
			if m := r.Stats[StatMean]; m.Significant || !m.TooFewPods {
				t.Fatalf("one step a side called %+v", m)
			}
			return
		}
	}
	t.Fatal("no row of the Deployment's step")
}

// runsOfPods gives the Pods of a side runs of size each, with a run-level offset drawn per run
// (what a run's nodes' load adds to every Pod of it) and a little noise per Pod.
func runsOfPods(rng *rand.Rand, runs, size int, base, runSD, podSD float64) []Pod {
	var ps []Pod
	for r := range runs {
		offset := rng.NormFloat64() * runSD
		for _, p := range synth(rng, size, func(int) float64 { return base + offset + rng.NormFloat64()*podSD }, func(int, *Pod) {}) {
			p.Run = fmt.Sprintf("ns/run-%d", r)
			ps = append(ps, p)
		}
	}
	return ps
}

// TestRunsResampled: runs that differ by a run-level offset (sd 1 s) far more than their Pods
// do (sd 0.1 s), 8 runs of 10 Pods a side, no shift between the sides. Resampling Pods alone
// would call most of these comparisons significant; resampling runs calls few. A shift of 3 s
// planted in every run of B is found.
func TestRunsResampled(t *testing.T) {
	o := DefaultOptions()
	o.Resamples = 400
	const trials = 60
	flagged, podsAlone := 0, 0
	for seed := range uint64(trials) {
		rng := rand.New(rand.NewPCG(seed, 7))
		a := Set{Label: "a", Pods: runsOfPods(rng, 8, 10, 10, 1, 0.1)}
		b := Set{Label: "b", Pods: runsOfPods(rng, 8, 10, 10, 1, 0.1)}
		res, err := Compare(a, b, o)
		if err != nil {
			t.Fatal(err)
		}
		if res.A.Runs != 8 || res.B.Runs != 8 {
			t.Fatalf("%d and %d runs, want 8", res.A.Runs, res.B.Runs)
		}
		if res.Rows[0].Stats[StatMean].Significant {
			flagged++
		}
		for _, s := range []Set{a, b} {
			for i := range s.Pods {
				s.Pods[i].Run = "" // every Pod a run of its own: the Pods alone resampled
			}
		}
		if res, _ := Compare(a, b, o); res.Rows[0].Stats[StatMean].Significant {
			podsAlone++
		}
	}
	t.Logf("no shift: %d of %d flagged resampling runs, %d resampling Pods alone", flagged, trials, podsAlone)
	// The percentile bootstrap over 8 runs a side runs liberal (11 of 60 here at 95%), but far
	// from what resampling the Pods alone calls (43 of 60).
	if flagged > trials/4 || podsAlone < trials/2 {
		t.Errorf("no shift: %d of %d flagged resampling runs (want at most %d), %d resampling Pods alone (want at least %d)",
			flagged, trials, trials/4, podsAlone, trials/2)
	}

	rng := rand.New(rand.NewPCG(1, 8))
	a := Set{Label: "a", Pods: runsOfPods(rng, 8, 10, 10, 1, 0.1)}
	b := Set{Label: "b", Pods: runsOfPods(rng, 8, 10, 13, 1, 0.1)}
	res, err := Compare(a, b, o)
	if err != nil {
		t.Fatal(err)
	}
	if m := res.Rows[0].Stats[StatMean]; !m.Significant {
		t.Errorf("3 s planted in every run of B: %+v not significant", m)
	}
}
