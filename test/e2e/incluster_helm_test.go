//go:build e2e

// In-cluster end-to-end test of the Helm chart (deploy/helm/readyspan, issue 27): readyspan
// installed with `helm install` by bin/helm (built from deploy/local/tools/helm) into the local
// cluster, as release readyspan-helm in its own namespace, beside (never over) the kustomize
// install of incluster_test.go, whose helpers it shares.
//
//	go test -tags e2e -count=1 -run 'TestInClusterHelm' -timeout 30m -v ./test/e2e/

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// The release and its namespace: the chart names its objects after a release whose name
	// contains readyspan, so its ClusterRole and Lease are readyspan-helm, apart from the base's.
	inclusterHelmRelease   = "readyspan-helm"
	inclusterHelmNamespace = "readyspan-helm"
)

// inclusterHelm runs bin/helm from the repository root and returns its standard output (helm
// notes the chart's symbolic links on standard error, which is only shown on failure).
func inclusterHelm(t *testing.T, root string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(root, "bin", "helm"), args...)
	cmd.Dir = root
	home := t.TempDir() // no repositories or plugins of the user's
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home, "HELM_CACHE_HOME="+home, "HELM_DATA_HOME="+home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// TestInClusterHelm installs readyspan with `helm install --wait` into a namespace that enforces
// the restricted Pod Security Standard (as docs/install.md says to create it), with the test's
// image, OTLP endpoint and workload namespace as values, and checks: both replicas admitted,
// Ready and one leader; a rollout's Pods each traced once; no forbidden in the logs;
// nothing of prometheus-operator where its API is not served; `helm upgrade` rolls to a new
// setting with a leader again; every optional part accepted by the apiserver (server dry run);
// `helm uninstall` removes the release's objects, cluster-wide ones included.
func TestInClusterHelm(t *testing.T) {
	root := repoRoot(t)
	if _, err := os.Stat(filepath.Join(root, "bin", "helm")); err != nil {
		Missing(t, "bin/helm (make cluster-build): %v", err)
	}
	e, image := inclusterPrepare(t)
	e.ns, e.name = inclusterHelmNamespace, inclusterHelmRelease
	ctx, cancel := context.WithTimeout(Ctx(t), 25*time.Minute)
	defer cancel()

	slash := strings.LastIndex(image, "/")
	repo, tag, _ := strings.Cut(image[slash+1:], ":")
	imageValues := fmt.Sprintf("image: {repository: %q, tag: %q}\nextraArgs: [%q]\n", image[:slash+1]+repo, tag, "--namespace="+e.workload)
	values := imageValues + fmt.Sprintf("otlp: {endpoint: %q, insecure: true}\n", e.otlp)
	valuesFile := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(valuesFile, []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	helm := func(args ...string) string {
		t.Helper()
		out, err := inclusterHelm(t, root, append(args, "--kubeconfig", e.Kubeconfig)...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	t.Cleanup(func() {
		if t.Failed() {
			e.dumpDiagnostics(t)
		}
		if os.Getenv("READYSPAN_E2E_KEEP") == "" {
			if _, err := inclusterHelm(t, root, "uninstall", inclusterHelmRelease, "-n", inclusterHelmNamespace,
				"--ignore-not-found", "--kubeconfig", e.Kubeconfig); err != nil {
				t.Logf("helm uninstall: %v", err)
			}
		}
	})

	// helm install keeps the release in the namespace, so it must exist first.
	_, err := e.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: inclusterHelmNamespace,
		Labels: map[string]string{
			"pod-security.kubernetes.io/enforce":         "restricted",
			"pod-security.kubernetes.io/enforce-version": "latest",
		},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace %s: %v", inclusterHelmNamespace, err)
	}
	t.Cleanup(func() {
		if os.Getenv("READYSPAN_E2E_KEEP") == "" {
			_ = e.client.CoreV1().Namespaces().Delete(context.Background(), inclusterHelmNamespace, metav1.DeleteOptions{})
		}
	})

	start := time.Now()
	out := helm("install", inclusterHelmRelease, "deploy/helm/readyspan", "-n", inclusterHelmNamespace,
		"-f", valuesFile, "--wait", "--timeout", "5m")
	t.Logf("helm install (%s):\n%s", time.Since(start).Round(time.Second), strings.TrimSpace(out))

	pods := e.waitReadyspanReady(ctx, t, 2, 4*time.Minute)
	e.checkRunningPods(ctx, t, pods)
	leader := e.waitLeader(ctx, t, pods, 90*time.Second)
	t.Logf("replicas %v Ready, leader %s", pods, leader)

	t.Run("release objects", func(t *testing.T) {
		manifest := helm("get", "manifest", inclusterHelmRelease, "-n", inclusterHelmNamespace)
		kinds := map[string]int{}
		for _, o := range inclusterDecodeYAML(t, manifest) {
			kinds[o["kind"].(string)]++
		}
		for _, k := range []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Deployment", "Service", "PodDisruptionBudget", "NetworkPolicy"} {
			if kinds[k] != 1 {
				t.Errorf("the release has %d %s, want 1", kinds[k], k)
			}
		}
		// The local cluster has no prometheus-operator: nothing of its kinds may be in the release
		// (the install would have failed on them anyway).
		if kinds["ServiceMonitor"]+kinds["PrometheusRule"] != 0 {
			t.Errorf("ServiceMonitor or PrometheusRule rendered where monitoring.coreos.com/v1 is not served: %v", kinds)
		}
	})

	tracker := e.trackWorkloadPods(ctx, t)
	t.Run("rollout traced", func(t *testing.T) {
		e.createWorkload(ctx, t, 3)
		e.waitWorkloadRolledOut(ctx, t, 3*time.Minute)
		uids := tracker.uids()
		if len(uids) < 3 {
			t.Fatalf("saw %d workload Pods, want at least 3", len(uids))
		}
		for uid, tr := range e.WaitTraces(t, uids, 2*time.Minute, inclusterHasRoot) {
			inclusterCheckTrace(t, uid, tr)
		}
		names := map[string]string{}
		for _, uid := range uids {
			names[uid] = uid
		}
		e.CheckExportedOnce(t, names)
		t.Logf("%d Pods traced by the Helm release's leader", len(uids))
	})

	t.Run("no forbidden in logs", func(t *testing.T) {
		for _, p := range e.readyspanPods(ctx, t) {
			if logs := e.logs(ctx, t, p); strings.Contains(strings.ToLower(logs), "forbidden") {
				t.Errorf("readyspan %s logs say forbidden:\n%s", p, inclusterGrep(logs, "forbidden"))
			}
		}
	})

	t.Run("helm upgrade", func(t *testing.T) {
		before := e.readyspanPods(ctx, t)
		start := time.Now()
		helm("upgrade", inclusterHelmRelease, "deploy/helm/readyspan", "-n", inclusterHelmNamespace,
			"-f", valuesFile, "--set", "ui.maxMiB=16", "--wait", "--timeout", "5m")
		if err := e.waitDeploymentRolledOut(ctx, e.ns, e.name, 5*time.Minute); err != nil {
			t.Fatal(err)
		}
		after := e.waitReadyspanReady(ctx, t, 2, 4*time.Minute)
		for _, p := range after {
			for _, b := range before {
				if p == b {
					t.Errorf("replica %s survived the upgrade", p)
				}
			}
		}
		d, err := e.client.AppsV1().Deployments(e.ns).Get(ctx, e.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if args := strings.Join(d.Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(args, "--ui-max-mib=16") {
			t.Errorf("upgraded args %s lack --ui-max-mib=16", args)
		}
		t.Logf("upgraded in %s, leader %s", time.Since(start).Round(time.Second), e.waitLeader(ctx, t, after, 90*time.Second))
	})

	// What the install above leaves off (shards, secure metrics with its RBAC and certificate,
	// the OTLP input, headers in a Secret, UI flags, the dashboard): the apiserver's validation
	// and admission (restricted Pod Security included) accept every object, in a server dry run.
	t.Run("every option accepted by the apiserver", func(t *testing.T) {
		all := imageValues + `namespace: {create: true}
shards: 2
otlp: {endpoint: http://otel-collector.observability.svc:4317, protocol: http, headers: {x-tenant: a}}
metrics:
  secure: true
  readerSubjects: [{kind: ServiceAccount, name: prometheus-k8s, namespace: monitoring}]
  tls: {secretName: readyspan-metrics-tls}
ui: {allowedHosts: [readyspan-helm.readyspan-helm.svc], traceURL: "http://jaeger.example/trace/{trace_id}", maxMiB: 32}
otlpReceive: {enabled: true, tls: {secretName: readyspan-otlp-tls}}
grafanaDashboard: {enabled: true}
`
		file := filepath.Join(t.TempDir(), "all.yaml")
		if err := os.WriteFile(file, []byte(all), 0o644); err != nil {
			t.Fatal(err)
		}
		manifest, err := inclusterHelm(t, root, "template", inclusterHelmRelease, "deploy/helm/readyspan", "-n", inclusterHelmNamespace, "-f", file)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "all-rendered.yaml")
		if err := os.WriteFile(path, []byte(manifest), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := inclusterRun(t, root, nil, e.kubectl, "--kubeconfig", e.Kubeconfig, "apply", "--dry-run=server", "-f", path)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(out, "(server dry run)"); n != len(inclusterDecodeYAML(t, manifest)) {
			t.Errorf("%d objects accepted, want all %d:\n%s", n, len(inclusterDecodeYAML(t, manifest)), out)
		}
		t.Logf("kubectl apply --dry-run=server:\n%s", strings.TrimSpace(out))
	})

	t.Run("helm uninstall", func(t *testing.T) {
		helm("uninstall", inclusterHelmRelease, "-n", inclusterHelmNamespace, "--wait", "--timeout", "3m")
		rbac := e.client.RbacV1()
		if _, err := rbac.ClusterRoles().Get(ctx, e.name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("ClusterRole %s after uninstall: %v, want not found", e.name, err)
		}
		if _, err := rbac.ClusterRoleBindings().Get(ctx, e.name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("ClusterRoleBinding %s after uninstall: %v, want not found", e.name, err)
		}
		Eventually(t, 2*time.Minute, "the release's Pods gone", func() (bool, error) {
			pods := e.readyspanPods(ctx, t)
			return len(pods) == 0, fmt.Errorf("left: %v", pods)
		})
		for _, kind := range []string{"deployments", "services", "serviceaccounts", "networkpolicies", "poddisruptionbudgets", "roles", "rolebindings"} {
			if out, err := inclusterRun(t, root, nil, e.kubectl, "--kubeconfig", e.Kubeconfig, "-n", inclusterHelmNamespace,
				"get", kind, "-l", "app.kubernetes.io/instance="+inclusterHelmRelease, "-o", "name"); err != nil || strings.TrimSpace(out) != "" {
				t.Errorf("%s of the release after uninstall: %q %v", kind, out, err)
			}
		}
	})
}
