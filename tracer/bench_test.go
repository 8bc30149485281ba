package tracer

import (
	"fmt"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/readyspan/readyspan/phases"
)

// BenchmarkCorrelatorDeployment measures end-to-end reconstruction (watch deltas in, traces
// out) for the 3-replica Deployment scenario; Pods/s is the figure the README quotes.
func BenchmarkCorrelatorDeployment(b *testing.B) {
	var sc scenario
	for _, s := range scenarios {
		if s.name == "deployment-3-replicas" {
			sc = s
		}
	}
	s := newSim(&testing.T{}, "default")
	sc.build(s)
	pods := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c := New(Config{}, SinkFunc(func(*phases.Trace) { pods++ }), nil, nil)
		for _, d := range s.deltas {
			c.Handle(d)
		}
	}
	b.ReportMetric(float64(pods)/b.Elapsed().Seconds(), "pods/s")
}

// BenchmarkCorrelatorManyPods streams N copies of one real captured startup (run8) with
// distinct UIDs through one correlator, as a busy cluster would, and reports allocations per Pod.
func BenchmarkCorrelatorManyPods(b *testing.B) {
	deltas, err := LoadRecording(filepath.Join("testdata", "real-node", "run8-slow-pull-watch"))
	if err != nil {
		b.Fatal(err)
	}
	const copies = 200
	var stream []Delta
	for n := 0; n < copies; n++ {
		for _, d := range deltas {
			stream = append(stream, relabel(d, n))
		}
	}
	pods := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c := New(Config{Backfill: true}, SinkFunc(func(*phases.Trace) { pods++ }), nil, nil)
		for _, d := range stream {
			c.Handle(d)
		}
		c.Flush(phases.OutcomeInProgress)
	}
	b.ReportMetric(float64(pods)/b.Elapsed().Seconds(), "pods/s")
}

// relabel gives the objects of copy n distinct names and UIDs.
func relabel(d Delta, n int) Delta {
	suffix := fmt.Sprintf("-%04d", n)
	switch o := d.Object.(type) {
	case *corev1.Pod:
		p := o.DeepCopy()
		p.UID = types.UID(string(p.UID[:len(p.UID)-4]) + fmt.Sprintf("%04d", n))
		p.Name += suffix
		d.Object = p
	case *corev1.Event:
		e := o.DeepCopy()
		e.UID += types.UID(suffix)
		if e.InvolvedObject.Kind == "Pod" {
			e.InvolvedObject.UID = types.UID(string(e.InvolvedObject.UID[:len(e.InvolvedObject.UID)-4]) + fmt.Sprintf("%04d", n))
			e.InvolvedObject.Name += suffix
		}
		d.Object = e
	}
	return d
}
