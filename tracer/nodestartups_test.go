package tracer

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/readyspan/readyspan/node"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/watch"
)

// startupBed feeds a correlator that traces node startups and keeps what it exports.
type startupBed struct {
	c     *Correlator
	nodes []*node.Trace
	pods  []*phases.Trace
	t0    time.Time
}

func newStartupBed() *startupBed {
	b := &startupBed{t0: time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)}
	b.c = New(Config{Nodes: NodeSinkFunc(func(t *node.Trace) { b.nodes = append(b.nodes, t) })},
		SinkFunc(func(t *phases.Trace) { b.pods = append(b.pods, t) }), nil, nil)
	return b
}

func (b *startupBed) at(ms int) time.Time { return b.t0.Add(time.Duration(ms) * time.Millisecond) }

// resourceOf is the resource of a test's object.
func resourceOf(o any) watch.Resource {
	switch o.(type) {
	case *corev1.Node:
		return ResourceNodes
	case *nodeClaim:
		return ResourceNodeClaims
	}
	return ResourcePods
}

// kwokNode is a Node as Karpenter's KWOK provider creates it (its name, the unregistered taint,
// no conditions yet), at creation second s.
func kwokNode(b *startupBed, ready, network bool, taints ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "kwok-default-x7k2q-abc", UID: "11111111-2222-4333-8444-555555555555",
		CreationTimestamp: metav1.NewTime(b.at(7_000))}}
	for _, k := range taints {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: k, Effect: corev1.TaintEffectNoExecute})
	}
	if ready {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(b.at(9_000))})
	}
	if network {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(b.at(11_000))})
	}
	return n
}

func kwokClaim(b *startupBed, nodeName string, conds ...string) *nodeClaim {
	c := &nodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-x7k2q", UID: "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee",
		CreationTimestamp: metav1.NewTime(b.at(1_000)), Labels: map[string]string{nodePoolLabel: "default"}}}
	c.Status.NodeName = nodeName
	at := map[string]int{claimLaunched: 2_000, claimRegistered: 8_000, claimInitialized: 13_000}
	for _, t := range conds {
		c.Status.Conditions = append(c.Status.Conditions, nodeClaimCondition{Type: t, Status: "True", LastTransitionTime: metav1.NewTime(b.at(at[t]))})
	}
	return c
}

func daemonPod(b *startupBed, ready bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "agent-x", Namespace: "kube-system", UID: types.UID("dddddddd-0000-4000-8000-000000000001"),
		CreationTimestamp: metav1.NewTime(b.at(7_000)),
		OwnerReferences:   []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "ds", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{NodeName: "kwok-default-x7k2q-abc"}}
	if ready {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(b.at(14_000))}}
	}
	return p
}

