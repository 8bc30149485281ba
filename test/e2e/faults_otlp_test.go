//go:build e2e && e2e_faults

// The OTLP input under attack (issue 32): the in-cluster readyspan, installed by its chart with
// the chart's memory limit and the input authenticated, receives the real components' spans
// through a real Collector (a second bin/jaeger, an OpenTelemetry Collector distribution) that
// sends with a node-bound token of the real node, while a hostile sender with a token of its
// own (bound to a Pod on a KWOK node) sends gzip bombs, stalled bodies, slow headers, floods of
// spans, and syncPod spans forged for every real Pod, as the Pods start.
//
//	make e2e-faults   (or: go test -tags 'e2e e2e_faults' -run TestFaultHostileOTLPSenders ./test/e2e/)

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/readyspan/readyspan/test/otlpattack"
)

const (
	otlpFaultRelease = "readyspan-otlp"
	// otlpFaultCollectorAddr is where the local Jaeger forwards the components' spans
	// (READYSPAN_OTLP_PORT in deploy/local/scripts/lib.sh): the test's Collector listens there.
	otlpFaultCollectorAddr = "127.0.0.1:4321"
	// nodeNameExtra is the TokenReview extra naming a bound token's node.
	nodeNameExtra = "authentication.kubernetes.io/node-name"
)

