package pod_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/readyspan/readyspan/events"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/tracer/pod"
	"github.com/readyspan/readyspan/watch"
)

// failuresCapture is a real node's capture (v1.37.2 control plane and kubelet) of Pods that fail
// to start: an image that does not exist, a container that crashes, one never Ready.
var failuresCapture = filepath.Join("..", "testdata", "real-node", "run4-failures")

// TestObserveAlone feeds each Pod of a real capture and the Events about it into a State of its
// own, with no correlator, and holds what Observe yields against what the capture's other files
// say, read here without readyspan's parsers: the scheduler's Scheduled eventTime (the
// events.k8s.io view, which the State is not fed), the kubelet's BackOff Events and the waiting
// reason in the Pod's status.
func TestObserveAlone(t *testing.T) {
	deltas, err := tracer.Kinds.LoadRecording(failuresCapture)
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]*pod.State{}
	for i := range deltas {
		if p, ok := deltas[i].Object.(*corev1.Pod); ok {
			s := states[string(p.UID)]
			if s == nil {
				st := pod.New(&deltas[i], p)
				s = &st
				states[string(p.UID)] = s
			}
			s.Apply(&deltas[i], p)
		}
	}
	for i := range deltas {
		if e, ok := deltas[i].Object.(*corev1.Event); ok {
			if s := states[string(e.InvolvedObject.UID)]; s != nil {
				s.AddEvent(events.FromCore(e, deltas[i].Recv), deltas[i].Recv)
			}
		}
	}
	if len(states) < 3 {
		t.Fatalf("the capture holds %d Pods, want at least 3", len(states))
	}
	scheduled := scheduledEventTimes(t)
	backOffs := backOffEvents(t)
	for uid, s := range states {
		p := s.Pod()
		var unparsed []string
		obs := s.Observe(func(e *events.Event) { unparsed = append(unparsed, e.Reason) })
		if len(unparsed) > 0 {
			t.Errorf("%s: Events in an unknown format: %v", p.Name, unparsed)
		}
		if want, ok := scheduled[uid]; !ok {
			t.Errorf("%s: no Scheduled Event in the capture", p.Name)
		} else if got := stampOf(obs.Scheduled, phases.SourceEventTime); !got.Equal(want) {
			t.Errorf("%s: Scheduled from its Event at %v, the scheduler's eventTime is %v", p.Name, got, want)
		}
		for _, cs := range p.Status.ContainerStatuses {
			c := containerNamed(obs, cs.Name)
			if c == nil {
				t.Errorf("%s: container %s not observed", p.Name, cs.Name)
				continue
			}
			if w := cs.State.Waiting; w != nil && strings.Contains(w.Reason, "Pull") {
				if reason, _ := s.Failure(); reason != w.Reason {
					t.Errorf("%s: failure %q, the status shows %s waiting with %q", p.Name, reason, cs.Name, w.Reason)
				}
				if len(c.PullFailures) == 0 {
					t.Errorf("%s: container %s waits with %s, no pull failure observed", p.Name, cs.Name, w.Reason)
				}
			}
			if backOffs[uid+"/"+cs.Name] > 0 && !hasFailure(c.Failures, "CrashLoopBackOff") {
				t.Errorf("%s: the kubelet restarted %s with back-off, no CrashLoopBackOff observed: %+v", p.Name, cs.Name, c.Failures)
			}
		}
	}
	if len(backOffs) == 0 {
		t.Fatal("no BackOff Event in the capture: nothing held the crash loop")
	}
}

// scheduledEventTimes reads the scheduler's Scheduled Events of the capture's events.k8s.io
// view: the eventTime of each, by the Pod's UID.
func scheduledEventTimes(t *testing.T) map[string]time.Time {
	var list struct {
		Items []struct {
			Reason    string           `json:"reason"`
			EventTime metav1.MicroTime `json:"eventTime"`
			Regarding struct {
				UID string `json:"uid"`
			} `json:"regarding"`
		} `json:"items"`
	}
	readJSON(t, "events.events.k8s.io.v1.json", &list)
	out := map[string]time.Time{}
	for _, e := range list.Items {
		if e.Reason == "Scheduled" {
			out[e.Regarding.UID] = e.EventTime.Time
		}
	}
	return out
}

