//go:build e2e

// In-cluster end-to-end test of issue 4: podtrace deployed with `kubectl apply -k` of
// deploy/kubernetes into the local cluster (make cluster-up), as real Pods on the real node.
//
//	go test -tags e2e -run 'TestInCluster' -timeout 30m -v ./test/e2e/
//
// It needs the local cluster (.local/kubeconfig), its registry on 127.0.0.1:5000, Jaeger's OTLP
// receiver where Pods can reach it (the bridge address) and its query API on 127.0.0.1:16686,
// bin/kubectl and bin/podtrace (make build). Without a cluster it skips; TestInClusterManifests
// needs only bin/kubectl (and uses bin/promtool when it exists).
//
// Environment (all optional):
//
//	PODTRACE_E2E_KUBECONFIG        kubeconfig (default .local/kubeconfig)
//	PODTRACE_E2E_IMAGE             an already pushed podtrace image; default: build and push one
//	PODTRACE_E2E_OTLP_ENDPOINT     OTLP endpoint as Pods see it (default http://10.88.77.1:4317)
//	PODTRACE_E2E_JAEGER_URL        Jaeger query API (default http://127.0.0.1:16686)
//	PODTRACE_E2E_WORKLOAD_IMAGE    the test rollout's image (default 127.0.0.1:5000/podtrace/pause:v1)
//	PODTRACE_E2E_KEEP=1            leave podtrace and the workload installed afterwards
//
// Helpers here are prefixed with incluster so they do not collide with the local cluster's shared
// e2e harness in the same package.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	inclusterNamespace         = "podtrace" // the base's namespace, restricted PodSecurity
	inclusterWorkloadNamespace = "podtrace-e2e-incluster"
	inclusterWorkload          = "incluster-rollout"
	inclusterLease             = "podtrace"
	inclusterDefaultOTLP       = "http://10.88.77.1:4317"
	inclusterDefaultJaeger     = "http://127.0.0.1:16686"
	inclusterDefaultWorkload   = "127.0.0.1:5000/podtrace/pause:v1"
	inclusterImageRepo         = "127.0.0.1:5000/podtrace/podtrace"
)

// inclusterEnv is what the in-cluster test works with.
type inclusterEnv struct {
	root       string // repository root
	kubeconfig string
	kubectl    string
	client     kubernetes.Interface
	jaeger     string
	otlp       string
	workload   string
	overlay    string // the kustomize overlay the test applies
}

func inclusterGetenv(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// inclusterRepoRoot walks up from the test's directory to podtrace's go.mod.
func inclusterRepoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			bytes.Contains(data, []byte("module github.com/podtrace/podtrace\n")) {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("podtrace's go.mod not found above the test directory")
		}
		dir = parent
	}
}

