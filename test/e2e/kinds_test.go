//go:build e2e

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The workload controllers' own steps (controllers.statefulset, .daemonset, .job, .cronjob),
// judged on the real control plane against what each controller states itself: the nanoseconds
// in its SuccessfulCreate Event's name (stamped right after the create returned), the Pods'
// Ready lastTransitionTime, the Job's cronjob-scheduled-timestamp annotation.

// spanTimeTolerance: Jaeger keeps a span's start and duration in whole microseconds, each
// truncated, so its end may be up to 2 µs before the nanosecond it stands for.
const spanTimeTolerance = 2 * time.Microsecond

// createdAt is the nanosecond in the name of the SuccessfulCreate Event with message msg (its
// first occurrence), waiting for it.
func (e *Env) createdAt(t *testing.T, ns, msg string) time.Time {
	t.Helper()
	var at time.Time
	Eventually(t, time.Minute, "SuccessfulCreate "+msg, func() (bool, error) {
		list, err := e.Kube.CoreV1().Events(ns).List(Ctx(t), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, ev := range list.Items {
			if ev.Reason == "SuccessfulCreate" && ev.Message == msg {
				at = nameTime(t, ev.Name)
				return true, nil
			}
		}
		return false, nil
	})
	return at
}

// podTraces waits for the finished traces of the namespace's Pods matching selector, by name.
func (e *Env) podTraces(t *testing.T, ns, selector string, n int) map[string]*Trace {
	t.Helper()
	var pods []corev1.Pod
	Eventually(t, 3*time.Minute, strconv.Itoa(n)+" Pods "+selector, func() (bool, error) {
		list, err := e.Kube.CoreV1().Pods(ns).List(Ctx(t), metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		pods = list.Items
		return len(pods) >= n, nil
	})
	var uids []string
	for _, p := range pods {
		uids = append(uids, string(p.UID))
	}
	got := e.WaitTraces(t, uids, 3*time.Minute, func(tr *Trace) bool {
		r := tr.Root()
		return r != nil && r.StrTag("readyspan.outcome") != ""
	})
	out := map[string]*Trace{}
	for _, p := range pods {
		out[p.Name] = got[string(p.UID)]
	}
	return out
}

func nearTo(a, b time.Time, tol time.Duration) bool {
	d := a.Sub(b)
	return d <= tol && d >= -tol
}

// step returns a Pod trace's controllers step of the kind and checks its end against the
// controller's SuccessfulCreate of the Pod.
func (e *Env) step(t *testing.T, ns string, tr *Trace, name, createdMsg string) *Span {
	t.Helper()
	pod := tr.Root().StrTag("k8s.pod.name")
	s := tr.Find(name)
	if s == nil {
		t.Fatalf("%s: no %s span (%s)", pod, name, tr.Summary())
	}
	if want := e.createdAt(t, ns, createdMsg); !nearTo(s.EndTime(), want, spanTimeTolerance) {
		t.Errorf("%s: %s ends at %v, want the controller's %q at %v", pod, name, s.EndTime(), createdMsg, want)
	}
	return s
}

// maxWatchDelivery bounds how long after the apiserver wrote a change readyspan's watch receives
// it on the local cluster, even with the machine busy.
const maxWatchDelivery = 250 * time.Millisecond

// checkStatefulSetSteps: each Pod of an OrderedReady StatefulSet after the first is created
// once the one before is Ready; its controllers.statefulset starts in the second that Pod's
// Ready lastTransitionTime names (or its watch delivery just after) and ends at "Create Pod NAME
// in StatefulSet SET successful".
func (e *Env) checkStatefulSetSteps(t *testing.T, ns, set string, replicas int) {
	t.Helper()
	traces := e.podTraces(t, ns, "app="+set, replicas)
	for i := 0; i < replicas; i++ {
		name := set + "-" + strconv.Itoa(i)
		tr := traces[name]
		if tr == nil {
			t.Fatalf("no trace of %s", name)
		}
		root := tr.Root()
		if r, s := root.StrTag("readyspan.root"), root.StrTag("k8s.statefulset.name"); r != "statefulset" || s != set {
			t.Errorf("%s: root %q, statefulset %q, want statefulset and %s", name, r, s, set)
		}
		s := e.step(t, ns, tr, "controllers.statefulset", "Create Pod "+name+" in StatefulSet "+set+" successful")
		if i == 0 {
			if c := s.StrTag("readyspan.controller.cause"); c != "change" {
				t.Errorf("%s: cause %q, want change", name, c)
			}
			continue
		}
		prev := set + "-" + strconv.Itoa(i-1)
		if c, p := s.StrTag("readyspan.controller.cause"), s.StrTag("readyspan.controller.cause.pod"); c != "predecessor_ready" || p != prev {
			t.Errorf("%s: cause %q (%q), want predecessor_ready (%s)", name, c, p, prev)
		}
		p, err := e.Kube.CoreV1().Pods(ns).Get(Ctx(t), prev, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				// The step starts when readyspan's watch received the Ready: within the whole
				// second the kubelet stamped, or just after it by the watch's delivery.
				ready := c.LastTransitionTime.Time
				if s.StartTime().Before(ready) || !s.StartTime().Before(ready.Add(time.Second+maxWatchDelivery)) {
					t.Errorf("%s: controllers.statefulset starts at %v, not in the second %s turned Ready (%v) nor %v after it", name, s.StartTime(), prev, ready, maxWatchDelivery)
				}
			}
		}
	}
}

// jobTemplate is a Pod template of a Job: one busybox container running script, never
// restarted in place.
func jobTemplate(name, script string, volumes []corev1.Volume, mounts []corev1.VolumeMount) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: LocalPodLabels(map[string]string{"app": name})},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: int64p(1),
			Volumes:                       volumes,
			Containers: []corev1.Container{{
				Name: name, Image: BusyboxImage, ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{"sh", "-c", script}, VolumeMounts: mounts,
			}},
		},
	}
}