// TestNodeStartupLifecycle: a Node added while readyspan runs is traced from its NodeClaim's
// creation through each condition to its DaemonSet Pod Ready, and exported once, when all are
// in; a Node first seen in a list is not. A condition's whole second is narrowed by the watch
// that first showed it (the step ends at the receive time within that second).
func TestNodeStartupLifecycle(t *testing.T) {
	b := newStartupBed()
	const name = "kwok-default-x7k2q-abc"
	b.c.Handle(watch.Delta{Resource: ResourceNodes, Type: watch.Added, Initial: true, Object: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "old", UID: "u-old"}}, Recv: b.at(0)})
	steps := []struct {
		ms  int
		typ watch.DeltaType
		obj any
	}{
		{1_900, watch.Added, kwokClaim(b, "")},
		{2_100, watch.Modified, kwokClaim(b, "", claimLaunched)},
		{7_100, watch.Added, kwokNode(b, false, false, "karpenter.sh/unregistered")},
		{7_200, watch.Added, daemonPod(b, false)},
		{8_100, watch.Modified, kwokNode(b, false, false)},
		{8_150, watch.Modified, kwokClaim(b, name, claimLaunched, claimRegistered)},
		{9_400, watch.Modified, kwokNode(b, true, false)},
		{11_200, watch.Modified, kwokNode(b, true, true)},
		{13_100, watch.Modified, kwokClaim(b, name, claimLaunched, claimRegistered, claimInitialized)},
	}
	for _, s := range steps {
		b.c.Handle(watch.Delta{Resource: resourceOf(s.obj), Type: s.typ, Object: s.obj.(runtime.Object), Recv: b.at(s.ms)})
	}
	if len(b.nodes) != 0 {
		t.Fatalf("exported before its DaemonSet Pod was Ready: %d traces", len(b.nodes))
	}
	b.c.Handle(watch.Delta{Resource: ResourcePods, Type: watch.Modified, Object: daemonPod(b, true), Recv: b.at(14_100)})
	if len(b.nodes) != 1 {
		t.Fatalf("%d node traces, want 1", len(b.nodes))
	}
	tr := b.nodes[0]
	if tr.TraceID != phases.TraceIDFor("aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee") || tr.Summary.Outcome != node.OutcomeReady || tr.Summary.Provisioner != phases.ServiceKarpenter {
		t.Errorf("trace %s outcome %s provisioner %q", tr.TraceID, tr.Summary.Outcome, tr.Summary.Provisioner)
	}
	want := map[string]time.Time{
		node.SpanLaunch: b.at(2_100), node.SpanInstance: b.at(7_100), node.SpanRegistration: b.at(8_150),
		node.SpanKubeletReady: b.at(9_400), node.SpanNetwork: b.at(11_200),
		node.SpanInitialization: b.at(13_100), node.SpanDaemonSets: b.at(14_100),
	}
	// The unregistered taint went with the registration (8.1 s): the first version Ready (9.4 s)
	// had no startup taint, so the taints add no step of their own.
	drawn := 0
	for _, sp := range tr.Spans[1:] {
		w, ok := want[sp.Name]
		if sp.Name == node.SpanDaemonPod {
			continue
		}
		if !ok {
			t.Errorf("step %s drawn", sp.Name)
			continue
		}
		drawn++
		if !sp.End.Equal(w) {
			t.Errorf("%s ends at %s, want %s", sp.Name, sp.End.Format(time.StampMilli), w.Format(time.StampMilli))
		}
	}
	if drawn != len(want) {
		t.Errorf("%d steps drawn, want %d", drawn, len(want))
	}
	b.c.Tick(b.at(60_000))
	b.c.Flush(phases.OutcomeInProgress)
	if len(b.nodes) != 1 {
		t.Errorf("%d node traces after a tick and a flush, want the one", len(b.nodes))
	}
}

// TestNodeStartupStuckAndDeleted: a Node whose startup never ends is exported stuck after the
// stuck deadline, saying what it waited for; one deleted first is exported deleted.
func TestNodeStartupStuckAndDeleted(t *testing.T) {
	b := newStartupBed()
	b.c.Handle(watch.Delta{Resource: ResourceNodes, Type: watch.Added, Object: kwokNode(b, false, false, "karpenter.sh/unregistered"), Recv: b.at(7_100)})
	b.c.Tick(b.at(7_100 + int(DefaultStuckAfter/time.Millisecond)))
	if len(b.nodes) != 1 || b.nodes[0].Summary.Outcome != node.OutcomeStuck || b.nodes[0].Startup.Reason != "not Ready" {
		t.Fatalf("traces %d, want one stuck for not Ready", len(b.nodes))
	}
	b = newStartupBed()
	n := kwokNode(b, true, false)
	b.c.Handle(watch.Delta{Resource: ResourceNodes, Type: watch.Added, Object: n, Recv: b.at(7_100)})
	if len(b.nodes) != 1 || b.nodes[0].Summary.Outcome != node.OutcomeReady {
		t.Fatalf("a Node added Ready, untainted, no NodeClaim, no DaemonSet Pod: %d traces", len(b.nodes))
	}
	b = newStartupBed()
	b.c.Handle(watch.Delta{Resource: ResourceNodes, Type: watch.Added, Object: kwokNode(b, false, false), Recv: b.at(7_100)})
	b.c.Handle(watch.Delta{Resource: ResourceNodes, Type: watch.Deleted, Object: kwokNode(b, false, false), Recv: b.at(9_000)})
	if len(b.nodes) != 1 || b.nodes[0].Summary.Outcome != node.OutcomeDeleted {
		t.Fatalf("a Node deleted while starting: %d traces", len(b.nodes))
	}
}
