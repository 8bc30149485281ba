package tracer

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/watch"
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

// BenchmarkCorrelatorManyPods streams N copies of one real captured startup (run8: a
// Deployment's two Pods, behind a Service) through one correlator, as a busy cluster would, and
// reports allocations per Pod. Each copy is a Deployment of its own (copyDeployment): its
// Deployment, ReplicaSet, Service, EndpointSlice, Pods and Events, so every Pod is its own
// Deployment's scale-up, as in the capture (TestManyPodsStream).
func BenchmarkCorrelatorManyPods(b *testing.B) {
	stream := manyPodsStream(b)
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

// manyPodsCopies is BenchmarkCorrelatorManyPods' copies of the capture, 2 Pods each.
const manyPodsCopies = 200

// manyPodsRecording is the capture BenchmarkCorrelatorManyPods copies.
var manyPodsRecording = filepath.Join("testdata", "real-node", "run8-slow-pull-watch")

// manyPodsStream is BenchmarkCorrelatorManyPods' stream: the capture's deltas, once per copy.
func manyPodsStream(tb testing.TB) []watch.Delta {
	deltas, err := Kinds.LoadRecording(manyPodsRecording)
	if err != nil {
		tb.Fatal(err)
	}
	var stream []watch.Delta
	for n := 0; n < manyPodsCopies; n++ {
		for _, d := range deltas {
			stream = append(stream, copyDeployment(d, n))
		}
	}
	return stream
}

// copyDeployment gives the objects of copy n distinct names and UIDs, and what refers to them
// the same: owner references, the Events' objects and the names in their messages, the Service's
// selector and its EndpointSlice's Pods. Shared, a ReplicaSet's one scale-up would be every
// copy's, and the Pods past its count taken for the ReplicaSet's replacements.
func copyDeployment(d watch.Delta, n int) watch.Delta {
	r := relabeler{suffix: fmt.Sprintf("-%04d", n), digits: fmt.Sprintf("%04d", n)}
	switch o := d.Object.(type) {
	case *appsv1.Deployment:
		x := o.DeepCopy()
		r.meta(&x.ObjectMeta)
		r.selector(x.Spec.Selector)
		r.labels(x.Spec.Template.Labels)
		d.Object = x
	case *appsv1.ReplicaSet:
		x := o.DeepCopy()
		r.meta(&x.ObjectMeta)
		r.selector(x.Spec.Selector)
		r.labels(x.Spec.Template.Labels)
		d.Object = x
	case *corev1.Pod:
		x := o.DeepCopy()
		r.meta(&x.ObjectMeta)
		d.Object = x
	case *corev1.Service:
		x := o.DeepCopy()
		r.meta(&x.ObjectMeta)
		r.labels(x.Spec.Selector)
		d.Object = x
	case *discoveryv1.EndpointSlice:
		x := o.DeepCopy()
		r.meta(&x.ObjectMeta)
		if s, ok := x.Labels[discoveryv1.LabelServiceName]; ok {
			x.Labels[discoveryv1.LabelServiceName] = s + r.suffix
		}
		for i := range x.Endpoints {
			if t := x.Endpoints[i].TargetRef; t != nil {
				t.Name, t.UID = t.Name+r.suffix, r.uid(t.UID)
			}
		}
		d.Object = x
	case *corev1.Event:
		e := o.DeepCopy()
		r.event(&e.ObjectMeta)
		e.InvolvedObject.Name, e.InvolvedObject.UID = r.ref(e.InvolvedObject.Kind, e.InvolvedObject.Name, e.InvolvedObject.UID)
		e.Message = r.message(e.Message)
		d.Object = e
	case *eventsv1.Event: // the same Events, read through events.k8s.io/v1: relabelled alike
		e := o.DeepCopy()
		r.event(&e.ObjectMeta)
		e.Regarding.Name, e.Regarding.UID = r.ref(e.Regarding.Kind, e.Regarding.Name, e.Regarding.UID)
		e.Note = r.message(e.Note)
		d.Object = e
	}
	return d
}

// relabeler relabels the objects of one copy: names take its suffix; UIDs end in its digits
// (a Pod's is its trace ID, and must stay one).
type relabeler struct{ suffix, digits string }

func (r relabeler) uid(u types.UID) types.UID {
	return types.UID(string(u[:len(u)-len(r.digits)]) + r.digits)
}

func (r relabeler) meta(m *metav1.ObjectMeta) {
	m.Name, m.UID = m.Name+r.suffix, r.uid(m.UID)
	for i := range m.OwnerReferences {
		o := &m.OwnerReferences[i]
		o.Name, o.UID = o.Name+r.suffix, r.uid(o.UID)
	}
	r.labels(m.Labels)
}

// labels relabels the app label, the one the capture's selectors select by.
func (r relabeler) labels(l map[string]string) {
	if v, ok := l["app"]; ok {
		l["app"] = v + r.suffix
	}
}

func (r relabeler) selector(s *metav1.LabelSelector) {
	if s != nil {
		r.labels(s.MatchLabels)
	}
}

// event relabels an Event's own name (<involved object>.<hex ns>: the copy's name, and the
// stamp its suffix carries) and UID.
func (r relabeler) event(m *metav1.ObjectMeta) {
	m.UID += types.UID(r.suffix)
	if i := strings.LastIndex(m.Name, "."); i > 0 {
		m.Name = m.Name[:i] + r.suffix + m.Name[i:]
	}
}

// ref relabels an Event's object, when it is one of the copy's.
func (r relabeler) ref(kind, name string, uid types.UID) (string, types.UID) {
	switch kind {
	case "Pod", "ReplicaSet", "Deployment":
		return name + r.suffix, r.uid(uid)
	}
	return name, uid
}

// message relabels the object names in the messages the capture's Events carry that name one:
// SuccessfulCreate's Pod, ScalingReplicaSet's ReplicaSet and Scheduled's Pod.
func (r relabeler) message(m string) string {
	if name, ok := strings.CutPrefix(m, "Created pod: "); ok {
		return "Created pod: " + name + r.suffix
	}
	for _, p := range []string{"Scaled up replica set ", "Scaled down replica set "} {
		if rest, ok := strings.CutPrefix(m, p); ok {
			if name, counts, ok := strings.Cut(rest, " from "); ok {
				return p + name + r.suffix + " from " + counts
			}
		}
	}
	if rest, ok := strings.CutPrefix(m, "Successfully assigned "); ok {
		if pod, node, ok := strings.Cut(rest, " to "); ok {
			return "Successfully assigned " + pod + r.suffix + " to " + node
		}
	}
	return m
}

// relabel gives copy n's Pods and Events distinct names and UIDs; its owners, Service and
// EndpointSlice stay the capture's, shared by every copy (BenchmarkCacheBytesPerPod counts them
// once). Copies meant as startups of their own are copyDeployment's.
func relabel(d watch.Delta, n int) watch.Delta {
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
	var services []watch.Delta
	for i := 0; i < 2000; i++ {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-%d", i%4), Name: fmt.Sprintf("svc-%d", i), UID: types.UID(fmt.Sprintf("uid-svc-%d", i))},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": fmt.Sprintf("app-%d", i)}}}
		services = append(services, watch.Delta{Resource: ResourceServices, Type: watch.Added, Object: svc, Initial: true})
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
