//go:build e2e && e2e_faults

// Fault case 9: node clocks ahead of and behind the control plane. KWOK (faults.sh kwok-up) plays
// the kubelet of three fake nodes whose stamps (condition and container times, Event times, the
// UnixNano in Event names) are moved by the node's offset: skew-ahead +2 s, skew-behind -2 s,
// skew-none not at all (the control group). readyspan corrects a clock that is ahead and records
// the lead on the root; a clock that is behind it cannot measure (a lag is also what delivery
// delay looks like) but proves from kubelet stamps that precede the bind, and passes those
// stamps over for its own receive times. Judged against the test's own Pod watch.
package e2e

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	skewOffset   = 2 * time.Second // the nodes' clock offsets, ±
	skewReplicas = 5               // Pods per node
	// skewAheadTolerance bounds readyspan's measured lead of skew-ahead's clock around the
	// offset. The lead is the largest (stamp − receive time) over the Pod's kubelet Events, so
	// it falls short of the offset by the quickest of their deliveries (KWOK's request, the
	// apiserver, the watch; measured 3-4 ms), and cannot exceed it: KWOK stamps before it sends.
	skewAheadTolerance = 150 * time.Millisecond
	// skewKubeletBound is the bound docs/faults.md states for the kubelet phase (the Pod's bind
	// to its containers ready), skewed node or not, against the test's own watch: the span's
	// duration may differ from Ready − bound, both as the test's watch saw them, by at most this.
	// Each end may be off by the delivery of one change to two watchers (boundaryTolerance,
	// 50 ms, as the other end-to-end tests allow); measured: at most 18 ms.
	skewKubeletBound = 2 * boundaryTolerance
)

// skewNodes are the fake nodes and their clocks' offsets (faults.sh kwok-up's stages).
var skewNodes = []struct {
	name   string
	offset time.Duration
}{
	{"skew-ahead", skewOffset},
	{"skew-behind", -skewOffset},
	{"skew-none", 0},
}

const kwokNodeAnnotation = "kwok.x-k8s.io/node"

// createSkewNodes creates the fake nodes KWOK manages (annotated, labelled type=kwok, tainted so
// that only this test's Pods go there, as test/scale/load does), waits until they are Ready, and
// deletes them when the test ends.
func (e *Env) createSkewNodes(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for _, n := range skewNodes {
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        n.name,
				Annotations: map[string]string{kwokNodeAnnotation: "fake"},
				Labels: map[string]string{"type": "kwok", "kubernetes.io/hostname": n.name,
					"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "kubernetes.io/role": "agent"},
			},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: kwokNodeAnnotation, Value: "fake", Effect: corev1.TaintEffectNoSchedule}}},
		}
		if _, err := e.Kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create node %s: %v", n.name, err)
		}
	}
	t.Cleanup(func() {
		for _, n := range skewNodes {
			if err := e.Kube.CoreV1().Nodes().Delete(context.Background(), n.name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Logf("delete node %s: %v", n.name, err)
			}
		}
	})
	Eventually(t, 60*time.Second, "the fake nodes Ready", func() (bool, error) {
		for _, n := range skewNodes {
			node, err := e.Kube.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			ready := false
			for _, c := range node.Status.Conditions {
				ready = ready || c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
			}
			if !ready {
				return false, fmt.Errorf("node %s not Ready", n.name)
			}
		}
		return true, nil
	})
}

// skewDeployment puts replicas Pods on one fake node, with the fields KWOK's stages read (one
// container; scale.readyspan.dev/image warm: no pull).
func skewDeployment(name, node string, replicas int32) *appsv1.Deployment {
	labels := LocalPodLabels(map[string]string{"app": name})
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: int32p(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{"scale.readyspan.dev/image": "warm"}},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken: boolp(false), TerminationGracePeriodSeconds: int64p(0),
					NodeSelector: map[string]string{"kubernetes.io/hostname": node},
					Tolerations:  []corev1.Toleration{{Key: kwokNodeAnnotation, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
					Containers: []corev1.Container{{
						Name: "app", Image: BusyboxImage, ImagePullPolicy: corev1.PullIfNotPresent,
						Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
					}},
				},
			},
		},
	}
}

// podTruth is what the test's own Pod watch saw: when each Pod was first seen bound to a node
// and first seen Ready, by the test's clock (the control plane's: same host).
type podTruth struct {
	mu    sync.Mutex
	bound map[string]time.Time
	ready map[string]time.Time
}

