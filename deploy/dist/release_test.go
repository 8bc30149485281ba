// Package dist holds what `make dist` runs to build readyspan's release archives (archive.sh). Its
// test checks that what a release publishes besides the archives names the release in VERSION too.
package dist

import (
	"os"
	"strings"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// The kustomize base deploys the released image: its tag must be the release in VERSION, or
// `kubectl apply -k deploy/kubernetes` from a release's tree runs another release's image.
func TestKustomizeImageIsTheRelease(t *testing.T) {
	v, err := os.ReadFile("../../VERSION")
	if err != nil {
		t.Fatalf("read VERSION: %v", err)
	}
	version := strings.TrimSpace(string(v))
	data, err := os.ReadFile("../kubernetes/base/kustomization.yaml")
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
			t.Errorf("image %s (%s): newTag %q, VERSION is %q", img.Name, img.NewName, img.NewTag, version)
		}
	}
}
