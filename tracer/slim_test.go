package tracer

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// The last mile reads what slimPod keeps: the Pod's addresses (the node's rules name them) and
// its preStop hooks' sleep and kind (an old Pod's stop is measured from them).
func TestSlimPodKeepsTheLastMile(t *testing.T) {
	p := &corev1.Pod{
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "web", Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 3}}}},
			{Name: "agent", Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"drain", "--secret=x"}}}}},
		}},
		Status: corev1.PodStatus{PodIP: "10.88.77.5", PodIPs: []corev1.PodIP{{IP: "10.88.77.5"}, {IP: "fd00::5"}}, QOSClass: corev1.PodQOSBestEffort},
	}
	slimPod(p)
	if len(p.Status.PodIPs) != 2 || p.Status.PodIP != "10.88.77.5" {
		t.Errorf("addresses %q %v, want both kept", p.Status.PodIP, p.Status.PodIPs)
	}
	if s := p.Spec.Containers[0].Lifecycle.PreStop.Sleep; s == nil || s.Seconds != 3 {
		t.Errorf("preStop sleep %v, want 3 s kept", s)
	}
	if e := p.Spec.Containers[1].Lifecycle.PreStop.Exec; e == nil || len(e.Command) != 0 {
		t.Errorf("preStop exec %v, want its kind kept and its command dropped", e)
	}
}