func (e *Env) watchBindReady(t *testing.T, ns string) *podTruth {
	t.Helper()
	pt := &podTruth{bound: map[string]time.Time{}, ready: map[string]time.Time{}}
	w, err := e.Kube.CoreV1().Pods(ns).Watch(Ctx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	go func() {
		for ev := range w.ResultChan() {
			now := time.Now()
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			uid := string(p.UID)
			pt.mu.Lock()
			if _, seen := pt.bound[uid]; !seen && p.Spec.NodeName != "" {
				pt.bound[uid] = now
			}
			if _, seen := pt.ready[uid]; !seen && PodReady(p) {
				pt.ready[uid] = now
			}
			pt.mu.Unlock()
		}
	}()
	return pt
}

func (pt *podTruth) get(uid string) (bound, ready time.Time) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return pt.bound[uid], pt.ready[uid]
}

// numTag reads a numeric tag (Jaeger returns numbers as float64, some as strings).
func numTag(s *Span, key string) (float64, bool) {
	v, ok := s.Tag(key)
	if !ok {
		return 0, false
	}
	switch x := v.(type) {
	case float64:
		return x, true
	case string:
		var f float64
		_, err := fmt.Sscan(x, &f)
		return f, err == nil
	}
	return 0, false
}

// skewGroup gathers one node's figures.
type skewGroup struct {
	pods                 int
	maxDiff              time.Duration // max |kubelet span − truth|
	aheadMin, aheadMax   float64       // readyspan.clock.kubelet_ahead_ms, over the Pods that have it
	ahead                int           // Pods with it
	behindMin, behindMax float64       // readyspan.clock.kubelet_behind_ms, over the Pods that have it
	behind               int           // Pods with it
	inconsistent         int           // roots marked readyspan.time.inconsistent
}