// inclusterRun runs a command from the repository root and returns its combined output.
func inclusterRun(t *testing.T, root string, env []string, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func (e *inclusterEnv) kubectlRun(t *testing.T, args ...string) string {
	t.Helper()
	out, err := inclusterRun(t, e.root, nil, e.kubectl, append([]string{"--kubeconfig", e.kubeconfig}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// ---------------------------------------------------------------------------------------------
// Manifests: no cluster needed.

// TestInClusterManifests renders the kustomize base and the prometheus-operator kustomization
// with bin/kubectl, checks what a restricted, least-privilege install must look like, and that the
// rendered PrometheusRule carries exactly the rules of deploy/prometheus/alerts.yaml, which it
// hands to promtool check rules when bin/promtool exists.
func TestInClusterManifests(t *testing.T) {
	root := inclusterRepoRoot(t)
	kubectl := filepath.Join(root, "bin", "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		t.Skipf("bin/kubectl not built (make cluster-build): %v", err)
	}

	base, err := inclusterRun(t, root, nil, kubectl, "kustomize", "deploy/kubernetes")
	if err != nil {
		t.Fatal(err)
	}
	objs := inclusterDecodeYAML(t, base)
	kinds := map[string]map[string]any{}
	for _, o := range objs {
		kinds[o["kind"].(string)] = o
	}
	for _, k := range []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Deployment", "Service", "PodDisruptionBudget"} {
		if kinds[k] == nil {
			t.Errorf("deploy/kubernetes renders no %s", k)
		}
	}

	t.Run("namespace is restricted", func(t *testing.T) {
		labels := inclusterPath(kinds["Namespace"], "metadata", "labels")
		if labels == nil || labels.(map[string]any)["pod-security.kubernetes.io/enforce"] != "restricted" {
			t.Errorf("Namespace labels %v: want pod-security.kubernetes.io/enforce=restricted", labels)
		}
	})

	t.Run("ClusterRole is read-only and minimal", func(t *testing.T) {
		var role rbacv1.ClusterRole
		inclusterConvert(t, kinds["ClusterRole"], &role)
		want := map[string]bool{
			"/pods": true, "/events": true, "/services": true,
			"events.k8s.io/events": true,
			"apps/deployments":     true, "apps/replicasets": true,
			"discovery.k8s.io/endpointslices": true,
		}
		got := map[string]bool{}
		for _, r := range role.Rules {
			if len(r.NonResourceURLs) > 0 || len(r.ResourceNames) > 0 {
				t.Errorf("unexpected rule %+v", r)
			}
			verbs := slices.Clone(r.Verbs)
			slices.Sort(verbs)
			if !reflect.DeepEqual(verbs, []string{"get", "list", "watch"}) {
				t.Errorf("rule %v %v has verbs %v, want get, list, watch", r.APIGroups, r.Resources, r.Verbs)
			}
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					got[g+"/"+res] = true
				}
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("ClusterRole grants %v, want exactly %v", inclusterKeys(got), inclusterKeys(want))
		}
	})

	t.Run("leader election Role", func(t *testing.T) {
		var role rbacv1.Role
		inclusterConvert(t, kinds["Role"], &role)
		if len(role.Rules) != 1 || !slices.Equal(role.Rules[0].Resources, []string{"leases"}) ||
			!slices.Equal(role.Rules[0].APIGroups, []string{"coordination.k8s.io"}) {
			t.Fatalf("Role rules = %+v, want leases in coordination.k8s.io only", role.Rules)
		}
		verbs := slices.Clone(role.Rules[0].Verbs)
		slices.Sort(verbs)
		if !slices.Equal(verbs, []string{"create", "get", "update"}) {
			t.Errorf("Role verbs = %v, want create, get, update", verbs)
		}
	})

	t.Run("Deployment", func(t *testing.T) {
		var d appsv1.Deployment
		inclusterConvert(t, kinds["Deployment"], &d)
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
			t.Errorf("replicas = %v, want 2", d.Spec.Replicas)
		}
		spec := d.Spec.Template.Spec
		if spec.ServiceAccountName != "podtrace" {
			t.Errorf("serviceAccountName = %q", spec.ServiceAccountName)
		}
		psc := spec.SecurityContext
		if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil ||
			psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("pod securityContext %+v: want runAsNonRoot and seccomp RuntimeDefault", psc)
		}
		if len(spec.Containers) != 1 {
			t.Fatalf("%d containers, want 1", len(spec.Containers))
		}
		c := spec.Containers[0]
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			t.Errorf("container securityContext %+v: want read-only root, no privilege escalation, drop ALL", sc)
		}
		for _, want := range []string{"run", "--leader-elect", "--leader-elect-namespace=$(POD_NAMESPACE)", "--leader-elect-lease-name=podtrace", "--metrics-addr=:8080"} {
			if !slices.Contains(c.Args, want) {
				t.Errorf("args %v lack %s", c.Args, want)
			}
		}
		env := map[string]corev1.EnvVar{}
		for _, e := range c.Env {
			env[e.Name] = e
		}
		for _, name := range []string{"POD_NAME", "POD_NAMESPACE", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
			if _, ok := env[name]; !ok {
				t.Errorf("env %s missing", name)
			}
		}
		if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
			t.Errorf("liveness probe %+v, want GET /healthz", c.LivenessProbe)
		}
		if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
			t.Errorf("readiness probe %+v, want GET /readyz", c.ReadinessProbe)
		}
		if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() || c.Resources.Requests.Cpu().IsZero() {
			t.Errorf("resources %+v: want cpu and memory requests and a memory limit", c.Resources)
		}
	})

	t.Run("PrometheusRule carries alerts.yaml", func(t *testing.T) {
		out, err := inclusterRun(t, root, nil, kubectl, "kustomize", "deploy/kubernetes/prometheus-operator")
		if err != nil {
			t.Fatal(err)
		}
		var rule, monitor map[string]any
		var n int
		for _, o := range inclusterDecodeYAML(t, out) {
			switch o["kind"] {
			case "PrometheusRule":
				rule = o
			case "ServiceMonitor":
				monitor = o
			}
			n++
		}
		if n != len(objs)+2 || rule == nil || monitor == nil {
			t.Fatalf("prometheus-operator renders %d objects (PrometheusRule %v, ServiceMonitor %v), want the base's %d plus both",
				n, rule != nil, monitor != nil, len(objs))
		}
		alerts, err := os.ReadFile(filepath.Join(root, "deploy", "prometheus", "alerts.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		want := inclusterDecodeYAML(t, string(alerts))[0]
		if !reflect.DeepEqual(rule["spec"], want) {
			t.Errorf("the rendered PrometheusRule's spec differs from deploy/prometheus/alerts.yaml; run go test ./deploy/prometheus -update")
		}
		promtool := filepath.Join(root, "bin", "promtool")
		if _, err := os.Stat(promtool); err != nil {
			t.Logf("bin/promtool not built; skipping promtool check rules of the rendered PrometheusRule")
			return
		}
		spec, err := json.Marshal(rule["spec"]) // JSON is YAML
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(t.TempDir(), "prometheusrule-spec.yaml")
		if err := os.WriteFile(file, spec, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err = inclusterRun(t, root, nil, promtool, "check", "rules", file)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("promtool check rules (rendered PrometheusRule): %s", strings.TrimSpace(out))
	})
}

func inclusterDecodeYAML(t *testing.T, docs string) []map[string]any {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(docs), 4096)
	var out []map[string]any
	for {
		var obj map[string]any
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("decode YAML: %v", err)
		}
		if obj != nil {
			out = append(out, obj)
		}
	}
}

