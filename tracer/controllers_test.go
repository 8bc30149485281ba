package tracer

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestCreatedPod: the Pod named by each controller's SuccessfulCreate, in the v1.37 formats
// (controller_utils.go: "Created pod: %v"; stateful_pod_control.go: "%s Pod %s in StatefulSet
// %s successful" with the verb title-cased).
func TestCreatedPod(t *testing.T) {
	tests := []struct {
		msg, want string
		ok        bool
	}{
		{"Created pod: web-7d4b9-xk2z9", "web-7d4b9-xk2z9", true},
		{"Create Pod web-0 in StatefulSet web successful", "web-0", true},
		{"create Pod db-12 in StatefulSet db successful", "db-12", true},
		{"Create Pod web-0 in StatefulSet web failed error: quota", "", false},
		{"Delete Pod web-0 in StatefulSet web successful", "", false},
		{"Created pod: ", "", false},
		{"Created job tick-29412345", "", false},
	}
	for _, tt := range tests {
		got, ok := createdPod(tt.msg)
		if got != tt.want || ok != tt.ok {
			t.Errorf("createdPod(%q) = %q, %v; want %q, %v", tt.msg, got, ok, tt.want, tt.ok)
		}
	}
}

func TestStatefulOrdinal(t *testing.T) {
	tests := []struct {
		name, base string
		ord        int
		ok         bool
	}{
		{"web-0", "web", 0, true},
		{"my-db-12", "my-db", 12, true},
		{"web-01", "", 0, false},
		{"web", "", 0, false},
		{"web-x", "", 0, false},
	}
	for _, tt := range tests {
		base, ord, ok := statefulOrdinal(tt.name)
		if base != tt.base || ord != tt.ord || ok != tt.ok {
			t.Errorf("statefulOrdinal(%q) = %q, %d, %v; want %q, %d, %v", tt.name, base, ord, ok, tt.base, tt.ord, tt.ok)
		}
	}
}

// TestWhyEnded: why a Pod went, from its status as the kubelet and the eviction API write it,
// bounded: a status reason is free text.
func TestWhyEnded(t *testing.T) {
	failed := func(reason string, exit int32) *corev1.Pod {
		p := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: reason}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: exit}}}}
		return p
	}
	disrupted := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
		{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI"}}}}
	tests := []struct {
		pod  *corev1.Pod
		want string
	}{
		{failed("", 1), "failed: Error (exit code 1)"},
		{failed("Evicted", 137), "evicted"},
		{failed("DeadlineExceeded", 0), "failed: DeadlineExceeded"},
		{disrupted, "evicted"},
		{&corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}, "succeeded"},
		{&corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}, "deleted"},
	}
	for _, tt := range tests {
		if got := whyEnded(tt.pod); got != tt.want {
			t.Errorf("whyEnded = %q, want %q", got, tt.want)
		}
	}
	long := whyEnded(failed(strings.Repeat("é", 1000), 1))
	if len(long) > maxWhy+len("…") || !strings.HasPrefix(long, "failed: é") {
		t.Errorf("a long reason is kept as %d bytes (%.40q…), want at most %d", len(long), long, maxWhy)
	}
}
