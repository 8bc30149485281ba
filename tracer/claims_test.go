package tracer

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/watch"
)

// claimObject is a PersistentVolumeClaim as the API returns it, in phase.
func (s *sim) claimObject(name string, phase corev1.PersistentVolumeClaimPhase, volume string, createdMs int) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		TypeMeta: metav1.TypeMeta{Kind: "PersistentVolumeClaim", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns, UID: "6f1c0e0a-0000-4000-8000-00000000c1a1", ResourceVersion: s.nextRV(),
			CreationTimestamp: secs(s.at(createdMs)), Finalizers: []string{"kubernetes.io/pvc-protection"}},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: new("readyspan-local"), VolumeName: volume},
		Status: corev1.PersistentVolumeClaimStatus{Phase: phase},
	}
}

// TestClaimBinding: a claim the watch saw turn Bound between the Pod's creation and its bind
// is drawn in scheduling with its name, ending when the watch showed it Bound; one first seen
// Bound (an initial list, or created bound) states no binding time and draws nothing.
func TestClaimBinding(t *testing.T) {
	for _, tt := range []struct {
		name    string
		initial bool // the claim's first version comes from an initial list
		pending bool // first seen Pending, then Bound
		want    bool
	}{
		{"seen Pending then Bound", false, true, true},
		{"listed Pending then Bound", true, true, true},
		{"first seen Bound", false, false, false},
		{"listed Bound", true, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newSim(t, "default")
			first := s.claimObject("data", corev1.ClaimPending, "", -3000)
			if !tt.pending {
				first = s.claimObject("data", corev1.ClaimBound, "local-pv", -3000)
			}
			s.deltas = append(s.deltas, watch.Delta{Resource: ResourceClaims, Type: watch.Added, Object: first, Recv: s.recv(-3000), Initial: tt.initial})
			p := s.pod("a", nil, nil, web, 0)
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}})
			s.deltas[len(s.deltas)-1].Object = p.DeepCopy()
			s.emit(ResourceClaims, watch.Modified, s.claimObject("data", corev1.ClaimBound, "local-pv", -3000), s.at(1200))
			happy(s, "a", 1300, false, false)

			traces := runSim(t, s)
			if len(traces) != 1 {
				t.Fatalf("%d traces", len(traces))
			}
			tr := traces[0]
			sp := tr.Find(phases.SpanSchedulingVolumeBinding + "/data")
			if (sp != nil) != tt.want {
				t.Fatalf("%s drawn: %v, want %v", phases.SpanSchedulingVolumeBinding, sp != nil, tt.want)
			}
			if sp == nil {
				return
			}
			if !sp.End.Equal(s.recv(1200)) || sp.Attr(phases.AttrClaimName) != "data" || sp.Attr(phases.AttrVolumeName) != "local-pv" {
				t.Fatalf("%v → %v %v, want the end at the Bound received at %v", sp.Start, sp.End, sp.Attrs, s.recv(1200))
			}
			if sched := tr.Find(phases.PhaseScheduling); sp.ParentSpanID != sched.SpanID || sched.End.Before(sp.End) {
				t.Fatal("the claim's binding is not inside the scheduling phase")
			}
		})
	}
}

// runSim feeds a simulation's stream to a correlator, in receive order, each object through the
// watch's transform as the informer keeps it, and returns its traces.
func runSim(t *testing.T, s *sim) []*phases.Trace {
	t.Helper()
	var traces []*phases.Trace
	c := New(Config{Settle: time.Second}, SinkFunc(func(tr *phases.Trace) { traces = append(traces, tr) }), nil, nil)
	var last time.Time
	for _, d := range s.deltas {
		slim, err := Kinds.Transform(d.Object.DeepCopyObject())
		if err != nil {
			t.Fatal(err)
		}
		d.Object = slim.(runtime.Object)
		c.Handle(d)
		last = d.Recv
	}
	c.Tick(last.Add(time.Minute))
	return traces
}

// TestAttachEventsKept: the attach/detach controller's events about a Pod (Normal
// SuccessfulAttachVolume, Warning FailedAttachVolume, as it writes them: no fieldPath, its own
// source) are kept on kubelet.volumes, which they are evidence for; before, the Normal one was
// dropped and the Warning one only noted on the kubelet phase.
func TestAttachEventsKept(t *testing.T) {
	s := newSim(t, "default")
	s.pod("a", nil, nil, web, 0)
	s.bind("a", 50)
	s.coreEvent(s.podRef("a", ""), "attachdetach-controller", "", corev1.EventTypeWarning, "FailedAttachVolume",
		`AttachVolume.Attach failed for volume "pvc-7f3c" : rpc error: code = Unavailable desc = connection refused`, 120)
	s.coreEvent(s.podRef("a", ""), "attachdetach-controller", "", corev1.EventTypeNormal, "SuccessfulAttachVolume",
		`AttachVolume.Attach succeeded for volume "pvc-7f3c" `, 2400)
	s.kubeletStart("a", 80, 2600) // the sandbox after the attach and the mount
	started := s.run("a", "web", false, false, 4300, 2660)
	s.running("a", "web", false, started, started+900, false)
	s.ready("a", started+2100)
	traces := runSim(t, s)
	if len(traces) != 1 {
		t.Fatalf("%d traces", len(traces))
	}
	v := traces[0].Find(phases.SpanKubeletVolumes)
	if v == nil {
		t.Fatalf("no %s", phases.SpanKubeletVolumes)
	}
	var names []string
	for _, e := range v.Events() {
		names = append(names, e.Name)
	}
	if len(names) != 2 || names[0] != "FailedAttachVolume" || names[1] != "SuccessfulAttachVolume" {
		t.Fatalf("events %v, want the failed attach, then the attach", names)
	}
	if v.Status == phases.StatusError || traces[0].Summary.FailureReason != "" {
		t.Fatal("an attach that succeeded is no failure")
	}
	// The volumes were not mounted before the attach: the window starts there.
	want := float64(v.End.Sub(s.at(2400)).Nanoseconds()) / 1e6
	if got := v.Attr(phases.AttrVolumesWindow); got != want {
		t.Fatalf("window %v ms, want %v (from the attach at %v to %v)", got, want, s.at(2400), v.End)
	}
}