func inclusterConvert(t *testing.T, in map[string]any, out any) {
	t.Helper()
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatal(err)
	}
}

func inclusterPath(obj map[string]any, keys ...string) any {
	var cur any = obj
	for _, k := range keys {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[k]
	}
	return cur
}

func inclusterKeys(m map[string]bool) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// ---------------------------------------------------------------------------------------------
// The real cluster.

// TestInCluster installs podtrace with the kustomize base and checks, in order: both replicas
// Ready under restricted PodSecurity; a rollout's traces in Jaeger; no forbidden in the logs;
// leader deletion in the middle of a rollout leaves every Pod with exactly one trace; one RBAC rule
// removed gives one clear message and /readyz not ready; restoring it recovers.
func TestInCluster(t *testing.T) {
	e := inclusterSetup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()

	t.Cleanup(func() {
		if t.Failed() {
			e.dumpDiagnostics(t)
		}
		if os.Getenv("PODTRACE_E2E_KEEP") == "" {
			_, _ = inclusterRun(t, e.root, nil, e.kubectl, "--kubeconfig", e.kubeconfig,
				"delete", "namespace", inclusterWorkloadNamespace, "--ignore-not-found", "--wait=false")
			_, _ = inclusterRun(t, e.root, nil, e.kubectl, "--kubeconfig", e.kubeconfig,
				"delete", "-k", e.overlay, "--ignore-not-found", "--wait=false")
		}
	})

	e.install(ctx, t)
	pods := e.waitPodtraceReady(ctx, t, 2, 4*time.Minute)
	t.Logf("podtrace replicas Ready: %v", pods)
	e.checkRunningPods(ctx, t, pods)
	leader := e.waitLeader(ctx, t, pods, 90*time.Second)
	t.Logf("leader: %s", leader)

	// Every Pod of the workload, as seen by a watch from before its creation.
	tracker := e.trackWorkloadPods(ctx, t)

	t.Run("rollout traced", func(t *testing.T) {
		e.createWorkload(ctx, t, 3)
		e.waitWorkloadRolledOut(ctx, t, 3*time.Minute)
		uids := tracker.uids()
		if len(uids) < 3 {
			t.Fatalf("saw %d workload Pods, want at least 3", len(uids))
		}
		for _, uid := range uids {
			tr := e.waitTrace(ctx, t, uid, 2*time.Minute)
			e.checkTraceShape(t, uid, tr)
		}
	})

	t.Run("no forbidden in logs", func(t *testing.T) {
		for _, p := range e.podtracePods(ctx, t) {
			logs := e.logs(ctx, t, p)
			if strings.Contains(strings.ToLower(logs), "forbidden") {
				t.Errorf("podtrace %s logs say forbidden:\n%s", p, inclusterGrep(logs, "forbidden"))
			}
		}
	})

	t.Run("leader deleted mid-rollout", func(t *testing.T) {
		before := len(tracker.uids())
		leader := e.waitLeader(ctx, t, e.podtracePods(ctx, t), 60*time.Second)
		rolloutStart := time.Now()
		e.restartWorkload(ctx, t)
		// Wait until the new ReplicaSet has started creating Pods, then kill the leader.
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			return len(tracker.uids()) > before, nil
		}); err != nil {
			t.Fatalf("the rollout created no Pod: %v", err)
		}
		t.Logf("deleting leader %s %s after the rollout started", leader, time.Since(rolloutStart).Round(time.Millisecond))
		if err := e.client.CoreV1().Pods(inclusterNamespace).Delete(ctx, leader, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete leader %s: %v", leader, err)
		}
		e.waitWorkloadRolledOut(ctx, t, 4*time.Minute)
		pods := e.waitPodtraceReady(ctx, t, 2, 4*time.Minute)
		newLeader := e.waitLeader(ctx, t, pods, 90*time.Second)
		if newLeader == leader {
			t.Errorf("the Lease is still held by the deleted Pod %s", leader)
		}
		t.Logf("new leader: %s", newLeader)

		uids := tracker.uids()
		if len(uids) <= before {
			t.Fatalf("saw no new workload Pods during the rollout")
		}
		for _, uid := range uids {
			tr := e.waitTrace(ctx, t, uid, 3*time.Minute)
			e.checkTraceShape(t, uid, tr)
		}
		// A late duplicate export would arrive after the first: look again a little later, and
		// search by the Pod UID attribute for a second trace with another ID.
		time.Sleep(15 * time.Second)
		for _, uid := range uids {
			tr, err := e.getTrace(ctx, uid)
			if err != nil {
				t.Errorf("Pod %s: %v", uid, err)
				continue
			}
			e.checkTraceShape(t, uid, tr)
			ids, err := e.traceIDsForPod(ctx, uid)
			if err != nil {
				t.Errorf("search traces of Pod %s: %v", uid, err)
				continue
			}
			if len(ids) > 1 {
				t.Errorf("Pod %s has %d traces in Jaeger (%v), want exactly one", uid, len(ids), ids)
			}
		}
		t.Logf("%d workload Pods, each with exactly one trace", len(uids))
	})

	t.Run("one RBAC rule removed", func(t *testing.T) {
		e.removeClusterRoleRule(ctx, t, "discovery.k8s.io", "endpointslices")
		before := e.podtracePods(ctx, t)
		e.kubectlRun(t, "-n", inclusterNamespace, "rollout", "restart", "deployment/podtrace")

		// maxUnavailable 0: the first new replica comes up and must stay not Ready.
		var fresh string
		if err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
			for _, p := range e.podtracePodObjects(ctx, t) {
				if slices.Contains(before, p.Name) || p.Status.Phase != corev1.PodRunning {
					continue
				}
				for _, cs := range p.Status.ContainerStatuses {
					if cs.State.Running != nil && time.Since(cs.State.Running.StartedAt.Time) > 30*time.Second {
						fresh = p.Name
						return true, nil
					}
				}
			}
			return false, nil
		}); err != nil {
			t.Fatalf("no new podtrace replica has run for 30s: %v", err)
		}
		p, err := e.client.CoreV1().Pods(inclusterNamespace).Get(ctx, fresh, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if inclusterPodReady(p) {
			t.Errorf("podtrace %s is Ready without list/watch on endpointslices", fresh)
		}
		code, body := e.readyz(ctx, fresh)
		if code == http.StatusOK {
			t.Errorf("podtrace %s /readyz = %d %q, want not ready", fresh, code, body)
		}
		t.Logf("/readyz of %s without the endpointslices rule: %d %s", fresh, code, strings.TrimSpace(body))

		logs := e.logs(ctx, t, fresh)
		var lines []string
		sc := bufio.NewScanner(strings.NewReader(logs))
		for sc.Scan() {
			l := sc.Text()
			if strings.Contains(strings.ToLower(l), "forbidden") || strings.Contains(l, "endpointslices") {
				lines = append(lines, l)
			}
		}
		switch {
		case len(lines) == 0:
			t.Errorf("podtrace %s logs nothing about the missing endpointslices rule:\n%s", fresh, logs)
		case len(lines) > 1:
			t.Errorf("podtrace %s logs %d lines about the missing rule, want one clear line:\n%s", fresh, len(lines), strings.Join(lines, "\n"))
		}
		for _, l := range lines {
			if !strings.Contains(l, "endpointslices") || !(strings.Contains(l, "list") || strings.Contains(l, "watch")) {
				t.Errorf("message does not name the verb (list/watch) and the resource (endpointslices): %s", l)
			}
		}
		if len(lines) > 0 {
			t.Logf("podtrace's message: %s", lines[0])
		}

		// Restore the rule: the base applied again. The stuck replica must recover by itself.
		e.install(ctx, t)
		e.waitPodtraceReady(ctx, t, 2, 5*time.Minute)
		if err := e.waitDeploymentRolledOut(ctx, inclusterNamespace, "podtrace", 5*time.Minute); err != nil {
			t.Errorf("podtrace did not recover after the rule was restored: %v", err)
		}
	})
}

