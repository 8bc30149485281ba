//go:build e2e

// In-cluster end-to-end test of issue 4: readyspan deployed with `kubectl apply -k` of
// deploy/kubernetes into the local cluster (make cluster-up), as real Pods on the real node.
//
//	make e2e
//	go test -tags e2e -count=1 -run 'TestInCluster' -timeout 30m -v ./test/e2e/
//
// It uses the shared harness (harness_test.go: Setup, Env, Jaeger, Eventually…) and needs, beyond
// what the harness needs, the local registry on 127.0.0.1:5000, Jaeger's OTLP receiver where Pods
// reach it (the bridge address), bin/kubectl and bin/readyspan (make build). TestInClusterManifests
// needs only bin/kubectl (and uses bin/promtool when it exists).
//
// The in-cluster readyspan is limited (--namespace) to this test's workload namespace, and the
// workload's Pods do not carry the e2e label that the local readyspan of make e2e selects, so each
// Pod is traced by exactly one readyspan installation. Run alone, stop a local readyspan that traces
// every namespace first (deploy/local/scripts/readyspan.sh stop), or it exports the same traces.
//
// Environment (optional, besides the harness'):
//
//	READYSPAN_E2E_IMAGE             an already pushed readyspan image; default: build and push one
//	READYSPAN_E2E_OTLP_ENDPOINT     OTLP endpoint as Pods see it (default http://10.88.77.1:4317)
//	READYSPAN_E2E_KEEP=1            leave readyspan and the workload installed afterwards
//
// Its own helpers are prefixed with incluster so they never collide with the harness.
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
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	leaderelection "github.com/readyspan/readyspan/leader"
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
)

const (
	inclusterNamespace   = "readyspan" // the base's namespace, restricted PodSecurity
	inclusterWorkload    = "incluster-rollout"
	inclusterDefaultOTLP = "http://10.88.77.1:4317"
	inclusterImageRepo   = Registry + "/readyspan/readyspan"
)

// inclusterEnv is the harness' Env plus what the in-cluster test adds.
type inclusterEnv struct {
	*Env
	root     string // repository root
	kubectl  string
	client   kubernetes.Interface
	otlp     string
	workload string // the test rollout's namespace
	overlay  string // the kustomize overlay the test applies, relative to root
	ns       string // readyspan's namespace: the base's, or the Helm release's
	name     string // its Deployment, ServiceAccount, ClusterRole and Lease: readyspan, or the release's full name
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
	out, err := inclusterRun(t, e.root, nil, e.kubectl, append([]string{"--kubeconfig", e.Kubeconfig}, args...)...)
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
	root := repoRoot(t)
	kubectl := filepath.Join(root, "bin", "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		Missing(t, "bin/kubectl (make cluster-build): %v", err)
	}

	base, err := inclusterRun(t, root, nil, kubectl, "kustomize", "deploy/kubernetes")
	if err != nil {
		t.Fatal(err)
	}
	inclusterCheckManifests(t, root, "deploy/kubernetes", base, func() (string, error) {
		return inclusterRun(t, root, nil, kubectl, "kustomize", "deploy/kubernetes/prometheus-operator")
	})
}

// TestInClusterHelmManifests runs TestInClusterManifests' checks on the Helm chart's rendering
// (bin/helm template, release readyspan in namespace readyspan; prometheus-operator's API named
// for the second): its RBAC is held to the same list, and its PrometheusRule to alerts.yaml and
// promtool.
func TestInClusterHelmManifests(t *testing.T) {
	root := repoRoot(t)
	helm := filepath.Join(root, "bin", "helm")
	if _, err := os.Stat(helm); err != nil {
		Missing(t, "bin/helm (make cluster-build): %v", err)
	}
	args := []string{"template", "readyspan", "deploy/helm/readyspan", "--namespace", "readyspan", "--set", "namespace.create=true"}
	base, err := inclusterHelm(t, root, args...)
	if err != nil {
		t.Fatal(err)
	}
	inclusterCheckManifests(t, root, "deploy/helm/readyspan", base, func() (string, error) {
		return inclusterHelm(t, root, append(args, "--api-versions", "monitoring.coreos.com/v1")...)
	})
}

