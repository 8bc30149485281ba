// Package scrape reads counters from Prometheus text exposition (readyspan's /metrics, the
// apiserver's /metrics) for the scale test bed's report.
package scrape

import (
	"fmt"
	"io"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Families parses exposition text.
func Families(r io.Reader) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	return fams, nil
}

// ByLabel sums a counter or gauge's samples by the value of one label, keeping only samples whose
// labels include every pair in match ("" as label sums everything under the key "").
func ByLabel(fams map[string]*dto.MetricFamily, name, label string, match map[string]string) map[string]float64 {
	out := map[string]float64{}
	f, ok := fams[name]
	if !ok {
		return out
	}
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, lp := range m.GetLabel() {
			labels[lp.GetName()] = lp.GetValue()
		}
		if !matches(labels, match) {
			continue
		}
		var v float64
		switch {
		case m.GetCounter() != nil:
			v = m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			v = m.GetGauge().GetValue()
		case m.GetUntyped() != nil:
			v = m.GetUntyped().GetValue()
		default:
			continue
		}
		out[labels[label]] += v
	}
	return out
}

// HistogramByLabel is ByLabel for a histogram: the sums and the counts of its observations, by
// the value of label.
func HistogramByLabel(fams map[string]*dto.MetricFamily, name, label string, match map[string]string) (sum, count map[string]float64) {
	sum, count = map[string]float64{}, map[string]float64{}
	f, ok := fams[name]
	if !ok {
		return sum, count
	}
	for _, m := range f.GetMetric() {
		h := m.GetHistogram()
		if h == nil {
			continue
		}
		labels := map[string]string{}
		for _, lp := range m.GetLabel() {
			labels[lp.GetName()] = lp.GetValue()
		}
		if !matches(labels, match) {
			continue
		}
		sum[labels[label]] += h.GetSampleSum()
		count[labels[label]] += float64(h.GetSampleCount())
	}
	return sum, count
}

func matches(labels, match map[string]string) bool {
	for k, v := range match {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// Diff returns after − before for every key of after, leaving out zeros.
func Diff(after, before map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// Sum adds up the values.
func Sum(m map[string]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}

// Text is the exposition text of a /metrics body, for callers with a string.
func Text(s string) io.Reader { return strings.NewReader(s) }
