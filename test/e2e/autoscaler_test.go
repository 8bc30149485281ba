//go:build e2e

// A real node autoscaler (issue 34): Karpenter with its KWOK provider (deploy/local/scripts/
// karpenter.sh) provisions Nodes for a Deployment whose Pods fit no existing node, and
// consolidates them when it is scaled down. Each Node's startup trace, each Pod's wait for its
// node and the replacement of a Pod Karpenter evicted are judged against what the API states
// independently: the NodeClaims' conditions, the Nodes' creation and Ready, the scheduler's
// Scheduled events and Karpenter's Evicted event. Nothing here posts what a component would.
package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// karpenterPool is the label and taint of the local NodePool's Nodes
// (deploy/local/config/karpenter/nodepool.yaml): nothing else runs there.
const karpenterPool = "readyspan.dev/pool"

// startKarpenter runs deploy/local/scripts/karpenter.sh start, and stop when the test ends (which
// deletes the NodePool, so that Karpenter removes its Nodes first). readyspan is restarted after
// the CRDs are installed: it watches the NodeClaims only where discovery lists them at its start.
func (e *Env) startKarpenter(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(e.Root, "bin", "karpenter")); err != nil {
		Missing(t, "bin/karpenter is not built (make cluster-build): %v", err)
	}
	script := filepath.Join(e.Root, "deploy", "local", "scripts", "karpenter.sh")
	run := func(arg string) ([]byte, error) {
		cmd := exec.Command(script, arg)
		cmd.Dir = e.Root
		return cmd.CombinedOutput()
	}
	if out, err := run("start"); err != nil {
		t.Fatalf("karpenter.sh start: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := run("stop"); err != nil {
			t.Errorf("karpenter.sh stop: %v\n%s", err, out)
		}
	})
	e.RestartReadyspan(t)
}

// nodeClaim is what the test reads of a NodeClaim from the API.
type nodeClaim struct {
	Metadata struct {
		Name              string    `json:"name"`
		UID               string    `json:"uid"`
		CreationTimestamp time.Time `json:"creationTimestamp"`
	} `json:"metadata"`
	Status struct {
		NodeName   string `json:"nodeName"`
		Conditions []struct {
			Type, Status       string
			LastTransitionTime time.Time `json:"lastTransitionTime"`
		} `json:"conditions"`
	} `json:"status"`
}

// condition is when the NodeClaim's condition turned True (Karpenter's clock, 1 s), zero if not.
func (c *nodeClaim) condition(typ string) time.Time {
	for _, cond := range c.Status.Conditions {
		if cond.Type == typ && cond.Status == "True" {
			return cond.LastTransitionTime
		}
	}
	return time.Time{}
}

func (e *Env) nodeClaims(t *testing.T) map[string]*nodeClaim {
	t.Helper()
	raw, err := e.Kube.CoreV1().RESTClient().Get().AbsPath("/apis/karpenter.sh/v1/nodeclaims").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("list NodeClaims: %v", err)
	}
	var list struct{ Items []nodeClaim }
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatal(err)
	}
	out := map[string]*nodeClaim{}
	for i := range list.Items {
		c := &list.Items[i]
		out[c.Status.NodeName] = c
	}
	return out
}

func nodeReadyAt(n *corev1.Node) time.Time {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// inSecond reports whether at lies in the whole second s states, or the watch's delivery after it.
func inSecond(at, s time.Time) bool {
	return !s.IsZero() && !at.Before(s) && !at.After(s.Add(time.Second+watchLatency))
}

// karpenterDeployment asks for Pods only Karpenter's Nodes can take: their pool's label and
// toleration, and 700m CPU each (a c-2x Node holds two).
func karpenterDeployment(replicas int32) *appsv1.Deployment {
	labels := LocalPodLabels(map[string]string{"app": "web"})
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: int32p(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken:  boolp(false),
					TerminationGracePeriodSeconds: int64p(2),
					NodeSelector:                  map[string]string{karpenterPool: "karpenter"},
					Tolerations:                   []corev1.Toleration{{Key: karpenterPool, Operator: corev1.TolerationOpEqual, Value: "karpenter", Effect: corev1.TaintEffectNoSchedule}},
					Containers: []corev1.Container{{
						Name: "web", Image: BusyboxImage, Command: []string{"sleep", "3600"},
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("700m"), corev1.ResourceMemory: resource.MustParse("64Mi")}},
					}},
				},
			},
		},
	}
}