func inclusterSetup(t *testing.T) *inclusterEnv {
	t.Helper()
	root := inclusterRepoRoot(t)
	e := &inclusterEnv{
		root:       root,
		kubeconfig: inclusterGetenv("PODTRACE_E2E_KUBECONFIG", filepath.Join(root, ".local", "kubeconfig")),
		kubectl:    filepath.Join(root, "bin", "kubectl"),
		jaeger:     strings.TrimSuffix(inclusterGetenv("PODTRACE_E2E_JAEGER_URL", inclusterDefaultJaeger), "/"),
		otlp:       inclusterGetenv("PODTRACE_E2E_OTLP_ENDPOINT", inclusterDefaultOTLP),
		workload:   inclusterGetenv("PODTRACE_E2E_WORKLOAD_IMAGE", inclusterDefaultWorkload),
	}
	if _, err := os.Stat(e.kubeconfig); err != nil {
		t.Skipf("local cluster not up (make cluster-up): %v", err)
	}
	if _, err := os.Stat(e.kubectl); err != nil {
		t.Fatalf("bin/kubectl missing (make cluster-build): %v", err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", e.kubeconfig)
	if err != nil {
		t.Fatalf("load kubeconfig %s: %v", e.kubeconfig, err)
	}
	cfg.UserAgent = "podtrace-e2e-incluster"
	e.client, err = kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := e.client.Discovery().ServerVersion(); err != nil {
		t.Skipf("local cluster not reachable (make cluster-up): %v", err)
	}
	if _, err := e.client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("local cluster: %v", err)
	}
	if resp, err := http.Get(e.jaeger + "/api/services"); err != nil {
		t.Fatalf("Jaeger query API at %s: %v", e.jaeger, err)
	} else {
		resp.Body.Close()
	}

	image := os.Getenv("PODTRACE_E2E_IMAGE")
	if image == "" {
		if _, err := os.Stat(filepath.Join(root, "bin", "podtrace")); err != nil {
			t.Fatalf("bin/podtrace missing (make build): %v", err)
		}
		image = inclusterImageRepo + ":e2e-" + strconv.FormatInt(time.Now().Unix(), 10)
		out, err := inclusterRun(t, root, []string{"IMAGE=" + image}, filepath.Join(root, "deploy", "image", "build.sh"))
		if err != nil {
			t.Fatalf("build and push the image: %v", err)
		}
		t.Log(strings.TrimSpace(out))
	}
	e.overlay = e.writeOverlay(t, image)
	return e
}

// writeOverlay writes the kustomization the test applies into .local/ (git-ignored): the base,
// with the image and the OTLP endpoint pointed at the local cluster's registry and Jaeger.
func (e *inclusterEnv) writeOverlay(t *testing.T, image string) string {
	t.Helper()
	dir := filepath.Join(e.root, ".local", "e2e-incluster")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	name, tag, ok := strings.Cut(image[strings.LastIndex(image, "/")+1:], ":")
	if !ok {
		t.Fatalf("image %q has no tag", image)
	}
	newName := image[:strings.LastIndex(image, "/")+1] + name
	kustomization := fmt.Sprintf(`# Written by test/e2e/incluster_test.go.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../../deploy/kubernetes
images:
  - name: %s
    newName: %s
    newTag: %q
patches:
  - patch: |
      apiVersion: apps/v1
      kind: Deployment
      metadata: {name: podtrace, namespace: %s}
      spec:
        template:
          spec:
            containers:
              - name: podtrace
                imagePullPolicy: Always
                env:
                  - name: OTEL_EXPORTER_OTLP_ENDPOINT
                    value: %s
                  - name: OTEL_EXPORTER_OTLP_INSECURE
                    value: "true"
`, inclusterImageRepo, newName, tag, inclusterNamespace, e.otlp)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(e.root, dir)
	if err != nil {
		t.Fatal(err)
	}
	return rel
}

func (e *inclusterEnv) install(ctx context.Context, t *testing.T) {
	t.Helper()
	out := e.kubectlRun(t, "apply", "-k", e.overlay)
	t.Logf("kubectl apply -k %s:\n%s", e.overlay, strings.TrimSpace(out))
	ns, err := e.client.CoreV1().Namespaces().Get(ctx, inclusterNamespace, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Fatalf("namespace %s labels %v: want enforce=restricted", inclusterNamespace, ns.Labels)
	}
}

func (e *inclusterEnv) podtracePodObjects(ctx context.Context, t *testing.T) []corev1.Pod {
	t.Helper()
	list, err := e.client.CoreV1().Pods(inclusterNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=podtrace"})
	if err != nil {
		t.Fatalf("list podtrace Pods: %v", err)
	}
	var pods []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			pods = append(pods, p)
		}
	}
	return pods
}

