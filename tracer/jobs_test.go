package tracer

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/watch"
)

// job is created by kubectl create at ms, with the given parallelism.
func (s *sim) job(name string, parallelism int32, ms int) *batchv1.Job {
	t := s.at(ms)
	j := &batchv1.Job{
		TypeMeta: metav1.TypeMeta{Kind: "Job", APIVersion: "batch/v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: s.ns, UID: s.uid("job"), ResourceVersion: s.nextRV(), Generation: 1,
			CreationTimestamp: secs(t),
			ManagedFields:     []metav1.ManagedFieldsEntry{{Manager: "kubectl-create", Operation: "Update", APIVersion: "batch/v1", Time: ptr.To(secs(t))}},
		},
		Spec: batchv1.JobSpec{Parallelism: ptr.To(parallelism), Completions: ptr.To(parallelism)},
	}
	s.emit(ResourceJobs, watch.Added, j, t)
	return j
}

// jobPod is created by the job controller at ms, followed by its SuccessfulCreate event about
// the Job.
func (s *sim) jobPod(name string, j *batchv1.Job, ms int) *corev1.Pod {
	p := s.pod(name, nil, nil, []container{{name: "web", image: busybox}}, ms)
	p.GenerateName = j.Name + "-"
	p.Labels = map[string]string{"batch.kubernetes.io/job-name": j.Name}
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: j.Name, UID: j.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	p.ManagedFields[0].Manager = "kube-controller-manager"
	s.deltas[len(s.deltas)-1].Object = p.DeepCopy() // the Pod as created, owned by the Job
	s.coreEvent(&corev1.ObjectReference{Kind: "Job", Namespace: s.ns, Name: j.Name, UID: j.UID, APIVersion: "batch/v1", ResourceVersion: j.ResourceVersion},
		"job-controller", "", corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: "+name, ms+1)
	return p
}

// replayJobs feeds the stream as runScenario does and returns the traces by Pod name.
func replayJobs(t *testing.T, s *sim, end int) map[string]*phases.Trace {
	t.Helper()
	sort.SliceStable(s.deltas, func(i, j int) bool { return s.deltas[i].Recv.Before(s.deltas[j].Recv) })
	out := map[string]*phases.Trace{}
	c := New(Config{}, SinkFunc(func(tr *phases.Trace) { out[tr.Pod.Name] = tr }), nil, nil)
	for _, d := range s.deltas {
		c.Tick(d.Recv)
		c.Handle(d)
	}
	c.Tick(s.at(end).Add(time.Minute))
	return out
}

// TestJobPodRootedAtJob: the Pods a Job's creation starts are traced from that creation, the
// controllers phase being the job controller's; a Pod made later (here, to replace a failed
// one) is the controller's own doing and stays rooted at the controller.
func TestJobPodRootedAtJob(t *testing.T) {
	s := newSim(t, "default")
	s.auditWrite("jobs", "batch", "backup", "create", "kubectl/v1.37.2 (linux/amd64) kubernetes/$Format", 5, 9)
	j := s.job("backup", 1, 8)
	s.jobPod("backup-aaaaa", j, 40)
	happy(s, "backup-aaaaa", 70, false, false)
	s.jobPod("backup-bbbbb", j, 9000)
	end := happy(s, "backup-bbbbb", 9030, false, false)
	traces := replayJobs(t, s, end)

	first := traces["backup-aaaaa"]
	if first == nil {
		t.Fatalf("no trace of the Job's first Pod; traces %v", traces)
	}
	wantOutcome(t, first, phases.OutcomeReady)
	if got := first.Root().Attr(phases.AttrRoot); got != string(phases.RootOf("Job")) {
		t.Errorf("readyspan.root %v, want job", got)
	}
	if got := first.Root().Attr(phases.AttrClient); got != "kubectl" {
		t.Errorf("client %v, want kubectl (the audit log's user agent)", got)
	}
	// The apiserver phase is the audit log's create of the Job; the controllers phase runs from
	// its answer to the Pod's creation, stamped by the job controller's SuccessfulCreate.
	api, ctl := first.Phase(phases.PhaseAPIServer), first.Phase(phases.PhaseControllers)
	wantAt(t, "apiserver start", api.Start, simAt(5), time.Microsecond)
	wantAt(t, "apiserver end", api.End, simAt(9), time.Microsecond)
	wantAt(t, "controllers start", ctl.Start, simAt(9), time.Microsecond)
	wantAt(t, "controllers end", ctl.End, simAt(41), time.Millisecond)
	if ctl.Attr(phases.AttrApplicable) != nil {
		t.Errorf("controllers phase marked %v", ctl.Attrs)
	}
	if !first.Summary.PhaseObserved[phaseIndexOf(t, phases.PhaseControllers)] {
		t.Error("controllers phase not observed")
	}

	later := traces["backup-bbbbb"]
	if later == nil {
		t.Fatal("no trace of the Job's second Pod")
	}
	if got := later.Root().Attr(phases.AttrRoot); got != string(phases.RootController) {
		t.Errorf("the replacement Pod: readyspan.root %v, want controller", got)
	}
}

func phaseIndexOf(t *testing.T, name string) int {
	for i, n := range phases.Phases {
		if n == name {
			return i
		}
	}
	t.Fatalf("no phase %s", name)
	return -1
}

// TestJobsWatchedRecordedReplayed: the Watcher lists and watches Jobs, the Recorder writes them
// to their own stream, and a recording replays them as Jobs.
func TestJobsWatchedRecordedReplayed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "backup", UID: "uid-job", ResourceVersion: "7"}}
	w := watch.NewWatcher(fake.NewClientset(j), Kinds, watch.Config{}, nil, nil)
	w.Start(ctx)
	if err := w.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	var got watch.Delta
	for got.Resource != ResourceJobs {
		select {
		case got = <-w.Deltas():
		case <-ctx.Done():
			t.Fatal("no Job from the watch")
		}
	}
	if o, ok := got.Object.(*batchv1.Job); !ok || o.UID != "uid-job" || !got.Initial {
		t.Fatalf("delta %+v, want the Job from the initial list", got)
	}

	dir := t.TempDir()
	rec := watch.NewRecorder(Kinds, dir)
	got.Recv = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	rec.Write(got)
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "watch.jobs.jsonl")); err != nil {
		t.Fatalf("no Jobs stream: %v", err)
	}
	deltas, err := Kinds.LoadRecording(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(deltas) != 1 || deltas[0].Resource != ResourceJobs {
		t.Fatalf("replayed %+v, want the Job", deltas)
	}
	if o, ok := deltas[0].Object.(*batchv1.Job); !ok || o.UID != "uid-job" {
		t.Errorf("replayed a %T", deltas[0].Object)
	}
}

