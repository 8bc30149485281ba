//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// servingWatch records, for each Pod of a namespace, when the test's own watches saw it Ready and
// its address ready in an EndpointSlice: readyspan exports a Service's Pod when both hold and its
// settle time has passed, so the later of the two is where its export lag starts.
type servingWatch struct {
	mu      sync.Mutex
	ready   map[string]time.Time // Pod UID → first seen Ready
	serving map[string]time.Time // Pod UID → first seen ready in an EndpointSlice
}

func (e *Env) watchServing(t *testing.T, ns string) *servingWatch {
	t.Helper()
	sw := &servingWatch{ready: map[string]time.Time{}, serving: map[string]time.Time{}}
	ctx := Ctx(t)
	pw, err := e.Kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sl, err := e.Kube.DiscoveryV1().EndpointSlices(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pw.Stop(); sl.Stop() })
	go func() {
		for ev := range pw.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && PodReady(p) {
				sw.first(sw.ready, string(p.UID))
			}
		}
	}()
	go func() {
		for ev := range sl.ResultChan() {
			s, ok := ev.Object.(*discoveryv1.EndpointSlice)
			if !ok {
				continue
			}
			for _, ep := range s.Endpoints {
				if ep.TargetRef != nil && ep.Conditions.Ready != nil && *ep.Conditions.Ready {
					sw.first(sw.serving, string(ep.TargetRef.UID))
				}
			}
		}
	}()
	return sw
}

func (sw *servingWatch) first(m map[string]time.Time, uid string) {
	now := time.Now()
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if _, ok := m[uid]; !ok {
		m[uid] = now
	}
}

// exportLags are, per Pod, the witness's first receipt of its root span less the moment it was
// Ready and serving on the test's watches, less readyspan's settle time (2 s, on purpose).
func (sw *servingWatch) exportLags(t *testing.T, e *Env, uids map[string]string) []time.Duration {
	t.Helper()
	received := e.capturedRootTimes(t, "pod.startup")
	sw.mu.Lock()
	defer sw.mu.Unlock()
	var lags []time.Duration
	for uid, name := range uids {
		r, s, got := sw.ready[uid], sw.serving[uid], received[TraceID(uid)]
		if r.IsZero() || s.IsZero() || got.IsZero() {
			t.Errorf("Pod %s: Ready %v, serving %v, received %v: one was not seen", name, r, s, got)
			continue
		}
		lags = append(lags, got.Sub(later(r, s))-readyspanSettle)
	}
	slices.Sort(lags)
	return lags
}

const readyspanSettle = 2 * time.Second

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// quantile of sorted durations (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(i, 0)]
}

// capturedRootTimes is when the witness first received each trace's root span named name.
func (e *Env) capturedRootTimes(t testing.TB, name string) map[string]time.Time {
	t.Helper()
	data, err := os.ReadFile(os.Getenv("READYSPAN_E2E_CAPTURE"))
	if err != nil {
		t.Fatalf("read the OTLP witness's capture: %v", err)
	}
	first := map[string]time.Time{}
	for _, line := range bytes.Split(data, []byte("\n")) {
		var s CapturedSpan
		if json.Unmarshal(line, &s) != nil || s.ParentSpanID != "" || s.Name != name {
			continue
		}
		if f, ok := first[s.TraceID]; !ok || s.Received.Before(f) {
			first[s.TraceID] = s.Received
		}
	}
	return first
}