func (e *inclusterEnv) podtracePods(ctx context.Context, t *testing.T) []string {
	t.Helper()
	var names []string
	for _, p := range e.podtracePodObjects(ctx, t) {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	return names
}

func inclusterPodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitPodtraceReady waits for exactly n podtrace Pods, all Ready, and returns their names.
func (e *inclusterEnv) waitPodtraceReady(ctx context.Context, t *testing.T, n int, timeout time.Duration) []string {
	t.Helper()
	var names []string
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		names = names[:0]
		pods := e.podtracePodObjects(ctx, t)
		for i := range pods {
			if !inclusterPodReady(&pods[i]) {
				return false, nil
			}
			names = append(names, pods[i].Name)
		}
		return len(names) == n, nil
	})
	if err != nil {
		t.Fatalf("waiting for %d Ready podtrace replicas: %v (have %v)", n, err, e.podtracePods(ctx, t))
	}
	slices.Sort(names)
	return slices.Clone(names)
}

// checkRunningPods checks what the kubelet actually runs: the ServiceAccount, non-root, and the
// image's user.
func (e *inclusterEnv) checkRunningPods(ctx context.Context, t *testing.T, names []string) {
	t.Helper()
	for _, name := range names {
		p, err := e.client.CoreV1().Pods(inclusterNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.ServiceAccountName != "podtrace" {
			t.Errorf("%s runs as ServiceAccount %q", name, p.Spec.ServiceAccountName)
		}
		if p.Spec.NodeName == "" {
			t.Errorf("%s is not on a node", name)
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.RestartCount > 0 {
				t.Errorf("%s container %s restarted %d times", name, cs.Name, cs.RestartCount)
			}
		}
	}
}

// waitLeader waits until the Lease is held by one of pods and returns the holder.
func (e *inclusterEnv) waitLeader(ctx context.Context, t *testing.T, pods []string, timeout time.Duration) string {
	t.Helper()
	var holder string
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		lease, err := e.client.CoordinationV1().Leases(inclusterNamespace).Get(ctx, inclusterLease, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if lease.Spec.HolderIdentity == nil {
			return false, nil
		}
		holder = *lease.Spec.HolderIdentity
		return slices.Contains(pods, holder), nil
	})
	if err != nil {
		t.Fatalf("waiting for the Lease %s/%s to be held by one of %v: %v (holder %q)", inclusterNamespace, inclusterLease, pods, err, holder)
	}
	return holder
}