// TestJobFirstSeenDone: a Job first seen with finished Pods roots none of the Pods to come (they
// are replacements or later completions), and one created suspended neither.
func TestJobFirstSeenDone(t *testing.T) {
	for _, tc := range []struct {
		name string
		job  func(*batchv1.Job)
	}{
		{"pods already done", func(j *batchv1.Job) { j.Status.Failed = 1 }},
		{"created suspended", func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t, "default")
			j := s.job("backup", 1, 8)
			tc.job(j)
			s.jobPod("backup-aaaaa", j, 40)
			end := happy(s, "backup-aaaaa", 70, false, false)
			tr := replayJobs(t, s, end)["backup-aaaaa"]
			if tr == nil {
				t.Fatal("no trace")
			}
			if got := tr.Root().Attr(phases.AttrRoot); got != string(phases.RootController) {
				t.Errorf("readyspan.root %v, want controller", got)
			}
		})
	}
}

// TestJobTransform: what is kept of a Job is what jobs.go reads; its Pod template is dropped.
func TestJobTransform(t *testing.T) {
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "backup", Annotations: map[string]string{"a": "b"}},
		Spec: batchv1.JobSpec{Parallelism: ptr.To(int32(3)), Completions: ptr.To(int32(5)), Suspend: ptr.To(false),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Env: []corev1.EnvVar{{Name: "SECRET", Value: "x"}}}}}}},
		Status: batchv1.JobStatus{Failed: 1},
	}
	out, _ := Kinds.Transform(j)
	got := out.(*batchv1.Job)
	if len(got.Annotations) != 0 || len(got.Spec.Template.Spec.Containers) != 0 {
		t.Errorf("kept annotations %v and template %+v", got.Annotations, got.Spec.Template)
	}
	if *got.Spec.Parallelism != 3 || *got.Spec.Completions != 5 || got.Spec.Suspend == nil || got.Status.Failed != 1 {
		t.Errorf("lost what the view reads: %+v %+v", got.Spec, got.Status)
	}
}

// TestJobRecordingReplays: a Job's startup, recorded as the live watch records it and replayed
// from the directory, gives the Pod's trace rooted at the Job.
func TestJobRecordingReplays(t *testing.T) {
	s := newSim(t, "default")
	j := s.job("backup", 1, 8)
	s.jobPod("backup-aaaaa", j, 40)
	happy(s, "backup-aaaaa", 70, false, false)
	dir := t.TempDir()
	rec := watch.NewRecorder(Kinds, dir)
	for _, d := range s.deltas {
		rec.Write(d)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	deltas, err := Kinds.LoadRecording(dir)
	if err != nil {
		t.Fatal(err)
	}
	var traces []*phases.Trace
	c := New(Config{}, SinkFunc(func(tr *phases.Trace) { traces = append(traces, tr) }), nil, nil)
	if w := Replay(c, deltas); len(w) != 0 {
		t.Errorf("warnings %v", w)
	}
	if len(traces) != 1 {
		t.Fatalf("%d traces, want 1", len(traces))
	}
	tr := traces[0]
	wantOutcome(t, tr, phases.OutcomeReady)
	if got := tr.Root().Attr(phases.AttrRoot); got != string(phases.RootOf("Job")) {
		t.Errorf("readyspan.root %v, want job", got)
	}
	if got := tr.Root().Attr(phases.AttrClient); got != "kubectl-create" {
		t.Errorf("client %v, want the Job's creator, kubectl-create", got)
	}
	if ctl := tr.Phase(phases.PhaseControllers); ctl.Attr(phases.AttrApplicable) != nil {
		t.Errorf("controllers phase marked %v", ctl.Attrs)
	}
}
