package tracer

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/readyspan/readyspan/phases"
)

// BenchmarkCorrelatorDeployment measures end-to-end reconstruction (watch deltas in, traces
// out) for the 3-replica Deployment scenario; Pods/s is the figure the README quotes.
func BenchmarkCorrelatorDeployment(b *testing.B) {
	s := deploymentScenario()
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
		// <involved object>.<hex ns>: the copy's name, and the stamp its suffix carries.
		if i := strings.LastIndex(e.Name, "."); i > 0 {
			e.Name = e.Name[:i] + suffix + e.Name[i:]
		}
		if e.InvolvedObject.Kind == "Pod" {
			e.InvolvedObject.UID = types.UID(string(e.InvolvedObject.UID[:len(e.InvolvedObject.UID)-4]) + fmt.Sprintf("%04d", n))
			e.InvolvedObject.Name += suffix
		}
		d.Object = e
	}
	return d
}

// BenchmarkCorrelatorManyServices is BenchmarkCorrelatorDeployment in a cluster with 2,000
// other Services (the scale test bed's 20,000 Pods come with one per Deployment), and with the
// deadline tick running while the traces settle: whether a Pod is behind a Service must not cost
// a walk over every Service in the cluster each time it is asked.
func BenchmarkCorrelatorManyServices(b *testing.B) {
	s := deploymentScenario()
	var services []Delta
	for i := 0; i < 2000; i++ {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-%d", i%4), Name: fmt.Sprintf("svc-%d", i), UID: types.UID(fmt.Sprintf("uid-svc-%d", i))},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": fmt.Sprintf("app-%d", i)}}}
		services = append(services, Delta{Resource: ResourceServices, Type: Added, Object: svc, Initial: true})
	}
	pods := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer() // the cluster as it stands; what is measured is the Pods' startups in it
		c := New(Config{Settle: 2 * time.Second}, SinkFunc(func(*phases.Trace) { pods++ }), nil, nil)
		for _, d := range services {
			c.Handle(d)
		}
		b.StartTimer()
		var last time.Time
		for _, d := range s.deltas {
			c.Handle(d)
			for ; !d.Recv.IsZero() && last.Before(d.Recv); last = last.Add(200 * time.Millisecond) {
				if last.IsZero() {
					last = d.Recv
				}
				c.Tick(last)
			}
		}
		for end := last.Add(3 * time.Second); last.Before(end); last = last.Add(200 * time.Millisecond) {
			c.Tick(last)
		}
	}
	b.ReportMetric(float64(pods)/b.Elapsed().Seconds(), "pods/s")
}

// deploymentScenario is the 3-replica Deployment scenario's stream, as the benchmarks replay it.
func deploymentScenario() *sim {
	s := newSim(&testing.T{}, "default")
	for _, sc := range scenarios {
		if sc.name == "deployment-3-replicas" {
			sc.build(s)
		}
	}
	return s
}