// backOffEvents counts the kubelet's "Back-off restarting failed container" Events of the core
// view, by Pod UID and container.
func backOffEvents(t *testing.T) map[string]int {
	var list struct {
		Items []struct {
			Reason         string `json:"reason"`
			Message        string `json:"message"`
			InvolvedObject struct {
				UID       string `json:"uid"`
				FieldPath string `json:"fieldPath"`
			} `json:"involvedObject"`
		} `json:"items"`
	}
	readJSON(t, "events.core.v1.json", &list)
	out := map[string]int{}
	for _, e := range list.Items {
		if e.Reason == "BackOff" && strings.HasPrefix(e.Message, "Back-off restarting failed container") {
			name := strings.TrimSuffix(strings.TrimPrefix(e.InvolvedObject.FieldPath, "spec.containers{"), "}")
			out[e.InvolvedObject.UID+"/"+name]++
		}
	}
	return out
}

func readJSON(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(failuresCapture, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func stampOf(ts phases.Times, src phases.Source) time.Time {
	for _, s := range ts {
		if s.Source == src {
			return s.At.Time()
		}
	}
	return time.Time{}
}

func containerNamed(obs *phases.Pod, name string) *phases.Container {
	for i := range obs.Containers {
		if obs.Containers[i].Name == name {
			return &obs.Containers[i]
		}
	}
	return nil
}

func hasFailure(os []phases.Occurrence, reason string) bool {
	for _, o := range os {
		if o.Reason == reason {
			return true
		}
	}
	return false
}

// badImagePod is a Pod as the apiserver returned it in the capture: its image does not exist.
const badImagePod = `{"metadata":{"name":"badimage-79777f469f-xq4tf","namespace":"run4-failures",
"uid":"c0a79f57-cd97-4d80-9c9e-7ab552c9eb5b","creationTimestamp":"2026-11-30T08:37:16Z"},
"spec":{"nodeName":"nodetest","containers":[{"name":"sleep","image":"127.0.0.1:5000/test/does-not-exist:1.0"}]},
"status":{"phase":"Pending","conditions":[
 {"type":"PodReadyToStartContainers","status":"True","lastTransitionTime":"2026-11-30T08:37:18Z"},
 {"type":"Ready","status":"False","lastTransitionTime":"2026-11-30T08:37:16Z","reason":"ContainersNotReady"}],
"containerStatuses":[{"name":"sleep","image":"127.0.0.1:5000/test/does-not-exist:1.0","imageID":"","ready":false,
 "restartCount":0,"state":{"waiting":{"reason":"ErrImagePull","message":"not found"}}}]}}`

func decodePod(t *testing.T, s string) *corev1.Pod {
	t.Helper()
	var p corev1.Pod
	if err := json.Unmarshal([]byte(s), &p); err != nil {
		t.Fatal(err)
	}
	return &p
}

// TestApplyClocks: the clocks a failure, Ready and a deletion start, each at the receive time of
// the first version that shows it, and a failure's cleared by Ready.
func TestApplyClocks(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 8, 37, 19, 0, time.UTC)
	failing := decodePod(t, badImagePod)
	backOff := failing.DeepCopy()
	backOff.Status.ContainerStatuses[0].State.Waiting.Reason = "ImagePullBackOff"
	ready := failing.DeepCopy()
	ready.Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(t0)}}
	ready.Status.Conditions[1].Status = corev1.ConditionTrue
	deleted := ready.DeepCopy()
	deleted.DeletionTimestamp = &metav1.Time{Time: t0.Add(time.Minute)}

	d := func(typ watch.DeltaType, at time.Duration) *watch.Delta {
		return &watch.Delta{Type: typ, Recv: t0.Add(at)}
	}
	s := pod.New(d(watch.Added, 0), failing)
	s.Apply(d(watch.Added, 0), failing)
	if reason, since := s.Failure(); reason != "ErrImagePull" || !since.Equal(t0) {
		t.Fatalf("after the first failing version: %q since %v, want ErrImagePull since %v", reason, since, t0)
	}
	s.Apply(d(watch.Modified, 5*time.Second), backOff)
	if reason, since := s.Failure(); reason != "ErrImagePull" || !since.Equal(t0) {
		t.Errorf("a later failing version moved the clock: %q since %v", reason, since)
	}
	s.Apply(d(watch.Modified, 9*time.Second), ready)
	if reason, _ := s.Failure(); reason != "" {
		t.Errorf("Ready kept the failure %q", reason)
	}
	if got := s.ReadyAt(); !got.Equal(t0.Add(9 * time.Second)) {
		t.Errorf("ReadyAt %v, want the Ready version's receive time", got)
	}
	s.Apply(d(watch.Modified, 20*time.Second), ready)
	if got := s.ReadyAt(); !got.Equal(t0.Add(9 * time.Second)) {
		t.Errorf("a later Ready version moved ReadyAt to %v", got)
	}
	// A deletion found by a relist (no receive time) is dated by its deletionTimestamp.
	s.Apply(&watch.Delta{Type: watch.Deleted}, deleted)
	if got := s.DeletedAt(); !got.Equal(deleted.DeletionTimestamp.Time) {
		t.Errorf("DeletedAt %v, want the deletionTimestamp %v", got, deleted.DeletionTimestamp.Time)
	}
}

