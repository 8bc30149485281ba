//go:build e2e

package e2e

import (
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// settleReplicas is the rollout TestSettleTime measures: the demo's web Pods (an init container,
// a readiness probe, a Service), as many as the other tests' largest.
const settleReplicas = 10

// TestSettleTime measures what readyspan's settle time (2 s) is for, on the real kubelet: how
// late the kubelet's Events about a Pod arrive after the change that lets readyspan call its
// trace complete (the Pod Ready and its address ready in the Service's EndpointSlice, the later
// of the two, on the test's own watches). An Event later than the settle time would be missed by
// the trace, so the test fails on one; the figures say how far the settle time could shrink.
func TestSettleTime(t *testing.T) {
	e := Setup(t)
	ns := e.Namespace(t, "e2e-settle")
	sw := e.watchServing(t, ns)
	events := e.watchKubeletEvents(t, ns)
	e.createService(t, ns, service("web"))
	e.createDeployment(t, ns, webDeployment("web", settleReplicas))
	ready := e.WaitPodsReady(t, ns, "app=web", settleReplicas, 3*time.Minute)
	time.Sleep(2 * readyspanSettle) // Events later than the settle time have the time to show
	var lates []time.Duration
	for _, p := range ready {
		uid := string(p.UID)
		sw.mu.Lock()
		r, s := sw.ready[uid], sw.serving[uid]
		sw.mu.Unlock()
		last, n := events.of(uid)
		if r.IsZero() || s.IsZero() || n == 0 {
			t.Fatalf("Pod %s: Ready %v, serving %v, %d kubelet Events: not all seen", p.Name, r, s, n)
		}
		late := last.Sub(later(r, s))
		lates = append(lates, late)
		if late >= readyspanSettle {
			t.Errorf("Pod %s: a kubelet Event arrived %v after the trace could be complete, beyond the %v settle time", p.Name, late, readyspanSettle)
		}
	}
	slices.Sort(lates)
	t.Logf("SETTLE: %d Pods; the last kubelet Event after the trace could be complete: p50 %v, p99 %v, max %v (negative: every Event came before)",
		len(lates), quantile(lates, 0.5).Round(time.Millisecond), quantile(lates, 0.99).Round(time.Millisecond), quantile(lates, 1).Round(time.Millisecond))
}

// kubeletEvents is the test's own receive time of the latest core/v1 Event the kubelet sent about
// each Pod (by UID), and how many it sent.
type kubeletEvents struct {
	mu   sync.Mutex
	last map[string]time.Time
	n    map[string]int
}

func (e *Env) watchKubeletEvents(t *testing.T, ns string) *kubeletEvents {
	t.Helper()
	w, err := e.Kube.CoreV1().Events(ns).Watch(Ctx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	ke := &kubeletEvents{last: map[string]time.Time{}, n: map[string]int{}}
	go func() {
		for ev := range w.ResultChan() {
			x, ok := ev.Object.(*corev1.Event)
			if !ok || x.Source.Component != "kubelet" || x.InvolvedObject.Kind != "Pod" {
				continue
			}
			uid := string(x.InvolvedObject.UID)
			ke.mu.Lock()
			ke.last[uid], ke.n[uid] = time.Now(), ke.n[uid]+1
			ke.mu.Unlock()
		}
	}()
	return ke
}

func (ke *kubeletEvents) of(uid string) (time.Time, int) {
	ke.mu.Lock()
	defer ke.mu.Unlock()
	return ke.last[uid], ke.n[uid]
}
