package tracer

import (
	"context"
	"encoding/json"
	"regexp"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout/tracker"
	"github.com/readyspan/readyspan/watch"
)

// TestWatcherDrivesCorrelator runs the real informers against the fake clientset: a Pod is
// created, scheduled and made Ready through the API, and one trace comes out with watch times.
func TestWatcherDrivesCorrelator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := fake.NewClientset()
	w := watch.NewWatcher(client, Kinds, watch.Config{}, nil, nil)
	var mu sync.Mutex
	var traces []*phases.Trace
	c := New(Config{}, SinkFunc(func(tr *phases.Trace) { mu.Lock(); traces = append(traces, tr); mu.Unlock() }), nil, nil)
	w.Start(ctx)
	if err := w.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	if p := w.Problem(); p != "" {
		t.Fatalf("problem after sync: %s", p)
	}
	loopCtx, stopLoop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		Loop(loopCtx, w.Deltas(), c, 50*time.Millisecond, func(d watch.Delta) { t.Logf("delta %s %s %T", d.Resource, d.Type, d.Object) })
		close(done)
	}()

	s := newSim(t, "default")
	s.pod("live", nil, nil, []container{{name: "web", image: busybox}}, 0)
	pods := client.CoreV1().Pods("default")
	p := s.pods["live"].DeepCopy()
	p.ResourceVersion = ""
	p.Spec.InitContainers = nil
	p.CreationTimestamp = metav1.Now() // the fake apiserver does not stamp it
	created, err := pods.Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	step := func(change func(*corev1.Pod)) {
		t.Helper()
		time.Sleep(20 * time.Millisecond)
		cur, err := pods.Get(ctx, created.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		change(cur)
		if _, err := pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	now := metav1.Now()
	step(func(p *corev1.Pod) {
		p.Spec.NodeName = "nodetest"
		setCond(p, corev1.PodScheduled, corev1.ConditionTrue, now, "", "")
	})
	step(func(p *corev1.Pod) {
		p.Status.StartTime = &now
		setCond(p, corev1.PodReadyToStartContainers, corev1.ConditionTrue, now, "", "")
	})
	step(func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodRunning
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}
		setCond(p, corev1.ContainersReady, corev1.ConditionTrue, now, "", "")
		setCond(p, corev1.PodReady, corev1.ConditionTrue, now, "", "")
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(traces)
		mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopLoop()
	<-done
	if len(traces) != 1 {
		t.Fatalf("%d traces, want 1", len(traces))
	}
	tr := traces[0]
	if tr.Summary.Outcome != phases.OutcomeReady {
		t.Fatalf("outcome %s", tr.Summary.Outcome)
	}
	if src := tr.Phase("scheduling").Attr(phases.AttrSourceEnd); src != "watch" {
		t.Errorf("bind seen by the watch should be the scheduling end, got %v", src)
	}
	if d := tr.Phase("kubelet").Duration(); d <= 0 {
		t.Errorf("kubelet phase %v, want a real interval between watch events", d)
	}
}

// leak marks every value that must not get past the informers' transform; each field carries
// its own marker, so a failure names the field.
const leak = "LEAK-"

// TestWatcherDropsSecrets drives objects carrying secret material through the real watch path
// (informers on a fake clientset, their transform, the watch.Watcher's handlers) and checks that none
// of it is in the Deltas the correlator and the recorder receive, while what the correlator
// reads is kept.
func TestWatcherDropsSecrets(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const ns = "default"
	lastApplied := map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"spec":{"env":"` + leak + `last-applied"}}`}
	managed := []metav1.ManagedFieldsEntry{{
		Manager: "kubectl-client-side-apply", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
		Time: ptr.To(metav1.Now()), FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:annotations":{"f:` + leak + `managed-fields":{}}}}`),
	}}
	secretEnv := func(name string) corev1.Container {
		return corev1.Container{
			Name: name, Image: "registry.example/app:1",
			Command: []string{"/bin/app", leak + name + "-command"},
			Args:    []string{"--token=" + leak + name + "-args"},
			Env: []corev1.EnvVar{
				{Name: "PASSWORD", Value: leak + name + "-env-value"},
				{Name: "FROM_SECRET", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: leak + name + "-env-secret-ref"}, Key: "k"}}},
			},
			EnvFrom:        []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: leak + name + "-env-from"}}}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"check", leak + name + "-probe"}}}},
			Lifecycle:      &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"hook", leak + name + "-post-start"}}}},
		}
	}
	podSpec := corev1.PodSpec{
		InitContainers:      []corev1.Container{secretEnv("init")},
		Containers:          []corev1.Container{secretEnv("web")},
		EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "busybox", Env: []corev1.EnvVar{{Name: "X", Value: leak + "ephemeral-env"}}}}},
		ImagePullSecrets:    []corev1.LocalObjectReference{{Name: leak + "image-pull-secret"}},
		Volumes: []corev1.Volume{
			{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: leak + "secret-volume", Items: []corev1.KeyToPath{{Key: "k", Path: leak + "secret-volume-path"}}}}},
			{Name: "projected", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: leak + "projected-secret"}}}}}}},
			{Name: "csi", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "secrets-store.csi.k8s.io", NodePublishSecretRef: &corev1.LocalObjectReference{Name: leak + "csi-secret"}, VolumeAttributes: map[string]string{"key": leak + "csi-attribute"}}}},
		},
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: ns, UID: "uid-web-1", Labels: map[string]string{"app": "web"}, Annotations: lastApplied, ManagedFields: managed},
		Spec:       podSpec,
	}
	template := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"template": leak + "template-annotation"}}, Spec: podSpec}
	objs := []runtime.Object{
		pod,
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, UID: "uid-web", Annotations: lastApplied, ManagedFields: managed}, Spec: appsv1.DeploymentSpec{Template: template}},
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-1234", Namespace: ns, UID: "uid-web-1234", Annotations: lastApplied, ManagedFields: managed}, Spec: appsv1.ReplicaSetSpec{Template: template}},
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns, UID: "uid-db", Annotations: lastApplied, ManagedFields: managed}, Spec: appsv1.StatefulSetSpec{Template: template}},
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: ns, UID: "uid-agent", Annotations: lastApplied, ManagedFields: managed}, Spec: appsv1.DaemonSetSpec{Template: template}},
		&appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "agent-5d4f", Namespace: ns, UID: "uid-agent-rev", Annotations: lastApplied, ManagedFields: managed},
			Data: runtime.RawExtension{Raw: []byte(`{"spec":{"template":{"metadata":{"annotations":{"template":"` + leak + `template-annotation"}}}}}`)}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, UID: "uid-svc", Annotations: lastApplied, ManagedFields: managed}, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}}},
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "web-1.18c4465277242435", Namespace: ns, UID: "uid-event", Annotations: lastApplied}, InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web-1", Namespace: ns, UID: "uid-web-1"}, Reason: "Pulling"},
		&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "web-abcde", Namespace: ns, UID: "uid-slice", Annotations: lastApplied, ManagedFields: managed}, AddressType: discoveryv1.AddressTypeIPv4},
	}
	client := fake.NewClientset(objs...)

	// The API serves every marker: otherwise the test below would pass without checking anything.
	served := map[string]bool{}
	for _, o := range listAll(ctx, t, client, ns) {
		for _, m := range markers(t, o) {
			served[m] = true
		}
	}
	for _, m := range []string{"last-applied", "managed-fields", "init-command", "web-args", "web-env-value", "web-env-secret-ref",
		"web-env-from", "web-probe", "web-post-start", "ephemeral-env", "image-pull-secret", "secret-volume", "secret-volume-path",
		"projected-secret", "csi-secret", "csi-attribute", "template-annotation"} {
		if !served[leak+m] {
			t.Fatalf("the fake API does not serve %s%s; the test would prove nothing", leak, m)
		}
	}

	w := watch.NewWatcher(client, Kinds, watch.Config{}, nil, nil)
	w.Start(ctx)
	if err := w.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	got := map[watch.Resource]runtime.Object{}
	for len(got) < len(objs) {
		select {
		case d := <-w.Deltas():
			got[d.Resource] = d.Object
		case <-ctx.Done():
			t.Fatalf("only %d of %d objects came through the watch: %v", len(got), len(objs), got)
		}
	}
	for r, o := range got {
		if m := markers(t, o); len(m) > 0 {
			t.Errorf("%s: secret material got past the transform: %v", r, m)
		}
		// Only what rollouts read of a workload's annotations and template is kept.
		for k := range o.(metav1.Object).GetAnnotations() {
			if !tracker.KeepsAnnotation(k) {
				t.Errorf("%s: annotation %s kept", r, k)
			}
		}
	}

	// What the correlator reads is still there.
	p := got[ResourcePods].(*corev1.Pod)
	if len(p.ManagedFields) != 1 || p.ManagedFields[0].Manager != "kubectl-client-side-apply" || p.ManagedFields[0].Time == nil {
		t.Errorf("managedFields manager and time dropped: %+v", p.ManagedFields)
	}
	if len(p.Spec.Containers) != 1 || p.Spec.Containers[0].Name != "web" || p.Spec.Containers[0].Image != "registry.example/app:1" ||
		p.Spec.Containers[0].ReadinessProbe == nil || p.Spec.Containers[0].Lifecycle == nil || p.Spec.Containers[0].Lifecycle.PostStart == nil {
		t.Errorf("container name, image, probe or hook presence dropped: %+v", p.Spec.Containers)
	}
	if len(p.Spec.InitContainers) != 1 || p.Spec.InitContainers[0].Name != "init" {
		t.Errorf("init container dropped: %+v", p.Spec.InitContainers)
	}
	if len(p.Spec.Volumes) != 3 || p.Spec.Volumes[0].Secret == nil || p.Spec.Volumes[1].Projected == nil || !stateful(p) {
		t.Errorf("volume kinds dropped (the SLI needs them): %+v", p.Spec.Volumes)
	}
	if p.Labels["app"] != "web" {
		t.Errorf("labels dropped (Services select on them): %v", p.Labels)
	}
}

// listAll reads every object of the watched kinds as the API serves them.
func listAll(ctx context.Context, t *testing.T, c *fake.Clientset, ns string) []runtime.Object {
	t.Helper()
	var out []runtime.Object
	add := func(l runtime.Object, err error) {
		if err != nil {
			t.Fatal(err)
		}
		items, err := meta.ExtractList(l)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, items...)
	}
	opts := metav1.ListOptions{}
	add(c.CoreV1().Pods(ns).List(ctx, opts))
	add(c.AppsV1().Deployments(ns).List(ctx, opts))
	add(c.AppsV1().ReplicaSets(ns).List(ctx, opts))
	add(c.CoreV1().Services(ns).List(ctx, opts))
	add(c.CoreV1().Events(ns).List(ctx, opts))
	add(c.DiscoveryV1().EndpointSlices(ns).List(ctx, opts))
	return out
}

var markerRE = regexp.MustCompile(leak + `[a-z-]+`)

// markers returns the leak markers anywhere in the object's JSON.
func markers(t *testing.T, o runtime.Object) []string {
	t.Helper()
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	return markerRE.FindAllString(string(b), -1)
}