// TestJobPods: a Job of two completions, one at a time, whose first Pod fails (exit 1; a marker
// on the node makes every later Pod succeed). The job controller replaces the failed Pod after
// its back-off, then creates the second completion. Every Pod carries k8s.job.name; the
// replacement links to the failed Pod's trace and names why it went; each controllers.job ends
// at the controller's "Created pod: NAME". explain job/pi shows the three Pods.
func TestJobPods(t *testing.T) {
	e := Setup(t)
	ns := e.Namespace(t, "e2e-job")
	marker := t.TempDir()
	if err := os.Chmod(marker, 0o777); err != nil {
		t.Fatal(err)
	}
	dirType := corev1.HostPathDirectory
	tmpl := jobTemplate("pi", "if [ -e /m/failed ]; then sleep 1; exit 0; fi; touch /m/failed; exit 1",
		[]corev1.Volume{{Name: "m", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: marker, Type: &dirType}}}},
		[]corev1.VolumeMount{{Name: "m", MountPath: "/m"}})
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "pi"},
		Spec:       batchv1.JobSpec{Completions: int32p(2), Parallelism: int32p(1), BackoffLimit: int32p(3), Template: tmpl},
	}
	if _, err := e.Kube.BatchV1().Jobs(ns).Create(Ctx(t), job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	Eventually(t, 3*time.Minute, "the Job to complete", func() (bool, error) {
		j, err := e.Kube.BatchV1().Jobs(ns).Get(Ctx(t), "pi", metav1.GetOptions{})
		return err == nil && j.Status.Succeeded == 2, err
	})
	list, err := e.Kube.CoreV1().Pods(ns).List(Ctx(t), metav1.ListOptions{LabelSelector: "app=pi"})
	if err != nil {
		t.Fatal(err)
	}
	pods := list.Items
	if len(pods) != 3 {
		t.Fatalf("%d Pods, want the failed one, its replacement and the second completion", len(pods))
	}
	sort.Slice(pods, func(i, j int) bool {
		return e.createdAt(t, ns, "Created pod: "+pods[i].Name).Before(e.createdAt(t, ns, "Created pod: "+pods[j].Name))
	})
	if pods[0].Status.Phase != corev1.PodFailed {
		t.Fatalf("the first Pod is %s, want Failed", pods[0].Status.Phase)
	}
	traces := e.podTraces(t, ns, "app=pi", 3)
	want := []struct{ cause, pod string }{{"change", ""}, {"replacement", pods[0].Name}, {"next_completion", pods[1].Name}}
	for i, p := range pods {
		tr := traces[p.Name]
		root := tr.Root()
		if r, j := root.StrTag("readyspan.root"), root.StrTag("k8s.job.name"); r != "job" || j != "pi" {
			t.Errorf("%s: root %q, job %q, want job and pi", p.Name, r, j)
		}
		s := e.step(t, ns, tr, "controllers.job", "Created pod: "+p.Name)
		if c, o := s.StrTag("readyspan.controller.cause"), s.StrTag("readyspan.controller.cause.pod"); c != want[i].cause || o != want[i].pod {
			t.Errorf("%s: cause %q (%q), want %s (%q)", p.Name, c, o, want[i].cause, want[i].pod)
		}
		if i > 0 {
			// The job controller acts once the Pod before has finished.
			prev := pods[i-1].Status.ContainerStatuses[0].State.Terminated
			if prev == nil || s.StartTime().Before(prev.FinishedAt.Time) || s.StartTime().After(s.EndTime()) {
				t.Errorf("%s: controllers.job %v → %v, want it to start after %s finished (%v)", p.Name, s.StartTime(), s.EndTime(), pods[i-1].Name, prev)
			}
		}
	}
	repl := traces[pods[1].Name].Root()
	if l := links(repl); !slices.Contains(l, TraceID(string(pods[0].UID))) {
		t.Errorf("the replacement links to %v, not to the failed Pod's trace %s", l, TraceID(string(pods[0].UID)))
	}
	if w := repl.StrTag("readyspan.replaces.why"); w != "failed: Error (exit code 1)" {
		t.Errorf("the replacement says its Pod went %q, want failed: Error (exit code 1)", w)
	}

	// explain job/pi: the Job's Pods, rebuilt from the API alone.
	cmd := exec.Command(filepath.Join(e.Root, "bin", "readyspan"), "explain", "job/pi", "-n", ns, "-o", "json", "--kubeconfig", e.Kubeconfig)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("readyspan explain job/pi: %v", err)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var sp struct {
			Name  string         `json:"name"`
			Attrs map[string]any `json:"attributes"`
		}
		if err := json.Unmarshal([]byte(line), &sp); err != nil {
			t.Fatalf("explain job/pi: %v: %s", err, line)
		}
		if sp.Name == "pod.startup" {
			seen[sp.Attrs["k8s.pod.name"].(string)] = true
		}
	}
	for _, p := range pods {
		if !seen[p.Name] {
			t.Errorf("explain job/pi does not show %s (it shows %v)", p.Name, seen)
		}
	}
}

