package fakeapi

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// recordedTemplate is the template of the committed recording of the scale test bed.
func recordedTemplate(t *testing.T) *Template {
	t.Helper()
	dir, err := Unpack("testdata/kwok-25.tar.gz", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tm, err := LoadTemplate(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// TestRecordedTemplate checks the template of the real recording against what the load driver
// asked of the cluster (test/scale/load: Deployments of 10 replicas, one Service each) and what a
// startup costs a watcher on the live test bed (about 20 watch events).
func TestRecordedTemplate(t *testing.T) {
	tm := recordedTemplate(t)
	if tm.Pods != 10 {
		t.Errorf("the unit started %d Pods, the driver's Deployments have 10 replicas", tm.Pods)
	}
	byRes := map[string]int{}
	for _, e := range tm.events {
		byRes[e.res.GVR.Resource]++
	}
	if byRes["deployments"] == 0 || byRes["services"] != 1 || byRes["replicasets"] == 0 || byRes["endpointslices"] == 0 || byRes["events"] < tm.Pods {
		t.Errorf("events of the unit by resource: %v", byRes)
	}
	if per := float64(tm.Events()) / float64(tm.Pods); per < 12 || per > 30 {
		t.Errorf("%.1f watch events per startup (%v)", per, byRes)
	}
	if len(tm.nodes) != 51 {
		t.Errorf("%d Nodes in the initial state, the test bed had 50 fake ones and the real one", len(tm.nodes))
	}
	if tm.Span <= 0 || tm.Span > time.Minute {
		t.Errorf("the unit's startup spans %s", tm.Span)
	}
}

// TestRecordedStream serves copies of the real recording in protobuf to client-go's informers
// for every resource the stream holds: each decodes every event, and ends with every Pod Ready,
// bound to one of the initial Nodes.
func TestRecordedStream(t *testing.T) {
	tm := recordedTemplate(t)
	api, cfg, s := serveTemplate(t, tm, 40, time.Second, true)
	client := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	f := informers.NewSharedInformerFactory(client, 0)
	var mu sync.Mutex
	seen := map[string]int{}
	var synced []cache.InformerSynced
	for _, r := range Recorded {
		inf, err := f.ForResource(r.GVR)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { mu.Lock(); seen[r.GVR.Resource]++; mu.Unlock() },
			UpdateFunc: func(any, any) { mu.Lock(); seen[r.GVR.Resource]++; mu.Unlock() },
			DeleteFunc: func(any) { mu.Lock(); seen[r.GVR.Resource]++; mu.Unlock() },
		})
		synced = append(synced, inf.Informer().HasSynced)
	}
	f.Start(ctx.Done())
	defer f.Shutdown()
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		t.Fatal("caches did not sync")
	}
	api.Start(ctx)
	<-api.Done()
	want := map[string]int{"nodes": len(s.initial)}
	for _, e := range s.events {
		want[e.res.GVR.Resource]++
	}
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		for r, n := range want {
			if seen[r] < n {
				return false, nil
			}
		}
		return true, nil
	})
	mu.Lock()
	if err != nil || len(seen) != len(want) {
		t.Fatalf("changes seen %v, want %v", seen, want)
	}
	mu.Unlock()
	nodes := map[string]bool{}
	for _, o := range s.initial {
		nodes[o.key[1:]] = true
	}
	inf, _ := f.ForResource(mustLookup("", "v1", "pods").GVR)
	pods := inf.Informer().GetStore().List()
	if len(pods) != s.Startups {
		t.Errorf("%d Pods in the store, the stream started %d", len(pods), s.Startups)
	}
	for _, o := range pods {
		p := o.(*corev1.Pod)
		ready := false
		for _, c := range p.Status.Conditions {
			ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
		}
		if !ready || !nodes[p.Spec.NodeName] || !strings.HasPrefix(p.Name, "ceil") {
			t.Errorf("Pod %s on %q: Ready %v", p.Name, p.Spec.NodeName, ready)
		}
	}
	if rq := api.Requests(); rq.Protobuf < len(Recorded) {
		t.Errorf("requests answered in protobuf: %d of %+v", rq.Protobuf, rq)
	}
}
