package tracer

import (
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/readyspan/readyspan/phases"
)

// TestWorkloadOf: the workload label's value comes from the Pod alone when the correlator has
// not tied it to a Deployment: a ReplicaSet's Pod is its Deployment's (the ReplicaSet's name
// without the Pod's pod-template-hash), another controller's Pod its controller's, a bare Pod
// none.
func TestWorkloadOf(t *testing.T) {
	yes := true
	owned := func(kind, name string, labels map[string]string) *metav1.ObjectMeta {
		return &metav1.ObjectMeta{Labels: labels, OwnerReferences: []metav1.OwnerReference{
			{Kind: "Node", Name: "not-the-controller"},
			{Kind: kind, Name: name, Controller: &yes},
		}}
	}
	for _, c := range []struct {
		what  string
		m     *metav1.ObjectMeta
		chain []phases.Controller
		want  string
	}{
		{"the Deployment the correlator found", owned("ReplicaSet", "web-5d8f7c9b4", nil), []phases.Controller{{Kind: "Deployment", Name: "web"}, {Kind: "ReplicaSet", Name: "web-5d8f7c9b4"}}, "web"},
		{"a CronJob's, not its run's", owned("Job", "tick-29937291", nil), []phases.Controller{{Kind: "CronJob", Name: "tick"}, {Kind: "Job", Name: "tick-29937291"}}, "tick"},
		{"a Deployment's ReplicaSet, by the hash", owned("ReplicaSet", "web-5d8f7c9b4", map[string]string{"pod-template-hash": "5d8f7c9b4"}), nil, "web"},
		{"a ReplicaSet of its own", owned("ReplicaSet", "cache", nil), nil, "cache"},
		{"a hash that is not the name's suffix", owned("ReplicaSet", "cache", map[string]string{"pod-template-hash": "5d8f7c9b4"}), nil, "cache"},
		{"a StatefulSet", owned("StatefulSet", "db", map[string]string{"controller-revision-hash": "db-7f9"}), nil, "db"},
		{"a bare Pod", &metav1.ObjectMeta{}, nil, ""},
	} {
		if got := workloadOf(c.m, c.chain); got != c.want {
			t.Errorf("%s: workload %q, want %q", c.what, got, c.want)
		}
	}
}

// TestWorkloadOfRealNode: in a real capture every Pod of a Deployment is that Deployment's.
func TestWorkloadOfRealNode(t *testing.T) {
	traces := replayDir(t, filepath.Join("testdata", "real-node", "run2-ifnotpresent"))
	if len(traces) == 0 {
		t.Fatal("no traces")
	}
	for _, tr := range traces {
		if dep := controllerNamed(tr.Pod, "Deployment"); dep == "" || tr.Pod.Workload != dep {
			t.Errorf("%s: workload %q, deployment %q", tr.Pod.Name, tr.Pod.Workload, dep)
		}
	}
}

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

// Transform signs a workload's template once per generation: a status update of the same
// generation carries the signature computed before, a new generation the one of its template.
func TestTransformSignsEachGenerationOnce(t *testing.T) {
	signed := func(d *appsv1.Deployment) (string, string) {
		t.Helper()
		want, wantRestart := templateSignature(&d.ObjectMeta, d.Spec.Template.DeepCopy())
		obj, err := Kinds.Transform(d)
		if err != nil {
			t.Fatal(err)
		}
		a := obj.(*appsv1.Deployment).Annotations
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
		if _, err := Kinds.Transform(d); err != nil {
			b.Fatal(err)
		}
	}
}

// controllerNamed is the name of the Pod's workload of the kind in its chain, "" for none.
func controllerNamed(p *phases.Pod, kind string) string {
	for _, c := range p.Controllers {
		if c.Kind == kind {
			return c.Name
		}
	}
	return ""
}
