package compare

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/readyspan/readyspan/phases"
)

// BenchmarkCompare: two sets of 2,000 Pods, each with a dozen rows, the default 2,000 resamples.
func BenchmarkCompare(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	names := []string{phases.PhaseControllers, phases.PhaseScheduling, phases.PhaseKubelet, phases.PhaseStatus,
		phases.SpanImagePull, phases.SpanControllersReplicaSet, phases.SpanImagePullTransfer, phases.SpanReadiness}
	mk := func() []Pod {
		return synth(rng, 2000, func(int) float64 { return 2 + rng.Float64() }, func(i int, p *Pod) {
			for _, n := range names {
				p.Spans[n] = time.Duration(rng.Float64() * float64(time.Second))
			}
			p.Dims[DimNode] = []string{"a", "b", "c", "d"}[i%4]
			p.Dims[DimNamespace] = []string{"x", "y"}[i%2]
		})
	}
	a, c := Set{Label: "a", Pods: mk()}, Set{Label: "b", Pods: mk()}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compare(a, c, DefaultOptions()); err != nil {
			b.Fatal(err)
		}
	}
}
