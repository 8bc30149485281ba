// Package kubernetes holds readyspan's in-cluster manifests; its test renders them with
// kustomize, as `kubectl apply -k` does, and checks who may reach the metrics port.
package kubernetes

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// render builds the base, with the given components, through an overlay in a temporary
// directory (the way a user's overlay includes them).
func render(t *testing.T, components ...string) map[string]string {
	t.Helper()
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rel := func(p string) string {
		r, err := filepath.Rel(dir, filepath.Join(here, p))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - " + rel("base") + "\n"
	if len(components) > 0 {
		k += "components:\n"
		for _, c := range components {
			k += "  - " + rel(c) + "\n"
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := krusty.MakeDefaultOptions()
	opts.LoadRestrictions = types.LoadRestrictionsNone
	m, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize: %v", err)
	}
	out := map[string]string{}
	for _, r := range m.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		out[r.GetKind()+"/"+r.GetName()] = string(y)
	}
	return out
}

func TestMetricsAccess(t *testing.T) {
	for _, tc := range []struct {
		name       string
		components []string
		secure     bool
	}{
		{"default: plain HTTP behind a NetworkPolicy", nil, false},
		{"secure-metrics: TLS and apiserver-checked access", []string{"components/secure-metrics"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := render(t, tc.components...)
			np := objs["NetworkPolicy/readyspan-metrics"]
			if !strings.Contains(np, "kubernetes.io/metadata.name: monitoring") || !strings.Contains(np, "port: metrics") {
				t.Errorf("the metrics port is not limited to the monitoring namespace:\n%s", np)
			}
			dep := objs["Deployment/readyspan"]
			if got := strings.Contains(dep, "--metrics-secure"); got != tc.secure {
				t.Errorf("--metrics-secure in the Deployment: %v, want %v", got, tc.secure)
			}
			if got := strings.Count(dep, "scheme: HTTPS"); (got == 2) != tc.secure {
				t.Errorf("%d probes over HTTPS", got)
			}
			role, ok := objs["ClusterRole/readyspan-delegated-auth"]
			if ok != tc.secure {
				t.Fatalf("delegated-auth ClusterRole present: %v, want %v", ok, tc.secure)
			}
			if tc.secure {
				for _, want := range []string{"tokenreviews", "subjectaccessreviews"} {
					if !strings.Contains(role, want) {
						t.Errorf("no %s in:\n%s", want, role)
					}
				}
				if strings.Count(role, "- create") != 2 || strings.Contains(role, "- get") {
					t.Errorf("the delegated-auth role grants more than create:\n%s", role)
				}
				if _, ok := objs["ClusterRoleBinding/readyspan-delegated-auth"]; !ok {
					t.Error("no binding for the delegated-auth role")
				}
			}
			// The base's own role never creates anything.
			if base := objs["ClusterRole/readyspan"]; slices.Contains(strings.Fields(base), "create") {
				t.Errorf("the base ClusterRole grants create:\n%s", base)
			}
		})
	}
}
