package tracer

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/shard"
	"github.com/readyspan/readyspan/watch"
)

// TestShardsSplitExactlyOnce runs three Watchers on one cluster (the fake clientset): one for
// all of it and the two shards of a split. Each Pod that the whole traces must be traced by
// exactly one shard; a shard must receive nothing of the other's workloads (their Deployments,
// ReplicaSets, Pods, the Events about them, their endpoints), so that its correlator holds
// nothing for them.
func TestShardsSplitExactlyOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const deployments, replicas = 8, 3
	var objs []runtime.Object
	var pods []*corev1.Pod
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "all-x1", UID: "uid-slice"}}
	created := metav1.NewTime(time.Now().Add(-2 * time.Second).Truncate(time.Second))
	for i := 0; i < deployments; i++ {
		name, hash := fmt.Sprintf("web-%d", i), fmt.Sprintf("6d4b8c%04d", i)
		dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name), Generation: 1, CreationTimestamp: created},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(replicas))}}
		rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name + "-" + hash, UID: types.UID("uid-rs-" + name), CreationTimestamp: created,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: name, UID: dep.UID, Controller: ptr.To(true)}}},
			Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(replicas))}}
		objs = append(objs, dep, rs)
		for j := 0; j < replicas; j++ {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("%s-p%d", rs.Name, j), UID: types.UID(fmt.Sprintf("uid-%s-%d", name, j)),
				CreationTimestamp: created, Labels: map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: hash},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "web:1"}}}}
			pods = append(pods, p)
			objs = append(objs, p,
				&corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("%s.18c2a1b3c4d5e6f%d", rs.Name, j), UID: types.UID("uid-ev-rs-" + p.Name)},
					InvolvedObject: corev1.ObjectReference{Kind: "ReplicaSet", Namespace: "default", Name: rs.Name, UID: rs.UID},
					Reason:         "SuccessfulCreate", Message: "Created pod: " + p.Name, Type: "Normal", FirstTimestamp: created, LastTimestamp: created, Count: 1})
			slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.0.%d.%d", i, j)},
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: p.Name, UID: p.UID}})
		}
	}
	client := fake.NewClientset(objs...)

	type watched struct {
		name   string
		part   shard.Shard
		w      *watch.Watcher
		corr   *Correlator
		traced []string
		got    []watch.Delta
	}
	var all []*watched
	for _, part := range []shard.Shard{{}, {Index: 0, Total: 2}, {Index: 1, Total: 2}} {
		v := &watched{name: part.String(), part: part}
		v.corr = New(Config{}, SinkFunc(func(tr *phases.Trace) { v.traced = append(v.traced, tr.Pod.UID) }), nil, nil)
		v.w = watch.NewWatcher(client, Kinds, watch.Config{Shard: part}, nil, nil)
		v.w.Start(ctx)
		all = append(all, v)
	}
	for _, v := range all {
		if err := v.w.WaitForSync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The Pods start: scheduled (with an Event each), then Ready; and the slice comes.
	for _, p := range pods {
		sched := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: p.Name + ".18c2a1b3c4d5e6f8", UID: types.UID("uid-ev-" + p.Name)},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: p.Name, UID: p.UID},
			Reason:         "Scheduled", Message: "Successfully assigned default/" + p.Name + " to node-1", Type: "Normal", Count: 1}
		if _, err := client.CoreV1().Events("default").Create(ctx, sched, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		p = p.DeepCopy()
		now := metav1.Now()
		p.Spec.NodeName = "node-1"
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &now, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}}
		if _, err := client.CoreV1().Pods("default").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := client.DiscoveryV1().EndpointSlices("default").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Read each stream until it has been quiet for a while, then let the traces finish.
	for _, v := range all {
		for quiet := false; !quiet; {
			select {
			case d := <-v.w.Deltas():
				v.got = append(v.got, d)
				v.corr.Handle(d)
			case <-time.After(300 * time.Millisecond):
				quiet = true
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			}
		}
		v.corr.Tick(time.Now().Add(time.Hour))
		v.corr.Drain()
		slices.Sort(v.traced)
	}

	whole, shards := all[0], all[1:]
	if len(whole.traced) != len(pods) {
		t.Fatalf("unsharded: %d traces, want %d", len(whole.traced), len(pods))
	}
	var union []string
	for _, v := range shards {
		if len(v.traced) == 0 {
			t.Errorf("shard %s traced nothing: the split is not a split", v.name)
		}
		union = append(union, v.traced...)
		for _, d := range v.got {
			if foreign := foreignIn(v.part, d.Object); foreign != "" {
				t.Errorf("shard %s received %s %s", v.name, d.Type, foreign)
			}
		}
	}
	slices.Sort(union)
	if !slices.Equal(union, whole.traced) {
		t.Errorf("the shards traced %v, the whole %v: not exactly once", union, whole.traced)
	}
}

// foreignIn describes what in an object is about another shard's workloads, or "".
func foreignIn(part shard.Shard, obj runtime.Object) string {
	key := ""
	switch o := obj.(type) {
	case *corev1.Pod:
		key = shard.PodKey(o, shard.Deployments)
	case *appsv1.ReplicaSet:
		key = shard.ReplicaSetKey(o, shard.Deployments)
	case *appsv1.Deployment:
		key = shard.WorkloadKey(o.Namespace, "Deployment", o.Name)
	case *corev1.Event:
		// The test's Events name their Pod or ReplicaSet "<deployment>-<hash>[-pN]".
		name := o.InvolvedObject.Name
		for i := 0; i < 8; i++ {
			dep := fmt.Sprintf("web-%d-", i)
			if len(name) > len(dep) && name[:len(dep)] == dep {
				key = shard.WorkloadKey(o.Namespace, "Deployment", dep[:len(dep)-1])
			}
		}
	case *discoveryv1.EndpointSlice:
		for _, ep := range o.Endpoints {
			if f := foreignIn(part, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace}, InvolvedObject: *ep.TargetRef}); f != "" {
				return "the endpoint of " + ep.TargetRef.Name
			}
		}
		return ""
	}
	if key == "" || part.Owns(key) {
		return ""
	}
	return fmt.Sprintf("%T of %s", obj, key)
}
