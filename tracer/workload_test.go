package tracer

import (
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// controllerNamed is the name of the Pod's workload of the kind in its chain, "" for none.
func controllerNamed(p *phases.Pod, kind string) string {
	for _, c := range p.Controllers {
		if c.Kind == kind {
			return c.Name
		}
	}
	return ""
}