// TestCronJobPod: a CronJob "* * * * *" runs once. Its Pod's trace starts at the schedule time
// the cronjob controller wrote on the Job (batch.kubernetes.io/cronjob-scheduled-timestamp);
// controllers.cronjob runs from it to the controller's "Created job NAME", controllers.job from
// there to "Created pod: NAME".
func TestCronJobPod(t *testing.T) {
	e := Setup(t)
	ns := e.Namespace(t, "e2e-cron")
	cj := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "tick"},
		Spec: batchv1.CronJobSpec{Schedule: "* * * * *", JobTemplate: batchv1.JobTemplateSpec{
			Spec: batchv1.JobSpec{Template: jobTemplate("tick", "echo tick", nil, nil)},
		}},
	}
	if _, err := e.Kube.BatchV1().CronJobs(ns).Create(Ctx(t), cj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var job batchv1.Job
	Eventually(t, 150*time.Second, "the CronJob's first Job", func() (bool, error) {
		list, err := e.Kube.BatchV1().Jobs(ns).List(Ctx(t), metav1.ListOptions{})
		if err != nil || len(list.Items) == 0 {
			return false, err
		}
		job = list.Items[0]
		return true, nil
	})
	scheduled, err := time.Parse(time.RFC3339, job.Annotations[batchv1.CronJobScheduledTimestampAnnotation])
	if err != nil {
		t.Fatalf("Job %s: schedule annotation: %v", job.Name, err)
	}
	traces := e.podTraces(t, ns, "app=tick", 1)
	var tr *Trace
	var pod string
	for name, x := range traces {
		tr, pod = x, name
	}
	root := tr.Root()
	if r, c, j := root.StrTag("readyspan.root"), root.StrTag("k8s.cronjob.name"), root.StrTag("k8s.job.name"); r != "cronjob" || c != "tick" || j != job.Name {
		t.Errorf("root %q, cronjob %q, job %q, want cronjob, tick, %s", r, c, j, job.Name)
	}
	if !nearTo(root.StartTime(), scheduled, spanTimeTolerance) {
		t.Errorf("the trace starts at %v, want the schedule time %v", root.StartTime(), scheduled)
	}
	cron := tr.Find("controllers.cronjob")
	if cron == nil {
		t.Fatalf("no controllers.cronjob span (%s)", tr.Summary())
	}
	jobCreated := e.createdAt(t, ns, "Created job "+job.Name)
	if !nearTo(cron.StartTime(), scheduled, spanTimeTolerance) || !nearTo(cron.EndTime(), jobCreated, spanTimeTolerance) {
		t.Errorf("controllers.cronjob %v → %v, want the schedule time %v → the controller's Created job at %v", cron.StartTime(), cron.EndTime(), scheduled, jobCreated)
	}
	s := e.step(t, ns, tr, "controllers.job", "Created pod: "+pod)
	if !nearTo(s.StartTime(), jobCreated, spanTimeTolerance) {
		t.Errorf("controllers.job starts at %v, want the Job's creation %v", s.StartTime(), jobCreated)
	}
	t.Logf("the CronJob's delay: %v from the schedule time to its Job, %v more to the Pod", cron.Duration(), s.Duration())
}
