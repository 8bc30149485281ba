//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// withVolume is a sleeper mounting a volume at /vol.
func withVolume(name string, v corev1.VolumeSource) *corev1.Pod {
	p := sleeper(name, BusyboxImage)
	p.Spec.Volumes = []corev1.Volume{{Name: "vol", VolumeSource: v}}
	p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "vol", MountPath: "/vol"}}
	return p
}

// waitEvent waits for an Event of reason about the Pod and returns it.
func (e *Env) waitEvent(t *testing.T, ns, pod, reason string, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, reason+" about "+pod, func() (bool, error) {
		for _, ev := range e.PodEvents(t, ns, pod) {
			if ev.Reason == reason {
				return true, nil
			}
		}
		return false, nil
	})
}

// TestVolumesLateConfigMap: a Pod whose ConfigMap volume is missing waits in kubelet.volumes
// until the ConfigMap exists. Judged by what the trace did not write: the volumes step ends
// after the test created the ConfigMap (its local clock, the node's: one machine) and not after
// the sandbox turned ready (PodReadyToStartContainers), and it carries the kubelet's FailedMount.
func TestVolumesLateConfigMap(t *testing.T) {
	e := Setup(t)
	ctx := Ctx(t)
	ns := e.Namespace(t, "e2e-vol-cm")
	pod := e.createPod(t, ns, withVolume("late-configmap", corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "late-config"}}}))
	e.waitEvent(t, ns, pod.Name, "FailedMount", 30*time.Second)
	time.Sleep(2 * time.Second)
	created := time.Now()
	cm, err := e.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "late-config"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr := e.WaitTrace(t, string(pod.UID), 2*time.Minute, func(tr *Trace) bool { return tr.Root() != nil })
	checkStartupTrace(t, tr, pod, "ready", false)
	vol, sb := tr.Find("kubelet.volumes"), tr.Find("kubelet.sandbox")
	if vol == nil || sb == nil {
		t.Fatalf("no kubelet.volumes or kubelet.sandbox: %s", tr.Summary())
	}
	if p := tr.Parent(vol); p == nil || p.SpanID != sb.SpanID {
		t.Fatalf("kubelet.volumes is not inside kubelet.sandbox")
	}
	if vol.EndTime().Before(created.Truncate(time.Microsecond)) {
		t.Errorf("kubelet.volumes ends at %v, before the ConfigMap was created (%v; creationTimestamp %v)", vol.EndTime(), created, cm.CreationTimestamp)
	}
	live, err := e.Kube.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var sandboxReady time.Time
	for _, c := range live.Status.Conditions {
		if c.Type == corev1.PodReadyToStartContainers && c.Status == corev1.ConditionTrue {
			sandboxReady = c.LastTransitionTime.Time
		}
	}
	// The condition is whole seconds: the sandbox turned ready within [t, t+1s).
	if sandboxReady.IsZero() || vol.EndTime().After(sandboxReady.Add(time.Second)) || vol.EndTime().After(sb.EndTime()) {
		t.Errorf("kubelet.volumes ends at %v, after the sandbox was ready (%v, whole seconds; kubelet.sandbox ends %v)", vol.EndTime(), sandboxReady, sb.EndTime())
	}
	if len(vol.Log("FailedMount")) == 0 {
		t.Errorf("kubelet.volumes carries no FailedMount event (logs %+v)", vol.Logs)
	}
	if w, ok := vol.Tag("readyspan.volumes.window_ms"); !ok {
		t.Errorf("no readyspan.volumes.window_ms")
	} else {
		t.Logf("volumes %v → %v (%v), ConfigMap created %v, window %v ms", vol.StartTime(), vol.EndTime(), vol.Duration(), created, w)
	}
	if root := tr.Root(); root.HasTag("readyspan.failure.reason") {
		t.Errorf("a mount that succeeded is named a failure: %v", root.StrTag("readyspan.failure.reason"))
	}
}

