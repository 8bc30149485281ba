package tracker

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// transform is what a Deployment's Transform in package tracer does with it.
func transform(d *appsv1.Deployment) { SlimWorkload(d, &d.Spec.Template, &d.ObjectMeta) }

// testDeployment is a Deployment as the apiserver sends it: its Pod template whole.
func testDeployment(uid string, generation int64, image string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "prod", UID: types.UID(uid), Generation: generation,
			Annotations: map[string]string{annDeploymentRevision: "1", "note": "dropped"}},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: image, Env: []corev1.EnvVar{{Name: "A", Value: "1"}}}}},
		}},
	}
}

// The Transform signs a workload's template once per generation: a status update of the same
// generation carries the signature computed before, a new generation the one of its template.
func TestTransformSignsEachGenerationOnce(t *testing.T) {
	signed := func(d *appsv1.Deployment) (string, string) {
		t.Helper()
		want, wantRestart := templateSignature(&d.ObjectMeta, d.Spec.Template.DeepCopy())
		transform(d)
		a := d.Annotations
		if a[annTemplateHash] != want || a[annTemplateRestart] != wantRestart {
			t.Fatalf("generation %d: signed %q %q, its template is %q %q", d.Generation, a[annTemplateHash], a[annTemplateRestart], want, wantRestart)
		}
		return a[annTemplateHash], a[annTemplateRestart]
	}
	const uid = "3f0c7e52-signs-each-generation"
	h1, _ := signed(testDeployment(uid, 1, "web:1"))
	status := testDeployment(uid, 1, "web:1")
	status.Status.ReadyReplicas = 2
	if h, _ := signed(status); h != h1 {
		t.Errorf("a status update changed the signature: %q, was %q", h, h1)
	}
	h2, _ := signed(testDeployment(uid, 2, "web:2"))
	if h2 == h1 {
		t.Error("a new template kept the signature of the old")
	}
	restarted := testDeployment(uid, 3, "web:2")
	restarted.Spec.Template.Annotations = map[string]string{annRestartedAt: "2026-12-05T01:00:00Z"}
	if h, at := signed(restarted); h != h2 || at != "2026-12-05T01:00:00Z" {
		t.Errorf("a restart signed %q %q, want %q and its time", h, at, h2)
	}
	// With neither UID nor generation (a test's objects) every object is hashed.
	signed(testDeployment("", 0, "web:3"))
	signed(testDeployment("", 0, "web:4"))
}

// BenchmarkTransformDeploymentStatus is what Transform costs a Deployment's status update, the
// most frequent of its updates during a rollout (one per replica that becomes available).
func BenchmarkTransformDeploymentStatus(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		d := testDeployment("bench-deployment", 4, "web:1")
		d.Status.ReadyReplicas = int32(i)
		transform(d)
	}
}
