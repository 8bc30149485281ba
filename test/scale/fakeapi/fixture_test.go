package fakeapi

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/readyspan/readyspan/watch"
)

// t0 is the fixture's first receive time.
var t0 = time.Date(2026, 12, 2, 20, 0, 0, 0, time.UTC)

// writeFixture writes a small recording as ceiling record writes one: whole objects with their
// kind, each line with its receive time. Deployment scale-0001 starts two Pods on node kwok-0
// (created at 0 s, Ready at 1.5 s and 2 s, their addresses ready in the EndpointSlice at 1.6 s
// and 2.1 s); Deployment scale-0002 starts one Pod, later, and is not the template's unit.
func writeFixture(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string][]watch.Line{}
	add := func(stream string, typ watch.DeltaType, at time.Duration, obj runtime.Object) {
		gvks, _, err := scheme.Scheme.ObjectKinds(obj)
		if err != nil {
			t.Fatal(err)
		}
		obj.GetObjectKind().SetGroupVersionKind(gvks[0])
		raw, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		recv := t0.Add(at)
		files[stream] = append(files[stream], watch.Line{Type: typ, Object: raw, Recv: &recv})
	}
	meta := func(name, uid string, at time.Duration, rv int) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: "scale-0", UID: types.UID(uid), ResourceVersion: fmt.Sprint(rv),
			CreationTimestamp: metav1.NewTime(t0.Add(at).Add(-5 * time.Millisecond).Truncate(time.Second))}
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "kwok-0", UID: "00000000-0000-4000-8000-00000000000e", ResourceVersion: "5"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	node.Namespace = ""
	add("nodes", "ADDED", -time.Minute, node)
	for d, unit := range []struct {
		name string
		pods int
		at   time.Duration
	}{{"scale-0001", 2, 0}, {"scale-0002", 1, 10 * time.Second}} {
		base := unit.at
		uid := func(k int) string { return fmt.Sprintf("%08x-0000-4000-8000-%012x", d+1, k) }
		rep := int32(unit.pods)
		dep := &appsv1.Deployment{ObjectMeta: meta(unit.name, uid(0), base, 100*d+10), Spec: appsv1.DeploymentSpec{Replicas: &rep,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": unit.name}}}}
		add("deployments", "ADDED", base, dep)
		svc := &corev1.Service{ObjectMeta: meta(unit.name, uid(1), base, 100*d+11), Spec: corev1.ServiceSpec{Selector: map[string]string{"app": unit.name}}}
		add("services", "ADDED", base, svc)
		rsName := unit.name + "-5d4f8"
		ctrl := true
		rs := &appsv1.ReplicaSet{ObjectMeta: meta(rsName, uid(2), base+10*time.Millisecond, 100*d+12), Spec: appsv1.ReplicaSetSpec{Replicas: &rep}}
		rs.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: unit.name, UID: types.UID(uid(0)), Controller: &ctrl}}
		add("replicasets", "ADDED", base+10*time.Millisecond, rs)
		slice := &discoveryv1.EndpointSlice{ObjectMeta: meta(unit.name+"-abcde", uid(3), base+20*time.Millisecond, 100*d+13), AddressType: discoveryv1.AddressTypeIPv4}
		slice.Labels = map[string]string{discoveryv1.LabelServiceName: unit.name}
		add("endpointslices", "ADDED", base+20*time.Millisecond, slice.DeepCopy())
		for p := 0; p < unit.pods; p++ {
			name := fmt.Sprintf("%s-%c", rsName, 'a'+p)
			pod := &corev1.Pod{ObjectMeta: meta(name, uid(10+p), base+30*time.Millisecond, 100*d+20+p),
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.scale.invalid/app:v1"}}}}
			pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rsName, UID: types.UID(uid(2)), Controller: &ctrl}}
			add("pods", "ADDED", base+30*time.Millisecond, pod.DeepCopy())
			pod.Spec.NodeName = "kwok-0"
			pod.ResourceVersion = fmt.Sprint(100*d + 30 + p)
			add("pods", "MODIFIED", base+100*time.Millisecond, pod.DeepCopy())
			ev := &corev1.Event{ObjectMeta: meta(fmt.Sprintf("%s.%x", name, t0.Add(base+100*time.Millisecond).UnixNano()), uid(20+p), base+110*time.Millisecond, 100*d+40+p),
				InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "scale-0", Name: name, UID: types.UID(uid(10 + p))},
				Reason:         "Scheduled", Message: fmt.Sprintf("Successfully assigned scale-0/%s to kwok-0", name), Type: "Normal",
				EventTime: metav1.NewMicroTime(t0.Add(base + 100*time.Millisecond))}
			add("events.core.v1", "ADDED", base+110*time.Millisecond, ev)
			readyAt := base + 1500*time.Millisecond + time.Duration(p)*500*time.Millisecond
			pod.ResourceVersion = fmt.Sprint(100*d + 50 + p)
			pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0.Add(readyAt).Truncate(time.Second))}}
			add("pods", "MODIFIED", readyAt, pod.DeepCopy())
			ready := true
			slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.200.0.%d", p+1)},
				Conditions: discoveryv1.EndpointConditions{Ready: &ready}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "scale-0", Name: name, UID: types.UID(uid(10 + p))}})
			slice.ResourceVersion = fmt.Sprint(100*d + 60 + p)
			add("endpointslices", "MODIFIED", readyAt+100*time.Millisecond, slice.DeepCopy())
		}
	}
	for stream, lines := range files {
		f, err := os.Create(filepath.Join(dir, "watch."+stream+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines {
			b, _ := json.Marshal(l)
			f.Write(append(b, '\n'))
		}
		f.Close()
	}
	return dir
}