// inclusterPodTracker records the UID of every workload Pod a watch reports as added.
type inclusterPodTracker struct {
	mu   sync.Mutex
	seen map[types.UID]bool
	list []string
}

func (tr *inclusterPodTracker) add(p *corev1.Pod) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if !tr.seen[p.UID] {
		tr.seen[p.UID] = true
		tr.list = append(tr.list, string(p.UID))
	}
}

func (tr *inclusterPodTracker) uids() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.list)
}

func (e *inclusterEnv) trackWorkloadPods(ctx context.Context, t *testing.T) *inclusterPodTracker {
	t.Helper()
	// A fresh workload namespace: earlier runs' Pods must not count.
	err := e.client.CoreV1().Namespaces().Delete(ctx, inclusterWorkloadNamespace, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := e.client.CoreV1().Namespaces().Get(ctx, inclusterWorkloadNamespace, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Fatalf("namespace %s from an earlier run is not gone: %v", inclusterWorkloadNamespace, err)
	}
	_, err = e.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: inclusterWorkloadNamespace}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	tr := &inclusterPodTracker{seen: map[types.UID]bool{}}
	pods := e.client.CoreV1().Pods(inclusterWorkloadNamespace)
	opts := metav1.ListOptions{LabelSelector: "app=" + inclusterWorkload}
	list, err := pods.List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		tr.add(&list.Items[i])
	}
	rv := list.ResourceVersion
	wctx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	go func() {
		for wctx.Err() == nil {
			wo := opts
			wo.ResourceVersion = rv
			w, err := pods.Watch(wctx, wo)
			if err != nil {
				time.Sleep(time.Second)
				continue
			}
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error {
					// Expired: relist, then watch from there.
					if l, err := pods.List(wctx, opts); err == nil {
						for i := range l.Items {
							tr.add(&l.Items[i])
						}
						rv = l.ResourceVersion
					}
					break
				}
				if p, ok := ev.Object.(*corev1.Pod); ok {
					rv = p.ResourceVersion
					if ev.Type == watch.Added {
						tr.add(p)
					}
				}
			}
			w.Stop()
		}
	}()
	return tr
}

func (e *inclusterEnv) createWorkload(ctx context.Context, t *testing.T, replicas int32) {
	t.Helper()
	labels := map[string]string{"app": inclusterWorkload}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: inclusterWorkload, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			// One Pod at a time and a few seconds each, so a rollout lasts long enough to delete the
			// leader in the middle of it.
			MinReadySeconds: 3,
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxSurge:       &intstr.IntOrString{Type: intstr.Int, IntVal: 1},
					MaxUnavailable: &intstr.IntOrString{Type: intstr.Int, IntVal: 0},
				},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: new(int64),
					Containers: []corev1.Container{{
						Name:            "app",
						Image:           e.workload,
						ImagePullPolicy: corev1.PullIfNotPresent,
					}},
				},
			},
		},
	}
	if _, err := e.client.AppsV1().Deployments(inclusterWorkloadNamespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the test Deployment: %v", err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: inclusterWorkload},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	if _, err := e.client.CoreV1().Services(inclusterWorkloadNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the test Service: %v", err)
	}
}