// inclusterCheckManifests checks what a restricted, least-privilege install must look like in
// base, the rendering of what (the kustomize base or the chart), and in withOperator's, the same
// with prometheus-operator, the ServiceMonitor and the PrometheusRule.
func inclusterCheckManifests(t *testing.T, root, what, base string, withOperator func() (string, error)) {
	t.Helper()
	objs := inclusterDecodeYAML(t, base)
	kinds := map[string]map[string]any{}
	for _, o := range objs {
		kinds[o["kind"].(string)] = o
	}
	for _, k := range []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Deployment", "Service", "PodDisruptionBudget"} {
		if kinds[k] == nil {
			t.Errorf("%s renders no %s", what, k)
		}
	}

	t.Run("namespace is restricted", func(t *testing.T) {
		labels := inclusterPath(kinds["Namespace"], "metadata", "labels")
		if labels == nil || labels.(map[string]any)["pod-security.kubernetes.io/enforce"] != "restricted" {
			t.Errorf("Namespace labels %v: want pod-security.kubernetes.io/enforce=restricted", labels)
		}
	})

	// What readyspan needs is the base ClusterRole, which TestClusterRoleMatchesRegistry (unit
	// tests) holds to the registry of kinds: the rendered one grants exactly that, read-only.
	t.Run("ClusterRole is read-only and minimal", func(t *testing.T) {
		var role, needed rbacv1.ClusterRole
		inclusterConvert(t, kinds["ClusterRole"], &role)
		data, err := os.ReadFile(filepath.Join(root, "deploy/kubernetes/base/clusterrole.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		base := inclusterDecodeYAML(t, string(data))
		if len(base) != 1 {
			t.Fatalf("deploy/kubernetes/base/clusterrole.yaml holds %d objects, want 1", len(base))
		}
		inclusterConvert(t, base[0], &needed)
		readOnly := map[string]bool{"get": true, "list": true, "watch": true}
		for _, r := range role.Rules {
			if len(r.NonResourceURLs) > 0 || len(r.ResourceNames) > 0 {
				t.Errorf("unexpected rule %+v", r)
			}
			for _, v := range r.Verbs {
				if !readOnly[v] {
					t.Errorf("rule %v %v has verb %q, want get, list or watch only", r.APIGroups, r.Resources, v)
				}
			}
		}
		got, want := inclusterGrants(role.Rules), inclusterGrants(needed.Rules)
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
		if spec.ServiceAccountName != "readyspan" {
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
		for _, want := range []string{"run", "--leader-elect", "--leader-elect-namespace=$(POD_NAMESPACE)", "--leader-elect-lease-name=readyspan", "--metrics-addr=:8080"} {
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
		out, err := withOperator()
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

// inclusterGrants expands rules into "group/resource verb" grants.
func inclusterGrants(rules []rbacv1.PolicyRule) map[string]bool {
	out := map[string]bool{}
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					out[g+"/"+res+" "+v] = true
				}
			}
		}
	}
	return out
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

// TestInCluster installs readyspan with the kustomize base and checks, in order: both replicas
// Ready under restricted PodSecurity; a rollout's traces in Jaeger; no forbidden in the logs;
// leader deletion in the middle of a rollout leaves every Pod with exactly one trace; one RBAC rule
// removed gives one clear message and /readyz not ready; restoring it recovers.
func TestInCluster(t *testing.T) {
	e := inclusterSetup(t)
	ctx, cancel := context.WithTimeout(Ctx(t), 25*time.Minute)
	defer cancel()

	t.Cleanup(func() {
		if t.Failed() {
			e.dumpDiagnostics(t)
		}
		if os.Getenv("READYSPAN_E2E_KEEP") == "" {
			if _, err := inclusterRun(t, e.root, nil, e.kubectl, "--kubeconfig", e.Kubeconfig,
				"delete", "-k", e.overlay, "--ignore-not-found", "--wait=false"); err != nil {
				t.Logf("uninstall readyspan: %v", err)
			}
		}
	})

	e.install(ctx, t)
	pods := e.waitReadyspanReady(ctx, t, 2, 4*time.Minute)
	t.Logf("readyspan replicas Ready: %v", pods)
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
		for uid, tr := range e.WaitTraces(t, uids, 2*time.Minute, inclusterHasRoot) {
			inclusterCheckTrace(t, uid, tr)
		}
		t.Logf("%d Pods traced by the in-cluster leader", len(uids))
	})

	t.Run("no forbidden in logs", func(t *testing.T) {
		for _, p := range e.readyspanPods(ctx, t) {
			logs := e.logs(ctx, t, p)
			if strings.Contains(strings.ToLower(logs), "forbidden") {
				t.Errorf("readyspan %s logs say forbidden:\n%s", p, inclusterGrep(logs, "forbidden"))
			}
		}
	})

	t.Run("leader deleted mid-rollout", func(t *testing.T) {
		before := len(tracker.uids())
		leader := e.waitLeader(ctx, t, e.readyspanPods(ctx, t), 60*time.Second)
		rolloutStart := time.Now()
		e.restartWorkload(ctx, t)
		// Wait until the new ReplicaSet has created its first Pod, then kill the leader.
		Eventually(t, time.Minute, "the rollout's first Pod", func() (bool, error) {
			return len(tracker.uids()) > before, nil
		})
		// Keep the leader's log to its last line: after deletion it is gone with the Pod.
		leaderLog := e.followLogs(ctx, leader)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("log of the deleted leader %s:\n%s", leader, leaderLog())
			}
		})
		t.Logf("deleting leader %s %s after the rollout started", leader, time.Since(rolloutStart).Round(time.Millisecond))
		if err := e.client.CoreV1().Pods(e.ns).Delete(ctx, leader, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete leader %s: %v", leader, err)
		}
		e.waitWorkloadRolledOut(ctx, t, 4*time.Minute)
		pods := e.waitReadyspanReady(ctx, t, 2, 4*time.Minute)
		newLeader := e.waitLeader(ctx, t, pods, 90*time.Second)
		if newLeader == leader {
			t.Errorf("the Lease is still held by the deleted Pod %s", leader)
		}
		t.Logf("new leader: %s", newLeader)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("log of the new leader %s:\n%s", newLeader, e.logs(ctx, t, newLeader))
			}
		})

		uids := tracker.uids()
		if len(uids) <= before {
			t.Fatalf("saw no new workload Pods during the rollout")
		}
		t.Logf("workload Pods: %s", tracker.describe())
		e.WaitTraces(t, uids, 3*time.Minute, inclusterHasRoot)
		// A late duplicate export arrives after the first: look again a little later, and search
		// by the Pod UID attribute for a second trace under another ID.
		time.Sleep(15 * time.Second)
		for _, uid := range uids {
			tr, err := e.Jaeger.Trace(ctx, TraceID(uid))
			if err != nil || tr == nil {
				t.Errorf("Pod %s: trace gone (%v)", uid, err)
				continue
			}
			inclusterCheckTrace(t, uid, tr)
			ids, err := e.traceIDsForPod(ctx, uid)
			if err != nil {
				t.Errorf("search the traces of Pod %s: %v", uid, err)
				continue
			}
			if len(ids) > 1 {
				t.Errorf("Pod %s has %d traces in Jaeger (%v), want exactly one", uid, len(ids), ids)
			}
		}
		// Jaeger may merge two identical exports (the old and the new leader's): count what the
		// replicas sent through the OTLP witness.
		names := map[string]string{}
		for _, uid := range uids {
			names[uid] = uid
		}
		e.CheckExportedOnce(t, names)
		if !t.Failed() {
			t.Logf("%d workload Pods (%d from the rollout across the handover), each with exactly one trace", len(uids), len(uids)-before)
		}
	})

	t.Run("leader SIGKILLed mid-rollout", func(t *testing.T) {
		before := len(tracker.uids())
		leader := e.waitLeader(ctx, t, e.readyspanPods(ctx, t), 60*time.Second)
		e.restartWorkload(ctx, t)
		Eventually(t, time.Minute, "the rollout's first Pod", func() (bool, error) {
			return len(tracker.uids()) > before, nil
		})
		// No drain, no Lease release: the kernel kills the process; the kubelet restarts the
		// container in the same Pod.
		pid := e.containerPID(ctx, t, leader)
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("SIGKILL the leader %s (pid %d): %v", leader, pid, err)
		}
		killed := time.Now()
		t.Logf("SIGKILLed the leader %s (pid %d)", leader, pid)
		e.waitWorkloadRolledOut(ctx, t, 4*time.Minute)
		pods := e.waitReadyspanReady(ctx, t, 2, 4*time.Minute)
		newLeader := e.waitLeader(ctx, t, pods, 90*time.Second)
		uids := tracker.uids()
		if len(uids) <= before {
			t.Fatalf("saw no new workload Pods during the rollout")
		}
		e.WaitTraces(t, uids, 3*time.Minute, inclusterHasRoot)
		time.Sleep(15 * time.Second) // a late duplicate arrives after the first export
		roots := e.CapturedRoots(t)
		// The documented bound (docs/limits.md): only a Pod Ready within the settle time (2 s)
		// before the dead leader's last renewal (every 2 s) or after it may be sent twice.
		window := 2*time.Second + leaderelection.DefaultRetryPeriod + time.Second // + the condition's 1 s precision
		lost, dup, mayRepeat := 0, 0, 0
		for _, uid := range uids {
			switch n := roots[TraceID(uid)]; {
			case n == 0:
				lost++
			case n > 1:
				dup += n - 1
			}
			if ready := e.podReadyAt(ctx, t, uid); !ready.IsZero() && ready.After(killed.Add(-window)) && !ready.After(killed.Add(time.Second)) {
				mayRepeat++
			}
		}
		t.Logf("FAULT leader-sigkill: %d workload Pods (%d from the rollout), lost %d, duplicated %d (bound: %d Pods Ready within %v before the kill), new leader %s",
			len(uids), len(uids)-before, lost, dup, mayRepeat, window, newLeader)
		if lost != 0 {
			t.Errorf("lost %d traces", lost)
		}
		if dup > mayRepeat {
			t.Errorf("duplicated %d, beyond the documented bound of %d", dup, mayRepeat)
		}
	})

	t.Run("one RBAC rule removed", func(t *testing.T) {
		e.removeClusterRoleRule(ctx, t, "discovery.k8s.io", "endpointslices")
		before := e.readyspanPods(ctx, t)
		e.kubectlRun(t, "-n", e.ns, "rollout", "restart", "deployment/"+e.name)

		// maxUnavailable 0: the first new replica comes up and must stay not Ready.
		var fresh string
		Eventually(t, 3*time.Minute, "a new readyspan replica running for 30s", func() (bool, error) {
			for _, p := range e.readyspanPodObjects(ctx, t) {
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
		})
		p, err := e.client.CoreV1().Pods(e.ns).Get(ctx, fresh, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if PodReady(p) {
			t.Errorf("readyspan %s is Ready without list/watch on endpointslices", fresh)
		}
		code, body := e.readyz(ctx, fresh)
		if code != http.StatusServiceUnavailable {
			t.Errorf("readyspan %s /readyz = %d %q, want 503 not ready", fresh, code, body)
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
			t.Errorf("readyspan %s logs nothing about the missing endpointslices rule:\n%s", fresh, logs)
		case len(lines) > 1:
			t.Errorf("readyspan %s logs %d lines about the missing rule, want one clear line:\n%s", fresh, len(lines), strings.Join(lines, "\n"))
		}
		for _, l := range lines {
			if !strings.Contains(l, "endpointslices") || !(strings.Contains(l, "list") || strings.Contains(l, "watch")) {
				t.Errorf("message does not name the verb (list/watch) and the resource (endpointslices): %s", l)
			}
		}
		if len(lines) > 0 {
			t.Logf("readyspan's message: %s", lines[0])
		}

		// Restore the rule (the base applied again); the stuck replica must recover by itself.
		e.install(ctx, t)
		if err := e.waitDeploymentRolledOut(ctx, e.ns, e.name, 5*time.Minute); err != nil {
			t.Errorf("readyspan did not recover after the rule was restored: %v", err)
		}
		e.waitReadyspanReady(ctx, t, 2, 2*time.Minute)
	})
}

// inclusterSetup prepares the kustomize install: the image, the workload's namespace and the
// overlay.
func inclusterSetup(t *testing.T) *inclusterEnv {
	t.Helper()
	e, image := inclusterPrepare(t)
	e.ns, e.name = inclusterNamespace, "readyspan"
	e.overlay = e.writeOverlay(t, image)
	return e
}

// inclusterPrepare is what every in-cluster install needs: the cluster's clients, the image
// (built and pushed unless READYSPAN_E2E_IMAGE names one) and the workload's namespace, which
// the install is limited to.
func inclusterPrepare(t *testing.T) (*inclusterEnv, string) {
	t.Helper()
	env := Setup(t)
	e := &inclusterEnv{
		Env:     env,
		root:    env.Root,
		kubectl: filepath.Join(env.Root, "bin", "kubectl"),
		client:  env.Kube,
		otlp:    getenv("READYSPAN_E2E_OTLP_ENDPOINT", inclusterDefaultOTLP),
	}
	if _, err := os.Stat(e.kubectl); err != nil {
		t.Fatalf("bin/kubectl missing (make cluster-build): %v", err)
	}
	e.checkLocalReadyspan(t)
	image := os.Getenv("READYSPAN_E2E_IMAGE")
	if image == "" {
		if _, err := os.Stat(filepath.Join(e.root, "bin", "readyspan")); err != nil {
			t.Fatalf("bin/readyspan missing (make build): %v", err)
		}
		image = inclusterImageRepo + ":e2e-" + strconv.FormatInt(time.Now().Unix(), 10)
		out, err := inclusterRun(t, e.root, []string{"IMAGE=" + image}, filepath.Join(e.root, "deploy", "image", "build.sh"))
		if err != nil {
			t.Fatalf("build and push the image: %v", err)
		}
		t.Log(strings.TrimSpace(out))
	}
	// The workload's namespace (deleted when the test ends) comes first: the install is limited
	// to it.
	e.workload = e.Namespace(t, "incluster")
	return e, image
}

// checkLocalReadyspan fails early when the local cluster's own `readyspan run`
// (deploy/local/scripts/readyspan.sh) traces every Pod: it would export the workload's traces too,
// and each Pod would show up twice in Jaeger. make e2e runs it with --selector on the e2e label.
func (e *inclusterEnv) checkLocalReadyspan(t *testing.T) {
	t.Helper()
	pid, err := os.ReadFile(filepath.Join(e.State, "run", "readyspan.pid"))
	if err != nil {
		return // not running under deploy/local
	}
	if _, err := os.Stat(filepath.Join("/proc", strings.TrimSpace(string(pid)))); err != nil {
		return // stale PID file
	}
	args, _ := os.ReadFile(filepath.Join(e.State, "run", "readyspan.args"))
	if !bytes.Contains(args, []byte("--selector")) && !bytes.Contains(args, []byte("--namespace")) {
		t.Fatalf("the local readyspan (pid %s) traces every namespace (args %q), so the workload's Pods would be traced twice; run this test through make e2e, or stop it first: deploy/local/scripts/readyspan.sh stop",
			strings.TrimSpace(string(pid)), args)
	}
}

// writeOverlay writes the kustomization the test applies into .local/ (git-ignored): the base,
// with the image and the OTLP endpoint pointed at the local cluster's registry and Jaeger, and
// readyspan limited to the workload's namespace.
func (e *inclusterEnv) writeOverlay(t *testing.T, image string) string {
	t.Helper()
	dir := filepath.Join(e.State, "e2e-incluster")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	slash := strings.LastIndex(image, "/")
	name, tag, ok := strings.Cut(image[slash+1:], ":")
	if !ok {
		t.Fatalf("image %q has no tag", image)
	}
	kustomization := fmt.Sprintf(`# Written by test/e2e/incluster_test.go.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - %s
images:
  - name: %s
    newName: %s
    newTag: %q
patches:
  - patch: |
      apiVersion: apps/v1
      kind: Deployment
      metadata: {name: readyspan, namespace: %s}
      spec:
        template:
          spec:
            containers:
              - name: readyspan
                env:
                  - name: OTEL_EXPORTER_OTLP_ENDPOINT
                    value: %s
                  - name: OTEL_EXPORTER_OTLP_INSECURE
                    value: "true"
  - target: {kind: Deployment, name: readyspan}
    patch: |
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --namespace=%s
`, inclusterRel(t, dir, filepath.Join(e.root, "deploy", "local", "kubernetes")), inclusterImageRepo, image[:slash+1]+name, tag,
		inclusterNamespace, e.otlp, e.workload)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		t.Fatal(err)
	}
	return inclusterRel(t, e.root, dir)
}