func TestFaultHostileOTLPSenders(t *testing.T) {
	root := repoRoot(t)
	for _, bin := range []string{"helm", "jaeger", "kwok"} {
		if _, err := os.Stat(filepath.Join(root, "bin", bin)); err != nil {
			Missing(t, "bin/%s (make cluster-build): %v", bin, err)
		}
	}
	if ln, err := net.Listen("tcp", otlpFaultCollectorAddr); err != nil {
		t.Fatalf("%s is taken (a readyspan with --otlp-receive?): the test's Collector listens there: %v", otlpFaultCollectorAddr, err)
	} else {
		ln.Close()
	}
	e, image := inclusterPrepare(t)
	e.ns, e.name = otlpFaultRelease, otlpFaultRelease
	ctx, cancel := context.WithTimeout(Ctx(t), 25*time.Minute)
	defer cancel()

	// The senders' identities: ServiceAccounts whose tokens are bound to a Pod each, so that
	// the apiserver names the Pod's node in them, as in a Collector DaemonSet's Pods.
	senders := e.Namespace(t, "otlp-senders")
	for _, sa := range []string{"node-collector", "attacker"} {
		if _, err := e.client.CoreV1().ServiceAccounts(senders).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: otlpFaultRelease,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			e.dumpDiagnostics(t)
		}
		if os.Getenv("READYSPAN_E2E_KEEP") == "" {
			_, _ = inclusterHelm(t, root, "uninstall", otlpFaultRelease, "-n", otlpFaultRelease, "--ignore-not-found", "--kubeconfig", e.Kubeconfig)
			_ = e.client.CoreV1().Namespaces().Delete(context.Background(), otlpFaultRelease, metav1.DeleteOptions{})
		}
	})
	slash := strings.LastIndex(image, "/")
	repo, tag, _ := strings.Cut(image[slash+1:], ":")
	subject := func(sa string) string {
		return fmt.Sprintf("{kind: ServiceAccount, name: %s, namespace: %s}", sa, senders)
	}
	values := fmt.Sprintf(`image: {repository: %q, tag: %q}
extraArgs: [%q]
otlp: {endpoint: %q, insecure: true}
replicas: 1
otlpReceive:
  enabled: true
  from: [{ipBlock: {cidr: 0.0.0.0/0}}]
  nodeSenders: [%s, %s]
  apiserverSenders: [%s]
`, image[:slash+1]+repo, tag, "--namespace="+e.workload, e.otlp, subject("node-collector"), subject("attacker"), subject("node-collector"))
	valuesFile := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(valuesFile, []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := inclusterHelm(t, root, "install", otlpFaultRelease, "deploy/helm/readyspan", "-n", otlpFaultRelease,
		"-f", valuesFile, "--wait", "--timeout", "5m", "--kubeconfig", e.Kubeconfig); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("helm install:\n%s", strings.TrimSpace(out))
	}
	rsPods := e.waitReadyspanReady(ctx, t, 1, 4*time.Minute)
	rs, err := e.client.CoreV1().Pods(e.ns).Get(ctx, rsPods[0], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	input := "https://" + net.JoinHostPort(rs.Status.PodIP, "4321")
	limit := rs.Spec.Containers[0].Resources.Limits.Memory()
	t.Logf("readyspan %s at %s, memory limit %s", rs.Name, input, limit)

	// The Collector's identity: a Pod on the real node. The attacker's: a Pod on a KWOK node.
	e.startKWOK(t)
	realNode := e.realNode(ctx, t)
	kwokNode := "kwok-" + senders
	if _, err := e.client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: kwokNode,
		Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}, Labels: map[string]string{"type": "kwok", "kubernetes.io/hostname": kwokNode}},
		// Only the attacker's Pod goes there: the rollout's Pods start on the real node, whose
		// kubelet sends their spans (a node-bound sender may write its own Pods' spans).
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "readyspan.dev/hostile", Effect: corev1.TaintEffectNoSchedule}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.client.CoreV1().Nodes().Delete(context.Background(), kwokNode, metav1.DeleteOptions{}) })
	collectorToken := e.boundToken(ctx, t, senders, "node-collector", realNode, realNode)
	attackerToken := e.boundToken(ctx, t, senders, "attacker", kwokNode, kwokNode)

	// The real Collector: the local Jaeger forwards the components' spans to it; it sends them
	// on with the node-bound token.
	e.startCollector(t, input, collectorToken)
	// As a readyspan running for a while would have: the components heard from before the Pods
	// start (a trace waits only for the components that send).
	Eventually(t, 90*time.Second, "the kubelet's and the apiserver's spans received through the Collector", func() (bool, error) {
		m := e.scrapePod(ctx, t, rs.Status.PodIP)
		k, a := m[`readyspan_otlp_received_spans_total{component="kubelet"}`], m[`readyspan_otlp_received_spans_total{component="kube-apiserver"}`]
		return k > 0 && a > 0, fmt.Errorf("received %v from the kubelet, %v from the apiserver", k, a)
	})
	t.Cleanup(func() {
		if t.Failed() {
			for k, v := range e.scrapePod(context.Background(), t, rs.Status.PodIP) {
				if strings.HasPrefix(k, "readyspan_otlp_") {
					t.Logf("%s %v", k, v)
				}
			}
		}
	})

	// The rollout, and the attack while its Pods start.
	web := webDeployment("web", faultReplicas)
	web.Spec.Template.Labels = map[string]string{"app": "web"} // no e2e label: the local readyspan must not trace it
	e.createService(t, e.workload, service("web"))
	attacker := otlpattack.Target{URL: input, Token: attackerToken, TLS: &tls.Config{InsecureSkipVerify: true}} // #nosec G402 -- readyspan's self-signed certificate
	var forged sync.Map                                                                                         // forged trace ID → Pod
	attackCtx, stopAttack := context.WithCancel(ctx)
	var attacks sync.WaitGroup
	results := map[string]string{}
	var mu sync.Mutex
	// READYSPAN_E2E_OTLP_CONTROL=1 runs the same rollout without the attacks: what the
	// components deliver on this machine when nobody attacks, to tell their losses from the
	// attack's.
	control := os.Getenv("READYSPAN_E2E_OTLP_CONTROL") == "1"
	run := func(name string, f func() string) {
		if control && name != "forged syncPods" {
			return
		}
		attacks.Add(1)
		go func() {
			defer attacks.Done()
			r := f()
			mu.Lock()
			results[name] = r
			mu.Unlock()
		}()
	}
	w, err := e.client.CoreV1().Pods(e.workload).Watch(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	run("forged syncPods", func() string {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: attacker.TLS}}
		answers := otlpattack.Answers{}
		seen := map[string]bool{}
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Deleted || seen[string(p.UID)] {
				continue
			}
			seen[string(p.UID)] = true
			// 37 s before the Pod was created: a kubelet clock behind the apiserver's too.
			body, id := otlpattack.ForgedSyncPod(string(p.UID), p.Name, p.Namespace, p.CreationTimestamp.Add(-37*time.Second))
			forged.Store(id, p.Name)
			// Sent until taken, as a sender told to retry does: each forged trace must arrive
			// for the test to show it is not joined.
			code := attacker.Post(attackCtx, c, body, false)
			for code == http.StatusTooManyRequests && attackCtx.Err() == nil {
				time.Sleep(500 * time.Millisecond)
				code = attacker.Post(attackCtx, c, body, false)
			}
			answers[code]++
			if len(seen) == faultReplicas {
				break
			}
		}
		return answers.String()
	})
	start := time.Now()
	e.createDeployment(t, e.workload, web)
	run("gzip bombs", func() string { return attacker.GzipBombs(attackCtx, 200, 25).String() })
	run("stalled senders", func() string {
		open, closeAll, err := attacker.Stall(20, 16<<20, 50, 2*time.Second)
		if err != nil {
			return err.Error()
		}
		defer closeAll()
		select {
		case <-attackCtx.Done():
		case <-time.After(45 * time.Second):
		}
		return fmt.Sprintf("%d of 70 still open after 45 s", open())
	})
	run("unrelated roots", func() string {
		return attacker.Flood(attackCtx, 1_000_000, 2000, 2, "kube-apiserver", otlpattack.UnrelatedRoots).String()
	})
	run("unique keys", func() string {
		return attacker.Flood(attackCtx, 50_000, 200, 2, "kubelet", otlpattack.UniqueKeys).String()
	})
	run("a Pod in every span", func() string {
		return attacker.Flood(attackCtx, 200_000, 50_000, 1, "kubelet", otlpattack.PodInEverySpan).String()
	})
	ready := e.WaitPodsReady(t, e.workload, "app=web", faultReplicas, 5*time.Minute)
	attacks.Wait()
	stopAttack()
	w.Stop()
	for name, r := range results {
		t.Logf("attack %s: %s", name, r)
	}
	if strings.Contains(results["stalled senders"], "still open") && !strings.HasPrefix(results["stalled senders"], "0 of") {
		t.Errorf("stalled senders: %s, want every one closed by the read timeouts", results["stalled senders"])
	}

	// Every real Pod's trace: once, with the components' genuine spans, none of the forged.
	uids := make([]string, 0, len(ready))
	for _, p := range ready {
		uids = append(uids, string(p.UID))
	}
	// Exported, with what arrived: the components' spans are judged below, Pod by Pod.
	traces := e.WaitTraces(t, uids, 3*time.Minute, func(tr *Trace) bool { return tr.Root() != nil })
	for _, p := range ready {
		tr := traces[string(p.UID)]
		if tr == nil {
			t.Errorf("Pod %s: no trace with the kubelet's spans", p.Name)
			continue
		}
		inclusterCheckTrace(t, string(p.UID), tr)
		if tr.Find("controllers.pod_create") == nil {
			t.Errorf("Pod %s: the apiserver's create request is not in its trace", p.Name)
		}
		if tr.Find("kubelet.sync_pod") == nil {
			t.Errorf("Pod %s: the kubelet's syncPod is not in its trace (missing: %v)", p.Name, tr.Root().StrTag("readyspan.components.missing"))
		}
		for _, s := range tr.Spans {
			for _, ref := range s.References {
				if pod, ok := forged.Load(strings.TrimLeft(ref.TraceID, "0")); ok {
					t.Errorf("Pod %s: span %s links to the trace forged for %v", p.Name, s.OperationName, pod)
				}
				if pod, ok := forged.Load(ref.TraceID); ok {
					t.Errorf("Pod %s: span %s links to the trace forged for %v", p.Name, s.OperationName, pod)
				}
			}
			if s.OperationName == "kubelet.sync_pod" && s.StartTime().Before(p.CreationTimestamp.Add(-5*time.Second)) {
				t.Errorf("Pod %s: a kubelet.sync_pod at %s, before the Pod was created (%s): the forged one", p.Name, s.StartTime(), p.CreationTimestamp)
			}
		}
	}

	// readyspan was not OOM-killed, and counted what it refused.
	rs, err = e.client.CoreV1().Pods(e.ns).Get(ctx, rs.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cs := range rs.Status.ContainerStatuses {
		if cs.RestartCount > 0 {
			reason := ""
			if term := cs.LastTerminationState.Terminated; term != nil {
				reason = term.Reason
			}
			t.Errorf("readyspan restarted %d times (last: %s) under the attack", cs.RestartCount, reason)
		}
	}
	metrics := e.scrapePod(ctx, t, rs.Status.PodIP)
	// A forged trace is dropped as forbidden when its Pod's trace looks for it, or before, with
	// the rest of the attacker's spans, when the attacker holds more than its half of the bound.
	forbidden := metrics[`readyspan_otlp_dropped_spans_total{component="kubelet",reason="forbidden"}`] +
		metrics[`readyspan_otlp_dropped_spans_total{component="kubelet",reason="bytes"}`]
	refused := metrics[`readyspan_otlp_refused_requests_total{reason="busy"}`] + metrics[`readyspan_otlp_refused_requests_total{reason="too_large"}`]
	if forbidden < 4*faultReplicas {
		t.Errorf("%v kubelet spans dropped as forbidden or past the attacker's share, want at least the %d forged", forbidden, 4*faultReplicas)
	}
	if refused == 0 {
		t.Error("no request refused as busy or too large under gzip bombs and stalled bodies")
	}
	peak := podPeakMemory(string(rs.UID))
	t.Logf("FAULT hostile-otlp pods=%d traces=%d forbidden=%v refused=%v joined-kubelet=%v peak-memory=%s limit=%s took=%s",
		len(ready), len(traces), forbidden, refused, metrics[`readyspan_otlp_joined_spans_total{component="kubelet"}`],
		peak, limit, time.Since(start).Round(time.Second))
}