// TestKarpenterNodes: three Pods no Node fits make Karpenter provision Nodes. Each Node's startup
// trace (keyed by its NodeClaim's UID) ends each step in the second the NodeClaim's conditions and
// the Node's creation and Ready state; each Pod's wait ends by its bind, is covered by the node's
// steps end to end and links to that Node's trace. Scaled to 2, Karpenter consolidates, evicting a
// Pod: its replacement's trace names the cause Karpenter's Event gives, and the node.
func TestKarpenterNodes(t *testing.T) {
	e := Setup(t)
	e.startKarpenter(t)
	ns := e.Namespace(t, "e2e-karpenter")
	ctx := context.Background()
	before := e.promValue(t, `sum(readyspan_node_startup_duration_seconds_count{provisioner="karpenter",outcome="ready"})`)
	e.createDeployment(t, ns, karpenterDeployment(3))
	pods := e.WaitPodsReady(t, ns, "app=web", 3, 4*time.Minute)

	claims := e.nodeClaims(t)
	for _, p := range pods {
		e.checkNodeWait(t, ns, &p, claims)
	}
	for node, c := range claims {
		e.checkNodeTrace(t, node, c)
		e.checkExplainNode(t, node, c)
	}
	Eventually(t, time.Minute, "the node startups counted", func() (bool, error) {
		return e.promValue(t, `sum(readyspan_node_startup_duration_seconds_count{provisioner="karpenter",outcome="ready"})`)-before >= float64(len(claims)), nil
	})

	// Consolidation: each Node keeps one Pod; Karpenter replaces or removes one, evicting a Pod.
	d, err := e.Kube.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Spec.Replicas = int32p(2)
	if _, err := e.Kube.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var victim, cause string
	Eventually(t, 5*time.Minute, "Karpenter's Evicted event", func() (bool, error) {
		list, err := e.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, ev := range list.Items {
			if ev.Reason == "Evicted" && ev.Source.Component == "karpenter" {
				victim, cause = ev.InvolvedObject.Name, strings.TrimPrefix(ev.Message, "Evicted pod: ")
				return true, nil
			}
		}
		return false, nil
	})
	victimNode := ""
	for _, p := range pods {
		if p.Name == victim {
			victimNode = p.Spec.NodeName
		}
	}
	now := e.WaitPodsReady(t, ns, "app=web", 2, 3*time.Minute)
	var replacement *corev1.Pod
	for i := range now {
		if !podIn(now[i].Name, pods) {
			replacement = &now[i]
		}
	}
	if replacement == nil {
		t.Fatalf("no Pod replaces %s (evicted: %s)", victim, cause)
	}
	tr := e.WaitTrace(t, string(replacement.UID), 2*time.Minute, complete)
	root := tr.Root()
	for key, want := range map[string]string{"readyspan.replaces.pod": victim, "readyspan.replaces.why": "evicted",
		"readyspan.replaces.disruption": cause, "readyspan.replaces.disrupted_by": "karpenter", "readyspan.replaces.node": victimNode} {
		if got := root.StrTag(key); got != want {
			t.Errorf("the replacement of %s: %s=%q, want %q", victim, key, got, want)
		}
	}
	if c := claims[victimNode]; c == nil || !linksTo(root, TraceID(c.Metadata.UID)) {
		t.Errorf("the replacement of %s does not link to the startup trace of its node %s", victim, victimNode)
	}
}

func podIn(name string, pods []corev1.Pod) bool {
	for _, p := range pods {
		if p.Name == name {
			return true
		}
	}
	return false
}

