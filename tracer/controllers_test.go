package tracer

import "testing"

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