// realNode is the node the local cluster's kubelet registered.
func (e *inclusterEnv) realNode(ctx context.Context, t *testing.T) string {
	t.Helper()
	nodes, err := e.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		if n.Annotations["kwok.x-k8s.io/node"] == "" {
			return n.Name
		}
	}
	t.Fatal("no real node")
	return ""
}

// boundToken starts a Pod of the ServiceAccount on node, and asks the apiserver for a token
// bound to it (as the kubelet does for a projected token); the apiserver's TokenReview must name
// the node in it, as readyspan reads it.
func (e *inclusterEnv) boundToken(ctx context.Context, t *testing.T, ns, sa, node, wantNode string) string {
	t.Helper()
	p := sleeper(sa, PauseImage)
	p.Labels = map[string]string{"app": sa}
	p.Spec.ServiceAccountName = sa
	p.Spec.NodeName = node
	p.Spec.Containers[0].Command = nil
	p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	created, err := e.client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.WaitPodsReady(t, ns, "app="+sa, 1, 2*time.Minute)
	tr, err := e.client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{
		BoundObjectRef: &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: created.Name, UID: created.UID}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rev, err := e.client.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: tr.Status.Token}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := rev.Status.User.Extra[nodeNameExtra]; len(got) != 1 || got[0] != wantNode {
		t.Fatalf("the token of %s bound to a Pod on %s: TokenReview extra %s = %v, want the node", sa, node, nodeNameExtra, got)
	}
	return tr.Status.Token
}