// checkNodeWait holds a Pod's wait for the Node Karpenter made for it against the API: the Node
// it was bound to (the scheduler's Scheduled event), the bind's time, the NodeClaim's conditions
// and the Node's creation and Ready.
func (e *Env) checkNodeWait(t *testing.T, ns string, pod *corev1.Pod, claims map[string]*nodeClaim) {
	t.Helper()
	tr := e.WaitTrace(t, string(pod.UID), 2*time.Minute, complete)
	wait := tr.Find("scheduling.waiting_for_node")
	if wait == nil {
		t.Errorf("Pod %s: no scheduling.waiting_for_node (%s)", pod.Name, tr.Summary())
		return
	}
	var bound time.Time
	for _, ev := range e.PodEvents(t, ns, pod.Name) {
		if ev.Reason == "Scheduled" {
			bound = ev.EventTime.Time
		}
	}
	c := claims[pod.Spec.NodeName]
	node, err := e.Kube.CoreV1().Nodes().Get(context.Background(), pod.Spec.NodeName, metav1.GetOptions{})
	if c == nil || err != nil {
		t.Fatalf("Pod %s on %s: its NodeClaim %v, Node: %v", pod.Name, pod.Spec.NodeName, c != nil, err)
	}
	if got := wait.StrTag("k8s.node.name"); got != pod.Spec.NodeName || wait.StrTag("readyspan.karpenter.nodeclaim") != c.Metadata.Name {
		t.Errorf("Pod %s: waited for %q (claim %q), bound to %s (claim %s)", pod.Name, got, wait.StrTag("readyspan.karpenter.nodeclaim"), pod.Spec.NodeName, c.Metadata.Name)
	}
	if wait.EndTime().After(bound.Add(boundaryTolerance)) {
		t.Errorf("Pod %s: the wait ends at %s, after the bind at %s", pod.Name, wait.EndTime().Format(time.StampMicro), bound.Format(time.StampMicro))
	}
	if !linksTo(wait, TraceID(c.Metadata.UID)) {
		t.Errorf("Pod %s: the wait does not link to its node's startup trace %s", pod.Name, TraceID(c.Metadata.UID))
	}
	steps := tr.Children(wait)
	sort.Slice(steps, func(i, j int) bool { return steps[i].StartTimeUS < steps[j].StartTimeUS })
	want := map[string]time.Time{"scheduling.node.decision": c.Metadata.CreationTimestamp, "scheduling.node.launch": c.condition("Launched"),
		"scheduling.node.instance": node.CreationTimestamp.Time, "scheduling.node.registration": c.condition("Registered"),
		"scheduling.node.kubelet_ready": nodeReadyAt(node)}
	at := wait.StartTime()
	for _, s := range steps {
		if d := s.StartTime().Sub(at); d < -time.Microsecond || d > time.Microsecond { // Jaeger's µs, rounded
			t.Errorf("Pod %s: %s starts at %s, the step before ended at %s", pod.Name, s.OperationName, s.StartTime().Format(time.StampMicro), at.Format(time.StampMicro))
		}
		if w, ok := want[s.OperationName]; ok && !inSecond(s.EndTime(), w) {
			t.Errorf("Pod %s: %s ends at %s, the API states %s", pod.Name, s.OperationName, s.EndTime().Format(time.StampMicro), w.Format(time.RFC3339))
		}
		at = s.EndTime()
	}
	if d := at.Sub(wait.EndTime()); len(steps) < 4 || d < -time.Microsecond || d > time.Microsecond {
		t.Errorf("Pod %s: %d steps ending at %s, the wait at %s", pod.Name, len(steps), at.Format(time.StampMicro), wait.EndTime().Format(time.StampMicro))
	}
}

