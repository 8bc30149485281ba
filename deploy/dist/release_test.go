// Package dist holds what `make dist` runs to build readyspan's release archives (archive.sh). Its
// test checks that what a release publishes besides the archives names the release in VERSION too.
package dist

import (
	"os"
	"strings"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// The kustomize base (and the node component, which sets its own image) deploys the released
// image: its tag must be the release in VERSION, or `kubectl apply -k deploy/kubernetes` from a
// release's tree runs another release's image.
func TestKustomizeImageIsTheRelease(t *testing.T) {
	v, err := os.ReadFile("../../VERSION")
	if err != nil {
		t.Fatalf("read VERSION: %v", err)
	}
	version := strings.TrimSpace(string(v))
	for _, file := range []string{"../kubernetes/base/kustomization.yaml", "../kubernetes/components/node/kustomization.yaml"} {
		checkImages(t, file, version)
	}
}

func checkImages(t *testing.T, file, version string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("read kustomization: %v", err)
	}
	var k struct {
		Images []struct {
			Name    string `json:"name"`
			NewName string `json:"newName"`
			NewTag  string `json:"newTag"`
		} `json:"images"`
	}
	if err := utilyaml.Unmarshal(data, &k); err != nil {
		t.Fatalf("parse kustomization: %v", err)
	}
	if len(k.Images) == 0 {
		t.Fatal("kustomization sets no image")
	}
	for _, img := range k.Images {
		if img.NewTag != version {
			t.Errorf("%s: image %s (%s): newTag %q, VERSION is %q", file, img.Name, img.NewName, img.NewTag, version)
		}
	}
}

// The Helm chart runs the released image by default (its appVersion) and is itself versioned as
// the release: both must be VERSION, or `helm install deploy/helm/readyspan` from a release's
// tree runs another release's image. make dist packages it with the same values.
func TestChartIsTheRelease(t *testing.T) {
	v, err := os.ReadFile("../../VERSION")
	if err != nil {
		t.Fatalf("read VERSION: %v", err)
	}
	version := strings.TrimSpace(string(v))
	data, err := os.ReadFile("../helm/readyspan/Chart.yaml")
	if err != nil {
		t.Fatalf("read Chart.yaml: %v", err)
	}
	var chart struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := utilyaml.Unmarshal(data, &chart); err != nil {
		t.Fatalf("parse Chart.yaml: %v", err)
	}
	if chart.AppVersion != version {
		t.Errorf("Chart.yaml appVersion %q, VERSION is %q", chart.AppVersion, version)
	}
	if want := strings.TrimPrefix(version, "v"); chart.Version != want {
		t.Errorf("Chart.yaml version %q, want %q (VERSION %q: a chart's version is semver without v)", chart.Version, want, version)
	}
}
