package report

import (
	"math"
	"testing"
)

func TestFitLine(t *testing.T) {
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	l := FitLine([]float64{1000, 2500, 5000}, []float64{110, 200, 350})
	// Exact points of y = 50 + 0.06x.
	if !near(l.Intercept, 50) || !near(l.Slope, 0.06) || !near(l.R2, 1) || l.N != 3 {
		t.Errorf("FitLine = %+v, want intercept 50, slope 0.06, R² 1", l)
	}
	if !near(l.At(150000), 9050) {
		t.Errorf("At(150000) = %v, want 9050", l.At(150000))
	}
	noisy := FitLine([]float64{0, 1, 2, 3}, []float64{0, 2, 1, 3})
	if !near(noisy.Slope, 0.8) || !near(noisy.Intercept, 0.3) || noisy.R2 >= 1 || noisy.R2 <= 0.5 {
		t.Errorf("noisy fit = %+v, want slope 0.8, intercept 0.3, 0.5 < R² < 1", noisy)
	}
	for _, bad := range [][2][]float64{{{1}, {1}}, {{2, 2}, {1, 3}}, {{1, 2}, {1}}} {
		if got := FitLine(bad[0], bad[1]); got != (Line{}) {
			t.Errorf("FitLine(%v, %v) = %+v, want zero", bad[0], bad[1], got)
		}
	}
}
