package prometheus

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// histogramSeries is the histogram series of the metric with exactly these labels, nil if none.
func histogramSeries(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) *dto.Histogram {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; !ok || v != l.GetValue() {
					continue series
				}
			}
			return m.GetHistogram()
		}
	}
	return nil
}

// histCount is the _count of the histogram series with exactly these labels, 0 if none.
func histCount(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	return float64(histogramSeries(t, reg, name, labels).GetSampleCount())
}

// histSum is the _sum of the histogram series with exactly these labels, 0 if none.
func histSum(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	return histogramSeries(t, reg, name, labels).GetSampleSum()
}