func inclusterRel(t *testing.T, base, target string) string {
	t.Helper()
	rel, err := filepath.Rel(base, target)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.ToSlash(rel)
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

func (e *inclusterEnv) readyspanPodObjects(ctx context.Context, t *testing.T) []corev1.Pod {
	t.Helper()
	list, err := e.client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=readyspan"})
	if err != nil {
		t.Fatalf("list readyspan Pods: %v", err)
	}
	var pods []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			pods = append(pods, p)
		}
	}
	return pods
}

func (e *inclusterEnv) readyspanPods(ctx context.Context, t *testing.T) []string {
	t.Helper()
	var names []string
	for _, p := range e.readyspanPodObjects(ctx, t) {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	return names
}

// waitReadyspanReady waits for exactly n readyspan Pods, all Ready, and returns their names.
func (e *inclusterEnv) waitReadyspanReady(ctx context.Context, t *testing.T, n int, timeout time.Duration) []string {
	t.Helper()
	var names []string
	Eventually(t, timeout, fmt.Sprintf("%d Ready readyspan replicas", n), func() (bool, error) {
		names = names[:0]
		pods := e.readyspanPodObjects(ctx, t)
		for i := range pods {
			if !PodReady(&pods[i]) {
				return false, fmt.Errorf("%s not Ready", pods[i].Name)
			}
			names = append(names, pods[i].Name)
		}
		return len(names) == n, fmt.Errorf("%d replicas: %v", len(names), names)
	})
	slices.Sort(names)
	return slices.Clone(names)
}

// checkRunningPods checks what the kubelet actually runs: the ServiceAccount, a node, no restarts.
func (e *inclusterEnv) checkRunningPods(ctx context.Context, t *testing.T, names []string) {
	t.Helper()
	for _, name := range names {
		p, err := e.client.CoreV1().Pods(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.ServiceAccountName != e.name {
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
	Eventually(t, timeout, fmt.Sprintf("the Lease %s/%s held by one of %v", e.ns, e.name, pods), func() (bool, error) {
		lease, err := e.client.CoordinationV1().Leases(e.ns).Get(ctx, e.name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if lease.Spec.HolderIdentity == nil {
			return false, errors.New("no holder")
		}
		holder = *lease.Spec.HolderIdentity
		return slices.Contains(pods, holder), fmt.Errorf("held by %q", holder)
	})
	return holder
}

// inclusterPodTracker records the UID of every workload Pod a watch reports as added.
type inclusterPodTracker struct {
	mu    sync.Mutex
	seen  map[types.UID]bool
	list  []string
	names map[string]string // UID → name, for messages
}

func (tr *inclusterPodTracker) add(p *corev1.Pod) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if !tr.seen[p.UID] {
		tr.seen[p.UID] = true
		tr.list = append(tr.list, string(p.UID))
		tr.names[string(p.UID)] = p.Name
	}
}

// describe lists the Pods as name=uid (created order), for the log when a trace is missing.
func (tr *inclusterPodTracker) describe() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var out []string
	for _, uid := range tr.list {
		out = append(out, tr.names[uid]+"="+uid)
	}
	return strings.Join(out, " ")
}

func (tr *inclusterPodTracker) uids() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.list)
}

func (e *inclusterEnv) trackWorkloadPods(ctx context.Context, t *testing.T) *inclusterPodTracker {
	t.Helper()
	tr := &inclusterPodTracker{seen: map[types.UID]bool{}, names: map[string]string{}}
	pods := e.client.CoreV1().Pods(e.workload)
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
	zero := int64(0)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: inclusterWorkload, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			// One Pod at a time and a few seconds each, so that a rollout lasts long enough to
			// delete the leader in the middle of it.
			MinReadySeconds: 3,
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxSurge:       &intstr.IntOrString{Type: intstr.Int, IntVal: 1},
					MaxUnavailable: &intstr.IntOrString{Type: intstr.Int, IntVal: 0},
				},
			},
			Template: corev1.PodTemplateSpec{
				// No e2e label: the local readyspan of make e2e must not trace these Pods.
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: &zero,
					Containers: []corev1.Container{{
						Name:            "app",
						Image:           PauseImage,
						ImagePullPolicy: corev1.PullIfNotPresent,
					}},
				},
			},
		},
	}
	if _, err := e.client.AppsV1().Deployments(e.workload).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the test Deployment: %v", err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: inclusterWorkload},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	if _, err := e.client.CoreV1().Services(e.workload).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the test Service: %v", err)
	}
}