// TestVolumeFailureUntilSandbox: a FailedMount before the sandbox starts the failure clock; the
// sandbox ready (volumes mounted) stops it.
func TestVolumeFailureUntilSandbox(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 8, 37, 19, 0, time.UTC)
	waiting := decodePod(t, badImagePod)
	waiting.Status.Conditions = waiting.Status.Conditions[1:] // no sandbox yet
	waiting.Status.ContainerStatuses[0].State.Waiting.Reason = "ContainerCreating"
	s := pod.New(&watch.Delta{Type: watch.Added, Recv: t0}, waiting)
	s.Apply(&watch.Delta{Type: watch.Added, Recv: t0}, waiting)
	mount := &events.Event{UID: "e1", Reason: phases.VolumeFailedMount, Type: corev1.EventTypeWarning,
		Regarding: events.Ref{Kind: "Pod", UID: waiting.UID}, Message: `MountVolume.SetUp failed for volume "data"`}
	s.AddEvent(mount, t0.Add(time.Second))
	if reason, since := s.Failure(); reason != phases.VolumeFailedMount || !since.Equal(t0.Add(time.Second)) {
		t.Fatalf("after FailedMount: %q since %v", reason, since)
	}
	mounted := decodePod(t, badImagePod)
	mounted.Status.ContainerStatuses[0].State.Waiting.Reason = "ContainerCreating"
	s.Apply(&watch.Delta{Type: watch.Modified, Recv: t0.Add(3 * time.Second)}, mounted)
	if reason, _ := s.Failure(); reason != "" {
		t.Errorf("the sandbox is ready, yet the volume failure %q runs on", reason)
	}
}

// TestAddVictim: each victim once, at most phases.MaxVictims, an Event's strings bounded.
func TestAddVictim(t *testing.T) {
	s := pod.New(&watch.Delta{Type: watch.Added}, decodePod(t, badImagePod))
	long := strings.Repeat("x", 1000)
	s.AddVictim(phases.PodRef{Namespace: "ns", Name: long, UID: "v0"})
	s.AddVictim(phases.PodRef{Namespace: "ns", Name: "again", UID: "v0"})
	for i := 1; i < 2*phases.MaxVictims; i++ {
		s.AddVictim(phases.PodRef{Namespace: "ns", Name: "v", UID: "v" + string(rune('a'+i%26)) + strings.Repeat("i", i)})
	}
	obs := s.Observe(func(*events.Event) {})
	if len(obs.Victims) != phases.MaxVictims {
		t.Errorf("%d victims kept, want %d", len(obs.Victims), phases.MaxVictims)
	}
	if n := len(obs.Victims[0].Name); n > 253 {
		t.Errorf("a victim's name of %d bytes kept", n)
	}
	for _, v := range obs.Victims[1:] {
		if v.UID == "v0" {
			t.Errorf("victim v0 kept twice")
		}
	}
}
