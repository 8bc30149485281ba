package report

import "math"

// Line is y = Intercept + Slope·x, fitted by least squares.
type Line struct {
	Intercept, Slope float64
	R2               float64 // coefficient of determination (1 for two points)
	N                int
}

// At is the line's value at x.
func (l Line) At(x float64) float64 { return l.Intercept + l.Slope*x }

// FitLine fits a line to the points (xs[i], ys[i]); fewer than two distinct xs give a zero Line.
func FitLine(xs, ys []float64) Line {
	n := len(xs)
	if n != len(ys) || n < 2 {
		return Line{}
	}
	var sx, sy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
	}
	mx, my := sx/float64(n), sy/float64(n)
	var sxx, sxy, syy float64
	for i := range xs {
		dx, dy := xs[i]-mx, ys[i]-my
		sxx += dx * dx
		sxy += dx * dy
		syy += dy * dy
	}
	if sxx == 0 {
		return Line{}
	}
	l := Line{Slope: sxy / sxx, N: n}
	l.Intercept = my - l.Slope*mx
	l.R2 = 1
	if syy > 0 {
		l.R2 = sxy * sxy / (sxx * syy)
	}
	if math.IsNaN(l.R2) {
		l.R2 = 0
	}
	return l
}
