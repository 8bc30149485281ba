package tracer

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/watch"
)

// TestNodeTransform: what the watch keeps of a Node is its identity, creation, Ready and
// NetworkUnavailable conditions and the keys of its NoSchedule and NoExecute taints, whatever its
// labels, images and other conditions weigh.
func TestNodeTransform(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 12, 2, 18, 54, 38, 0, time.UTC))
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-1-23", UID: "u1", ResourceVersion: "9", CreationTimestamp: created,
			Labels:        map[string]string{"big": strings.Repeat("x", 60)},
			Annotations:   map[string]string{"node.alpha.kubernetes.io/ttl": "0", "huge": strings.Repeat("y", 4000)},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: "Update"}}},
		Spec: corev1.NodeSpec{PodCIDR: "10.0.0.0/24", Taints: []corev1.Taint{
			{Key: "k", Value: strings.Repeat("v", 60), Effect: corev1.TaintEffectNoSchedule},
			{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule},
			{Key: strings.Repeat("t", 1000), Effect: corev1.TaintEffectNoExecute},
		}},
		Status: corev1.NodeStatus{
			Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Message: strings.Repeat("m", 200)},
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status", LastTransitionTime: created},
				{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse, Reason: "RouteCreated", Message: strings.Repeat("n", 200), LastTransitionTime: created},
			},
		},
	}
	for i := range 50 {
		n.Status.Images = append(n.Status.Images, corev1.ContainerImage{Names: []string{strings.Repeat("i", 100) + string(rune('a'+i%26))}, SizeBytes: 1})
	}
	out, err := Kinds.Transform(n)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.Node)
	want := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-1-23", UID: "u1", ResourceVersion: "9", CreationTimestamp: created},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{
			{Key: "k", Effect: corev1.TaintEffectNoSchedule}, {Key: strings.Repeat("t", maxTaintKey), Effect: corev1.TaintEffectNoExecute},
		}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: created},
			{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse, LastTransitionTime: created},
		}},
	}
	if got.String() != want.String() {
		t.Errorf("kept %s\nwant %s", got.String(), want.String())
	}
}

// TestNodeReadyOnce: a Node's first Ready is the one a Pod waited for; it going NotReady and Ready
// again later changes nothing, and a deleted Node is forgotten.
func TestNodeReadyOnce(t *testing.T) {
	c := New(Config{}, SinkFunc(func(*phases.Trace) {}), nil, nil)
	t0 := time.Date(2026, 12, 2, 18, 54, 38, 0, time.UTC)
	node := func(ready corev1.ConditionStatus, ltt time.Time) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", CreationTimestamp: metav1.NewTime(t0)},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, LastTransitionTime: metav1.NewTime(ltt)}}}}
	}
	c.Handle(watch.Delta{Resource: ResourceNodes, Type: watch.Added, Object: node(corev1.ConditionFalse, t0), Recv: t0.Add(40 * time.Millisecond)})
	c.Handle(watch.Delta{Resource: ResourceNodes, Type: watch.Modified, Object: node(corev1.ConditionTrue, t0.Add(2*time.Second)), Recv: t0.Add(2300 * time.Millisecond)})
	c.Handle(watch.Delta{Resource: ResourceNodes, Type: watch.Modified, Object: node(corev1.ConditionFalse, t0.Add(9*time.Second)), Recv: t0.Add(9 * time.Second)})
	c.Handle(watch.Delta{Resource: ResourceNodes, Type: watch.Modified, Object: node(corev1.ConditionTrue, t0.Add(20*time.Second)), Recv: t0.Add(20 * time.Second)})
	n := c.nodes()["n1"]
	if n == nil {
		t.Fatal("the Node is not kept")
	}
	want := phases.Times{phases.StampOf(t0.Add(2*time.Second), phases.SourceStatus), phases.StampOf(t0.Add(2300*time.Millisecond), phases.SourceWatch)}
	if len(n.ready) != 2 || n.ready[0] != want[0] || n.ready[1] != want[1] {
		t.Errorf("ready %v, want the first Ready %v", n.ready, want)
	}
	if n.created[0] != phases.StampOf(t0, phases.SourceMetadata) || n.created[1] != phases.StampOf(t0.Add(40*time.Millisecond), phases.SourceWatch) {
		t.Errorf("created %v", n.created)
	}
	c.Handle(watch.Delta{Resource: ResourceNodes, Type: watch.Deleted, Object: node(corev1.ConditionTrue, t0), Recv: t0.Add(time.Minute)})
	if len(c.nodes()) != 0 {
		t.Error("a deleted Node is kept")
	}
}