// restartWorkload starts a rollout the way `kubectl rollout restart` does.
func (e *inclusterEnv) restartWorkload(ctx context.Context, t *testing.T) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"podtrace.dev/e2e-restartedAt":%q}}}}}`, time.Now().Format(time.RFC3339Nano))
	_, err := e.client.AppsV1().Deployments(inclusterWorkloadNamespace).Patch(ctx, inclusterWorkload, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("restart the test Deployment: %v", err)
	}
}

func (e *inclusterEnv) waitWorkloadRolledOut(ctx context.Context, t *testing.T, timeout time.Duration) {
	t.Helper()
	if err := e.waitDeploymentRolledOut(ctx, inclusterWorkloadNamespace, inclusterWorkload, timeout); err != nil {
		t.Fatal(err)
	}
}

func (e *inclusterEnv) waitDeploymentRolledOut(ctx context.Context, ns, name string, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		d, err := e.client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		s := d.Status
		last = fmt.Sprintf("generation %d/%d, updated %d, ready %d, available %d, total %d, want %d",
			s.ObservedGeneration, d.Generation, s.UpdatedReplicas, s.ReadyReplicas, s.AvailableReplicas, s.Replicas, want)
		return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want &&
			s.AvailableReplicas == want && s.Replicas == want, nil
	})
	if err != nil {
		return fmt.Errorf("deployment %s/%s not rolled out: %w (%s)", ns, name, err, last)
	}
	return nil
}

func (e *inclusterEnv) logs(ctx context.Context, t *testing.T, pod string) string {
	t.Helper()
	data, err := e.client.CoreV1().Pods(inclusterNamespace).GetLogs(pod, &corev1.PodLogOptions{Container: "podtrace"}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("logs of %s: %v", pod, err)
	}
	return string(data)
}

func inclusterGrep(text, word string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(strings.ToLower(l), word) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// readyz asks a podtrace Pod's /readyz through the apiserver's Pod proxy.
func (e *inclusterEnv) readyz(ctx context.Context, pod string) (int, string) {
	var code int
	res := e.client.CoreV1().RESTClient().Get().
		Namespace(inclusterNamespace).Resource("pods").Name(pod + ":8080").
		SubResource("proxy").Suffix("readyz").Do(ctx)
	res.StatusCode(&code)
	body, err := res.Raw()
	if err != nil && len(body) == 0 {
		return code, err.Error()
	}
	return code, string(body)
}

// removeClusterRoleRule deletes the rule granting resource in group from the podtrace ClusterRole.
func (e *inclusterEnv) removeClusterRoleRule(ctx context.Context, t *testing.T, group, resource string) {
	t.Helper()
	roles := e.client.RbacV1().ClusterRoles()
	role, err := roles.Get(ctx, "podtrace", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var kept []rbacv1.PolicyRule
	removed := false
	for _, r := range role.Rules {
		if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) {
			removed = true
			continue
		}
		kept = append(kept, r)
	}
	if !removed {
		t.Fatalf("the podtrace ClusterRole has no rule for %s in %q", resource, group)
	}
	role.Rules = kept
	if _, err := roles.Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update the podtrace ClusterRole: %v", err)
	}
	t.Logf("removed the %s.%s rule from the podtrace ClusterRole", resource, group)
}

// ---------------------------------------------------------------------------------------------
// Jaeger.

type inclusterTrace struct {
	TraceID string `json:"traceID"`
	Spans   []struct {
		TraceID       string `json:"traceID"`
		SpanID        string `json:"spanID"`
		OperationName string `json:"operationName"`
		References    []struct {
			RefType string `json:"refType"`
			SpanID  string `json:"spanID"`
		} `json:"references"`
		Tags []struct {
			Key   string `json:"key"`
			Value any    `json:"value"`
		} `json:"tags"`
	} `json:"spans"`
}

var errInclusterNoTrace = errors.New("trace not found")

func (e *inclusterEnv) jaegerGet(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.jaeger+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode == http.StatusNotFound {
		return errInclusterNoTrace
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, body)
	}
	return json.Unmarshal(body, out)
}

// getTrace fetches the trace whose ID is the Pod UID without dashes.
func (e *inclusterEnv) getTrace(ctx context.Context, uid string) (*inclusterTrace, error) {
	id := strings.ReplaceAll(uid, "-", "")
	var resp struct {
		Data []inclusterTrace `json:"data"`
	}
	if err := e.jaegerGet(ctx, "/api/traces/"+id, &resp); err != nil {
		return nil, fmt.Errorf("trace %s: %w", id, err)
	}
	if len(resp.Data) == 0 {
		return nil, fmt.Errorf("trace %s: %w", id, errInclusterNoTrace)
	}
	if len(resp.Data) > 1 {
		return nil, fmt.Errorf("trace %s: Jaeger returned %d traces", id, len(resp.Data))
	}
	return &resp.Data[0], nil
}

// waitTrace waits until the Pod's trace is in Jaeger with its root span.
func (e *inclusterEnv) waitTrace(ctx context.Context, t *testing.T, uid string, timeout time.Duration) *inclusterTrace {
	t.Helper()
	var tr *inclusterTrace
	var last error
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		tr, last = e.getTrace(ctx, uid)
		if last != nil {
			return false, nil
		}
		for _, s := range tr.Spans {
			if s.OperationName == "pod.startup" {
				return true, nil
			}
		}
		last = fmt.Errorf("trace has %d spans but no pod.startup yet", len(tr.Spans))
		return false, nil
	})
	if err != nil {
		t.Fatalf("Pod %s: no complete trace in Jaeger after %s: %v", uid, timeout, last)
	}
	return tr
}

// checkTraceShape checks that a trace was exported once: one root pod.startup, the six phases
// once each, no span ID twice.
func (e *inclusterEnv) checkTraceShape(t *testing.T, uid string, tr *inclusterTrace) {
	t.Helper()
	count := map[string]int{}
	ids := map[string]int{}
	for _, s := range tr.Spans {
		count[s.OperationName]++
		ids[s.SpanID]++
	}
	if count["pod.startup"] != 1 {
		t.Errorf("Pod %s: %d pod.startup spans, want exactly 1 (a duplicate export?)", uid, count["pod.startup"])
	}
	for _, phase := range []string{"submit", "apiserver", "controllers", "scheduling", "kubelet", "status"} {
		if count[phase] != 1 {
			t.Errorf("Pod %s: %d %s spans, want 1", uid, count[phase], phase)
		}
	}
	for id, n := range ids {
		if n > 1 {
			t.Errorf("Pod %s: span ID %s appears %d times", uid, id, n)
		}
	}
}

// traceIDsForPod searches every service in Jaeger for traces tagged with the Pod's UID: a second
// trace ID for the same Pod would be a duplicate with a different ID.
func (e *inclusterEnv) traceIDsForPod(ctx context.Context, uid string) ([]string, error) {
	var services struct {
		Data []string `json:"data"`
	}
	if err := e.jaegerGet(ctx, "/api/services", &services); err != nil {
		return nil, err
	}
	tags, err := json.Marshal(map[string]string{"k8s.pod.uid": uid})
	if err != nil {
		return nil, err
	}
	found := map[string]bool{}
	for _, svc := range services.Data {
		q := url.Values{"service": {svc}, "tags": {string(tags)}, "limit": {"20"}, "lookback": {"6h"}}
		var resp struct {
			Data []inclusterTrace `json:"data"`
		}
		if err := e.jaegerGet(ctx, "/api/traces?"+q.Encode(), &resp); err != nil && !errors.Is(err, errInclusterNoTrace) {
			return nil, err
		}
		for _, tr := range resp.Data {
			found[strings.TrimLeft(tr.TraceID, "0")] = true
		}
	}
	return inclusterKeys(found), nil
}

// ---------------------------------------------------------------------------------------------

func (e *inclusterEnv) dumpDiagnostics(t *testing.T) {
	for _, args := range [][]string{
		{"-n", inclusterNamespace, "get", "deploy,rs,pods,lease,endpointslices", "-o", "wide"},
		{"-n", inclusterNamespace, "describe", "pods"},
		{"-n", inclusterNamespace, "get", "events", "--sort-by=.lastTimestamp"},
		{"-n", inclusterNamespace, "logs", "-l", "app.kubernetes.io/name=podtrace", "--tail=200", "--prefix"},
		{"-n", inclusterWorkloadNamespace, "get", "deploy,rs,pods", "-o", "wide"},
		{"get", "clusterrole", "podtrace", "-o", "yaml"},
	} {
		out, err := inclusterRun(t, e.root, nil, e.kubectl, append([]string{"--kubeconfig", e.kubeconfig}, args...)...)
		if err != nil {
			t.Logf("kubectl %s: %v", strings.Join(args, " "), err)
			continue
		}
		t.Logf("kubectl %s:\n%s", strings.Join(args, " "), out)
	}
}
