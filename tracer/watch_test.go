package tracer

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/readyspan/readyspan/phases"
)

// TestWatcherDrivesCorrelator runs the real informers against the fake clientset: a Pod is
// created, scheduled and made Ready through the API, and one trace comes out with watch times.
func TestWatcherDrivesCorrelator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := fake.NewClientset()
	w := NewWatcher(client, WatchConfig{}, nil, nil)
	var mu sync.Mutex
	var traces []*phases.Trace
	c := New(Config{}, SinkFunc(func(tr *phases.Trace) { mu.Lock(); traces = append(traces, tr); mu.Unlock() }), nil, nil)
	w.Start(ctx)
	if err := w.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	if p := w.Problem(); p != "" {
		t.Fatalf("problem after sync: %s", p)
	}
	loopCtx, stopLoop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		Loop(loopCtx, w.Deltas(), c, 50*time.Millisecond, func(d Delta) { t.Logf("delta %s %s %T", d.Resource, d.Type, d.Object) })
		close(done)
	}()

	s := newSim(t, "default")
	s.pod("live", nil, nil, []container{{name: "web", image: busybox}}, 0)
	pods := client.CoreV1().Pods("default")
	p := s.pods["live"].DeepCopy()
	p.ResourceVersion = ""
	p.Spec.InitContainers = nil
	p.CreationTimestamp = metav1.Now() // the fake apiserver does not stamp it
	created, err := pods.Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	step := func(change func(*corev1.Pod)) {
		t.Helper()
		time.Sleep(20 * time.Millisecond)
		cur, err := pods.Get(ctx, created.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		change(cur)
		if _, err := pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	now := metav1.Now()
	step(func(p *corev1.Pod) {
		p.Spec.NodeName = "nodetest"
		setCond(p, corev1.PodScheduled, corev1.ConditionTrue, now, "", "")
	})
	step(func(p *corev1.Pod) {
		p.Status.StartTime = &now
		setCond(p, corev1.PodReadyToStartContainers, corev1.ConditionTrue, now, "", "")
	})
	step(func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodRunning
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}
		setCond(p, corev1.ContainersReady, corev1.ConditionTrue, now, "", "")
		setCond(p, corev1.PodReady, corev1.ConditionTrue, now, "", "")
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(traces)
		mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopLoop()
	<-done
	if len(traces) != 1 {
		t.Fatalf("%d traces, want 1", len(traces))
	}
	tr := traces[0]
	if tr.Summary.Outcome != phases.OutcomeReady {
		t.Fatalf("outcome %s", tr.Summary.Outcome)
	}
	if src := tr.Phase("scheduling").Attr(phases.AttrSourceEnd); src != "watch" {
		t.Errorf("bind seen by the watch should be the scheduling end, got %v", src)
	}
	if d := tr.Phase("kubelet").Duration(); d <= 0 {
		t.Errorf("kubelet phase %v, want a real interval between watch events", d)
	}
}

// TestWatcherForbidden: a list refused by RBAC is reported once, naming the resource, and
// readyspan is not ready.
func TestWatcherForbidden(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	client := fake.NewClientset()
	client.PrependReactor("list", "endpointslices", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}, "",
			errForbidden)
	})
	errs := &countErrors{}
	w := NewWatcher(client, WatchConfig{}, errs, nil)
	w.Start(ctx)
	syncCtx, stop := context.WithTimeout(ctx, 2*time.Second)
	defer stop()
	err := w.WaitForSync(syncCtx)
	if err == nil || !strings.Contains(err.Error(), "endpointslices") || !strings.Contains(err.Error(), "forbidden") {
		t.Fatalf("want a forbidden error naming endpointslices, got %v", err)
	}
	if p := w.Problem(); !strings.Contains(p, "endpointslices") {
		t.Fatalf("Problem() = %q", p)
	}
	if errs.n["endpointslices/forbidden"] == 0 {
		t.Fatalf("forbidden not counted: %v", errs.n)
	}
}

var errForbidden = errForbiddenT("User \"system:serviceaccount:readyspan:readyspan\" cannot list resource \"endpointslices\" in API group \"discovery.k8s.io\" at the cluster scope")

type errForbiddenT string

func (e errForbiddenT) Error() string { return string(e) }

type countErrors struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *countErrors) WatchError(resource, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[resource+"/"+reason]++
}

// TestTransformDropsSecrets: env, args, commands and annotations never reach the caches.
func TestTransformDropsSecrets(t *testing.T) {
	s := newSim(t, "default")
	p := s.pod("x", nil, []container{{name: "init", image: busybox}}, web, 0).DeepCopy()
	p.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{\"token\":\"hunter2\"}"}
	p.ManagedFields[0].FieldsV1 = metav1.NewFieldsV1(`{"f:spec":{}}`)
	out, err := Transform(p)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.Pod)
	if got.Annotations != nil || got.ManagedFields[0].FieldsV1 != nil {
		t.Fatal("annotations or managedFields contents kept")
	}
	for _, c := range append(got.Spec.InitContainers, got.Spec.Containers...) {
		if c.Env != nil || c.Args != nil || c.Command != nil {
			t.Fatalf("container %s keeps env/args/command", c.Name)
		}
	}
	if got.Spec.Containers[0].ReadinessProbe == nil || got.ManagedFields[0].Manager != "kubectl-create" {
		t.Fatal("transform dropped what the correlator reads")
	}
}