// restartWorkload starts a rollout the way `kubectl rollout restart` does.
func (e *inclusterEnv) restartWorkload(ctx context.Context, t *testing.T) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"readyspan.dev/e2e-restartedAt":%q}}}}}`, time.Now().Format(time.RFC3339Nano))
	_, err := e.client.AppsV1().Deployments(e.workload).Patch(ctx, inclusterWorkload, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("restart the test Deployment: %v", err)
	}
}

func (e *inclusterEnv) waitWorkloadRolledOut(ctx context.Context, t *testing.T, timeout time.Duration) {
	t.Helper()
	if err := e.waitDeploymentRolledOut(ctx, e.workload, inclusterWorkload, timeout); err != nil {
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
	// The kubelet serves logs; give it a moment if it is briefly unreachable.
	var data []byte
	Eventually(t, 30*time.Second, "the logs of "+pod, func() (bool, error) {
		var err error
		data, err = e.client.CoreV1().Pods(e.ns).GetLogs(pod, &corev1.PodLogOptions{Container: "readyspan"}).DoRaw(ctx)
		return err == nil, err
	})
	return string(data)
}

// followLogs streams a Pod's log in the background and returns a function that gives what has
// been read so far; the stream ends when the container does.
func (e *inclusterEnv) followLogs(ctx context.Context, pod string) func() string {
	var mu sync.Mutex
	var buf bytes.Buffer
	stream, err := e.client.CoreV1().Pods(e.ns).GetLogs(pod, &corev1.PodLogOptions{Container: "readyspan", Follow: true}).Stream(ctx)
	if err != nil {
		return func() string { return fmt.Sprintf("(no log: %v)", err) }
	}
	go func() {
		defer stream.Close()
		chunk := make([]byte, 4096)
		for {
			n, err := stream.Read(chunk)
			mu.Lock()
			buf.Write(chunk[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		return buf.String()
	}
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

// readyz asks a readyspan Pod's /readyz through the apiserver's Pod proxy and returns the HTTP
// status and body (or the error) it answered with.
func (e *inclusterEnv) readyz(ctx context.Context, pod string) (int, string) {
	body, err := e.client.CoreV1().Pods(e.ns).ProxyGet("http", pod, "8080", "readyz", nil).DoRaw(ctx)
	if err == nil {
		return http.StatusOK, string(body)
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		msg := status.Status().Message
		if d := status.Status().Details; d != nil {
			for _, c := range d.Causes {
				msg += ": " + c.Message
			}
		}
		return int(status.Status().Code), msg
	}
	return 0, err.Error()
}

// removeClusterRoleRule deletes the rule granting resource in group from the readyspan ClusterRole.
func (e *inclusterEnv) removeClusterRoleRule(ctx context.Context, t *testing.T, group, resource string) {
	t.Helper()
	roles := e.client.RbacV1().ClusterRoles()
	role, err := roles.Get(ctx, e.name, metav1.GetOptions{})
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
		t.Fatalf("the readyspan ClusterRole has no rule for %s in %q", resource, group)
	}
	role.Rules = kept
	if _, err := roles.Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update the readyspan ClusterRole: %v", err)
	}
	t.Logf("removed the %s.%s rule from the readyspan ClusterRole", resource, group)
}

// ---------------------------------------------------------------------------------------------
// Traces.

func inclusterHasRoot(tr *Trace) bool { return tr.Root() != nil }

// inclusterCheckTrace checks that a trace was exported once: one root pod.startup, the six phases
// once each, no span ID twice.
func inclusterCheckTrace(t *testing.T, uid string, tr *Trace) {
	t.Helper()
	if n := len(tr.FindAll("pod.startup")); n != 1 {
		t.Errorf("Pod %s: %d pod.startup spans, want exactly 1 (a duplicate export?)", uid, n)
	}
	for _, phase := range Phases {
		if n := len(tr.FindAll(phase)); n != 1 {
			t.Errorf("Pod %s: %d %s spans, want 1", uid, n, phase)
		}
	}
	ids := map[string]int{}
	for _, s := range tr.Spans {
		ids[s.SpanID]++
	}
	for id, n := range ids {
		if n > 1 {
			t.Errorf("Pod %s: span ID %s appears %d times", uid, id, n)
		}
	}
}

// traceIDsForPod searches every service in Jaeger for readyspan's traces tagged with the Pod's UID:
// a second trace ID for the same Pod would be a duplicate under another ID. The kubelet's own
// traces (syncPod) carry k8s.pod.uid too; only traces with readyspan's pod.startup root count.
func (e *inclusterEnv) traceIDsForPod(ctx context.Context, uid string) ([]string, error) {
	services, err := e.Jaeger.Services(ctx)
	if err != nil {
		return nil, err
	}
	found := map[string]bool{}
	for _, svc := range services {
		traces, err := e.Jaeger.FindTraces(ctx, svc, map[string]string{"k8s.pod.uid": uid}, 20)
		if err != nil {
			return nil, err
		}
		for _, tr := range traces {
			if tr.Root() != nil {
				found[strings.TrimLeft(tr.TraceID, "0")] = true
			}
		}
	}
	return inclusterKeys(found), nil
}

// ---------------------------------------------------------------------------------------------

func (e *inclusterEnv) dumpDiagnostics(t *testing.T) {
	for _, args := range [][]string{
		{"-n", e.ns, "get", "deploy,rs,pods,lease,endpointslices", "-o", "wide"},
		{"-n", e.ns, "describe", "pods"},
		{"-n", e.ns, "get", "events", "--sort-by=.lastTimestamp"},
		{"-n", e.ns, "logs", "-l", "app.kubernetes.io/name=readyspan", "--tail=200", "--prefix"},
		{"-n", e.workload, "get", "deploy,rs,pods", "-o", "wide"},
		{"get", "clusterrole", e.name, "-o", "yaml"},
	} {
		out, err := inclusterRun(t, e.root, nil, e.kubectl, append([]string{"--kubeconfig", e.Kubeconfig}, args...)...)
		if err != nil {
			t.Logf("kubectl %s: %v", strings.Join(args, " "), err)
			continue
		}
		t.Logf("kubectl %s:\n%s", strings.Join(args, " "), out)
	}
}

// containerPID is the host PID of the readyspan container's process in the Pod: containerd's
// task list, by the container ID in the Pod's status.
func (e *inclusterEnv) containerPID(ctx context.Context, t *testing.T, pod string) int {
	t.Helper()
	p, err := e.client.CoreV1().Pods(e.ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil || len(p.Status.ContainerStatuses) == 0 {
		t.Fatalf("the leader Pod %s: %v", pod, err)
	}
	id := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
	out, err := inclusterRun(t, e.root, nil, "ctr", "--address", filepath.Join(e.root, ".local/run/containerd.sock"), "--namespace", "k8s.io", "task", "ls")
	if err != nil {
		t.Fatalf("ctr task ls: %v\n%s", err, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == id {
			pid, err := strconv.Atoi(f[1])
			if err == nil && pid > 0 {
				return pid
			}
		}
	}
	t.Fatalf("container %s of %s not in containerd's task list:\n%s", id, pod, out)
	return 0
}

// podReadyAt is when the workload Pod's Ready condition last turned true (whole seconds), or zero.
func (e *inclusterEnv) podReadyAt(ctx context.Context, t *testing.T, uid string) time.Time {
	t.Helper()
	l, err := e.client.CoreV1().Pods(e.workload).List(ctx, metav1.ListOptions{LabelSelector: "app=" + inclusterWorkload})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range l.Items {
		if string(p.UID) != uid {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return c.LastTransitionTime.Time
			}
		}
	}
	return time.Time{}
}