// startCollector runs bin/jaeger as an OpenTelemetry Collector on otlpFaultCollectorAddr that
// sends every span it receives on to the input with the token, until the test ends.
func (e *inclusterEnv) startCollector(t *testing.T, input, token string) {
	t.Helper()
	dir := t.TempDir()
	cfg := fmt.Sprintf(`service:
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [otlphttp/readyspan]
  telemetry:
    metrics: {level: none}
receivers:
  otlp:
    protocols:
      http: {endpoint: %s}
processors:
  batch: {timeout: 200ms}
exporters:
  otlphttp/readyspan:
    endpoint: %s
    headers: {Authorization: "Bearer %s"}
    tls: {insecure_skip_verify: true}
    retry_on_failure: {enabled: true, initial_interval: 500ms, max_interval: 2s}
`, otlpFaultCollectorAddr, input, token)
	path := filepath.Join(dir, "collector.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "collector.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(e.root, "bin", "jaeger"), "--config", path)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_, _ = cmd.Process.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("collector log:\n%s", b)
		}
	})
	Eventually(t, 30*time.Second, "the Collector listening on "+otlpFaultCollectorAddr, func() (bool, error) {
		c, err := net.Dial("tcp", otlpFaultCollectorAddr)
		if err == nil {
			c.Close()
		}
		return err == nil, err
	})
}

// scrapePod reads readyspan's /metrics from its Pod: series → value.
func (e *inclusterEnv) scrapePod(ctx context.Context, t *testing.T, ip string) map[string]float64 {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(ip, "8080")+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("scrape readyspan: %v", err)
	}
	defer resp.Body.Close()
	text, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("scrape readyspan: %v", err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(text), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

// podPeakMemory is the most memory the Pod's cgroup used (cgroup v1's
// memory.max_usage_in_bytes), found by the Pod's UID under the kubelet's cgroup tree.
func podPeakMemory(uid string) string {
	var found string
	_ = filepath.WalkDir("/sys/fs/cgroup/memory", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			return nil
		}
		if strings.HasSuffix(path, "pod"+uid) || strings.HasSuffix(path, "pod"+strings.ReplaceAll(uid, "-", "_")) {
			found = path
			return filepath.SkipAll
		}
		return nil
	})
	if found == "" {
		return "not measured (no cgroup v1 memory controller for the Pod)"
	}
	b, err := os.ReadFile(filepath.Join(found, "memory.max_usage_in_bytes"))
	if err != nil {
		return "not measured: " + err.Error()
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return fmt.Sprintf("%d MiB", n>>20)
}