// checkNodeTrace holds a Node's startup trace against its NodeClaim's conditions and the Node's
// creation and Ready.
func (e *Env) checkNodeTrace(t *testing.T, name string, c *nodeClaim) {
	t.Helper()
	node, err := e.Kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr := e.WaitTrace(t, c.Metadata.UID, 2*time.Minute, func(tr *Trace) bool { return tr.Find("node.startup") != nil })
	root := tr.Find("node.startup")
	for key, want := range map[string]string{"k8s.node.name": name, "readyspan.autoscaler": "karpenter",
		"readyspan.karpenter.nodeclaim": c.Metadata.Name, "readyspan.node.outcome": "ready"} {
		if got := root.StrTag(key); got != want {
			t.Errorf("node %s: %s=%q, want %q", name, key, got, want)
		}
	}
	if !inSecond(root.StartTime(), c.Metadata.CreationTimestamp) {
		t.Errorf("node %s: starts at %s, its NodeClaim was created at %s", name, root.StartTime().Format(time.StampMicro), c.Metadata.CreationTimestamp.Format(time.RFC3339))
	}
	want := map[string]time.Time{"node.launch": c.condition("Launched"), "node.instance": node.CreationTimestamp.Time,
		"node.registration": c.condition("Registered"), "node.kubelet_ready": nodeReadyAt(node), "node.initialization": c.condition("Initialized")}
	for _, s := range tr.Children(root) {
		if w, ok := want[s.OperationName]; ok && !inSecond(s.EndTime(), w) {
			t.Errorf("node %s: %s ends at %s, the API states %s", name, s.OperationName, s.EndTime().Format(time.StampMicro), w.Format(time.RFC3339))
		}
		delete(want, s.OperationName)
	}
	if _, ok := want["node.instance"]; ok {
		t.Errorf("node %s: no node.instance step (%s)", name, tr.Summary())
	}
}

// promValue is one sample of a Prometheus query, 0 when it has none.
func (e *Env) promValue(t *testing.T, q string) float64 {
	t.Helper()
	v, _, err := e.Prom.Value(context.Background(), q)
	if err != nil {
		t.Fatalf("query %s: %v", q, err)
	}
	return v
}

// checkExplainNode runs `readyspan explain node/NAME -o json`: the Node's startup rebuilt from the
// API alone, keyed by its NodeClaim's UID, each step ending at the stamp the API states.
func (e *Env) checkExplainNode(t *testing.T, name string, c *nodeClaim) {
	t.Helper()
	cmd := exec.Command(filepath.Join(e.Root, "bin", "readyspan"), "explain", "node/"+name, "-o", "json", "--kubeconfig", e.Kubeconfig)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("readyspan explain node/%s: %v", name, err)
	}
	ends := map[string]time.Time{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var sp struct {
			TraceID string    `json:"trace_id"`
			Name    string    `json:"name"`
			End     time.Time `json:"end"`
		}
		if err := json.Unmarshal([]byte(line), &sp); err != nil {
			t.Fatalf("explain node/%s: %v: %s", name, err, line)
		}
		if sp.TraceID != TraceID(c.Metadata.UID) {
			t.Errorf("explain node/%s: trace %s, want its NodeClaim's UID", name, sp.TraceID)
		}
		ends[sp.Name] = sp.End
	}
	node, err := e.Kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// From the API alone each boundary is its whole-second stamp; a step whose stamp is the
	// second of the one before is not drawn.
	want := map[string]time.Time{"node.launch": c.condition("Launched"), "node.instance": node.CreationTimestamp.Time,
		"node.registration": c.condition("Registered"), "node.kubelet_ready": nodeReadyAt(node), "node.initialization": c.condition("Initialized")}
	last := c.Metadata.CreationTimestamp
	for step, w := range want {
		if got, ok := ends[step]; ok && !got.Equal(w) {
			t.Errorf("explain node/%s: %s ends at %s, the API states %s", name, step, got.Format(time.RFC3339Nano), w.Format(time.RFC3339))
		}
		if w.After(last) {
			last = w
		}
	}
	if got := ends["node.startup"]; !got.Equal(last) || len(ends) < 3 {
		t.Errorf("explain node/%s: ends at %s with %d spans, the API's last stamp is %s", name, got.Format(time.RFC3339Nano), len(ends), last.Format(time.RFC3339))
	}
}