// TestVolumesLocalClaim: a claim of a WaitForFirstConsumer StorageClass with no provisioner,
// bound to a local PersistentVolume on the node's own directory. The scheduler binds it in
// PreBind before it binds the Pod: scheduling.volume_binding names the claim, ends when the claim
// turned Bound (not before the PV's own lastPhaseTransitionTime, whole seconds, controller
// clock) and not after the scheduler's Scheduled eventTime.
func TestVolumesLocalClaim(t *testing.T) {
	e := Setup(t)
	ctx := Ctx(t)
	ns := e.Namespace(t, "e2e-vol-pvc")
	dir, err := os.MkdirTemp("", "readyspan-e2e-pv-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	class := ns + "-local"
	mode := storagev1.VolumeBindingWaitForFirstConsumer
	if _, err := e.Kube.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: class},
		Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: &mode}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Kube.StorageV1().StorageClasses().Delete(context.Background(), class, metav1.DeleteOptions{})
	})
	pvName := ns + "-pv"
	if _, err := e.Kube.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              class,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: dir}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{NodeName}}}}}}},
		}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Kube.CoreV1().PersistentVolumes().Delete(context.Background(), pvName, metav1.DeleteOptions{})
	})
	if _, err := e.Kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: &class,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // the claim waits for its first consumer
	pod := e.createPod(t, ns, withVolume("local-claim", corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}))
	tr := e.WaitTrace(t, string(pod.UID), 2*time.Minute, func(tr *Trace) bool { return tr.Root() != nil })
	checkStartupTrace(t, tr, pod, "ready", false)

	vb, sched := tr.Find("scheduling.volume_binding"), tr.Find("scheduling")
	if vb == nil {
		t.Fatalf("no scheduling.volume_binding: %s", tr.Summary())
	}
	if p := tr.Parent(vb); p == nil || p.SpanID != sched.SpanID {
		t.Fatal("scheduling.volume_binding is not inside scheduling")
	}
	if vb.StrTag("k8s.persistentvolumeclaim.name") != "data" || vb.StrTag("k8s.persistentvolume.name") != pvName {
		t.Errorf("claim %q volume %q, want data and %s", vb.StrTag("k8s.persistentvolumeclaim.name"), vb.StrTag("k8s.persistentvolume.name"), pvName)
	}
	pv, err := e.Kube.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pv.Status.Phase != corev1.VolumeBound || pv.Status.LastPhaseTransitionTime == nil {
		t.Fatalf("PV %s: phase %s, lastPhaseTransitionTime %v", pvName, pv.Status.Phase, pv.Status.LastPhaseTransitionTime)
	}
	if bound := pv.Status.LastPhaseTransitionTime.Time; vb.EndTime().Before(bound) {
		t.Errorf("the claim's binding ends at %v, before its PV turned Bound (%v, whole seconds)", vb.EndTime(), bound)
	}
	var scheduled time.Time
	for _, ev := range e.PodEvents(t, ns, pod.Name) {
		if ev.Reason == "Scheduled" {
			scheduled = ev.EventTime.Time
		}
	}
	if scheduled.IsZero() || vb.EndTime().After(scheduled) {
		t.Errorf("the claim's binding ends at %v, after the scheduler's Scheduled event (%v)", vb.EndTime(), scheduled)
	}
	t.Logf("volume_binding %v → %v (%v); PV Bound %v; Scheduled %v", vb.StartTime(), vb.EndTime(), vb.Duration(), pv.Status.LastPhaseTransitionTime, scheduled)
}

// TestVolumesMountFails: a ConfigMap volume that never appears fails the Pod with FailedMount
// after --fail-after (20 s in make e2e), counted by reason and alerted by PodVolumeMountFailing.
func TestVolumesMountFails(t *testing.T) {
	e := Setup(t)
	ctx := Ctx(t)
	ns := e.Namespace(t, "e2e-vol-fail")
	pod := e.createPod(t, ns, withVolume("never-mounts", corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "never-created"}}}))
	tr := e.WaitTrace(t, string(pod.UID), 2*time.Minute, func(tr *Trace) bool { return tr.Root() != nil })
	checkStartupTrace(t, tr, pod, "failed", false)
	root := tr.Root()
	if root.StrTag("readyspan.failure.reason") != "FailedMount" || !strings.Contains(root.StatusMessage(), "FailedMount") {
		t.Errorf("failure %q, status %q, want FailedMount", root.StrTag("readyspan.failure.reason"), root.StatusMessage())
	}
	vol := tr.Find("kubelet.volumes")
	if vol == nil || !vol.IsError() || !strings.Contains(vol.StatusMessage(), `configmap "never-created" not found`) {
		t.Fatalf("kubelet.volumes %v: want an Error naming the missing ConfigMap (%s)", vol, tr.Summary())
	}
	Eventually(t, time.Minute, "PodVolumeMountFailing firing for FailedMount", func() (bool, error) {
		alerts, err := e.Prom.Alerts(ctx)
		if err != nil {
			return false, err
		}
		for _, a := range alerts {
			if a.Labels["alertname"] == "PodVolumeMountFailing" && a.Labels["reason"] == "FailedMount" && a.State == "firing" {
				return true, nil
			}
		}
		return false, fmt.Errorf("%d alerts, none PodVolumeMountFailing firing", len(alerts))
	})
}