// Node clocks 2 s ahead of and 2 s behind the control plane: every trace ordered and nested, the
// ahead node's lead measured and recorded on the root (and no lead on the others), and the
// kubelet phase within skewKubeletBound of the truth on every node.
func TestFaultClockSkew(t *testing.T) {
	e := Setup(t)
	fault(t, "kwok-up")
	t.Cleanup(func() { fault(t, "kwok-down") }) // last: KWOK deletes its Pods until then
	e.createSkewNodes(t)
	ns := e.Namespace(t, "fault-skew")
	truth := e.watchBindReady(t, ns)
	for _, n := range skewNodes {
		e.createService(t, ns, service(n.name))
		e.createDeployment(t, ns, skewDeployment(n.name, n.name, skewReplicas))
	}
	// Before the nodes go: the Pods deleted while KWOK still plays their kubelet.
	t.Cleanup(func() {
		ctx := context.Background()
		for _, n := range skewNodes {
			_ = e.Kube.AppsV1().Deployments(ns).Delete(ctx, n.name, metav1.DeleteOptions{})
		}
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			l, err := e.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err == nil && len(l.Items) == 0 {
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
		t.Logf("Pods of %s still there a minute after their Deployments were deleted", ns)
	})

	pods := map[string]*corev1.Pod{}
	for _, n := range skewNodes {
		for _, p := range e.WaitPodsReady(t, ns, "app="+n.name, skewReplicas, 3*time.Minute) {
			if p.Spec.NodeName != n.name {
				t.Fatalf("Pod %s on node %q, want %s", p.Name, p.Spec.NodeName, n.name)
			}
			pods[string(p.UID)] = &p
		}
	}
	uids := make([]string, 0, len(pods))
	for uid := range pods {
		uids = append(uids, uid)
	}
	sort.Strings(uids)
	traces := e.WaitTraces(t, uids, 3*time.Minute, complete)

	groups := map[string]*skewGroup{}
	for _, n := range skewNodes {
		groups[n.name] = &skewGroup{aheadMin: math.Inf(1), aheadMax: math.Inf(-1), behindMin: math.Inf(1), behindMax: math.Inf(-1)}
	}
	for _, uid := range uids {
		pod, tr := pods[uid], traces[uid]
		g := groups[pod.Spec.NodeName]
		g.pods++
		// (a) ordered and nested.
		checkStartupTraceOn(t, tr, pod, pod.Spec.NodeName, "ready", true)
		root, kubelet := tr.Root(), tr.Find("kubelet")
		if root == nil || kubelet == nil {
			continue
		}
		if v, _ := root.Tag("readyspan.time.inconsistent"); v == true || v == "true" {
			// Such a trace is kept out of the histograms: the bound below would not hold for them.
			g.inconsistent++
			t.Errorf("Pod %s on %s: root marked readyspan.time.inconsistent: %s", pod.Name, pod.Spec.NodeName, root.StrTag("readyspan.time.inconsistency"))
		}
		// (b) the correction on the root.
		ahead, hasAhead := numTag(root, "readyspan.clock.kubelet_ahead_ms")
		if hasAhead {
			g.ahead++
			g.aheadMin, g.aheadMax = math.Min(g.aheadMin, ahead), math.Max(g.aheadMax, ahead)
		}
		// A clock behind is not measured, but proven: the kubelet's stamps before the bind. The
		// proof is a lower bound, at most the offset (the scheduler stamps its event after the
		// bind, within a few ms).
		behind, hasBehind := numTag(root, "readyspan.clock.kubelet_behind_ms")
		if hasBehind {
			g.behind++
			g.behindMin, g.behindMax = math.Min(g.behindMin, behind), math.Max(g.behindMax, behind)
		}
		if wantBehind := pod.Spec.NodeName == "skew-behind"; hasBehind != wantBehind || hasBehind && behind > float64((skewOffset+50*time.Millisecond).Milliseconds()) {
			t.Errorf("Pod %s on %s: readyspan.clock.kubelet_behind_ms %v (present %v), want present %v and at most %v",
				pod.Name, pod.Spec.NodeName, behind, hasBehind, wantBehind, (skewOffset + 50*time.Millisecond).Milliseconds())
		}
		switch pod.Spec.NodeName {
		case "skew-ahead":
			lo, hi := float64((skewOffset - skewAheadTolerance).Milliseconds()), float64((skewOffset + skewAheadTolerance).Milliseconds())
			if !hasAhead || ahead < lo || ahead > hi {
				t.Errorf("Pod %s on skew-ahead: readyspan.clock.kubelet_ahead_ms %v (present %v), want in [%v, %v]", pod.Name, ahead, hasAhead, lo, hi)
			}
		default:
			if hasAhead && ahead >= float64(50) {
				t.Errorf("Pod %s on %s: readyspan.clock.kubelet_ahead_ms %v, want none (or < 50)", pod.Name, pod.Spec.NodeName, ahead)
			}
		}
		// (c) the kubelet phase against the truth.
		bound, ready := truth.get(uid)
		if bound.IsZero() || ready.IsZero() {
			t.Errorf("Pod %s: the test's watch saw bound %v, Ready %v: one is missing", pod.Name, bound, ready)
			continue
		}
		want := ready.Sub(bound)
		diff := kubelet.Duration() - want
		if diff.Abs() > g.maxDiff {
			g.maxDiff = diff.Abs()
		}
		t.Logf("Pod %s on %s: kubelet span %v (%s → %s), truth %v (bound on the watch %s, Ready %s), diff %v; start %+v, end %+v from the watch; ahead_ms %v %v, behind_ms %v %v",
			pod.Name, pod.Spec.NodeName, kubelet.Duration(), kubelet.StrTag("readyspan.time.source.start"), kubelet.StrTag("readyspan.time.source.end"),
			want, bound.Format(time.StampMicro), ready.Format(time.StampMicro), diff,
			kubelet.StartTime().Sub(bound), kubelet.EndTime().Sub(ready), ahead, hasAhead, behind, hasBehind)
		if kubelet.DurationUS < 0 || want < 0 {
			t.Errorf("Pod %s: negative kubelet phase: span %v, truth %v", pod.Name, kubelet.Duration(), want)
		}
		if diff.Abs() > skewKubeletBound {
			t.Errorf("Pod %s on %s: kubelet span %v, truth (Ready − bound on the test's watch) %v: %v apart, bound %v",
				pod.Name, pod.Spec.NodeName, kubelet.Duration(), want, diff, skewKubeletBound)
		}
	}
	var parts []string
	for _, n := range skewNodes {
		g := groups[n.name]
		a := "none"
		if g.ahead > 0 {
			a = fmt.Sprintf("%v–%v ms on %d", g.aheadMin, g.aheadMax, g.ahead)
		}
		b := "none"
		if g.behind > 0 {
			b = fmt.Sprintf("%v–%v ms on %d", g.behindMin, g.behindMax, g.behind)
		}
		parts = append(parts, fmt.Sprintf("%s (%+v): %d Pods, max |kubelet span − truth| %v, kubelet_ahead_ms %s, kubelet_behind_ms %s, inconsistent %d",
			n.name, n.offset, g.pods, g.maxDiff.Round(time.Millisecond), a, b, g.inconsistent))
	}
	t.Logf("FAULT clock-skew: %s; readyspan peak RSS %s", strings.Join(parts, "; "), peakRSS(t, "readyspan"))
}
