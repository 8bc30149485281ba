package pipeline

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/tracer"
)

// Explain lists the namespace once and hands on the traces of the target alone; a target that
// is not there is one clear line.
func TestExplainKeepsTheTarget(t *testing.T) {
	created := metav1.NewTime(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), CreationTimestamp: created}}
	}
	env := Env{Client: fake.NewClientset(pod("web-1"), pod("web-2")), Host: "test"}
	for _, tc := range []struct {
		name   string
		target Target
		want   string // the Pods traced, or the error
	}{
		{"a Pod", Target{Kind: "Pod", Namespace: "ns", Name: "web-2"}, "web-2"},
		{"a Pod that is not there", Target{Kind: "Pod", Namespace: "ns", Name: "api"}, "pod ns/api not found"},
		{"a workload that is not there", Target{Kind: "Deployment", Namespace: "ns", Name: "web"}, "deployment ns/web not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			err := Explain(t.Context(), env, tc.target, Sinks{Pods: tracer.SinkFunc(func(tr *phases.Trace) { got = append(got, tr.Pod.Name) })})
			if err != nil {
				got = append(got, err.Error())
			}
			if strings.Join(got, ",") != tc.want {
				t.Errorf("Explain(%v) = %q, want %q", tc.target, got, tc.want)
			}
		})
	}
}
