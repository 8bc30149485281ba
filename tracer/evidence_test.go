package tracer

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/readyspan/readyspan/phases"
)

// The tests in this file hold the traces rebuilt from the real captures against evidence read
// straight from the captures' JSON, with nothing of the tracer's own parsing: if the tracer
// misread an event (its name, eventTime or message), these readings would disagree with it.

// Tolerances, stated once. An event-name boundary is the very nanosecond in the name, so it must
// match exactly. eventTime is a MicroTime: 1 µs. The kubelet's Pulled figures are durations
// truncated to the millisecond before printing; its "Pulling" event is stamped before its pull
// timer starts and its "Pulled" event after the timer stops, so Pulling → Pulled can only be
// longer than the stated total, by the truncation (< 1 ms) plus the time to stamp the two events.
const (
	eventNameTolerance = 0
	eventTimeTolerance = time.Microsecond
	pulledTruncation   = time.Millisecond
	// pulledStampSlack bounds the time between the kubelet's pull timer and its two events'
	// stamps. Measured on the captures' traced Pods: at most 0.28 ms beyond the truncation.
	pulledStampSlack = time.Millisecond
)

// rawEvent is an Event as the capture's JSON holds it.
type rawEvent struct {
	UID       string
	Name      string
	Namespace string
	Reason    string
	Message   string
	Kind      string // of the object it is about
	About     string // that object's name
	AboutUID  string
	FieldPath string
	EventTime time.Time // zero when the event has none
	NameTime  time.Time // the hex UnixNano after the last dot of the name
}

// rawPod is what the evidence needs of a Pod in pods.json.
type rawPod struct {
	UID, Name, Namespace, ReplicaSet string
	// SandboxSecond is PodReadyToStartContainers' lastTransitionTime: the sandbox turned
	// ready within the second that starts there. Zero if not True.
	SandboxSecond time.Time
}

type evidence struct {
	events []rawEvent
	pods   map[string]rawPod // by UID
}

// readEvidence reads a capture's List snapshots of Events (both APIs, one entry per Event UID)
// and Pods. run8 also has watch streams, which the tracer reads instead; the snapshots are then
// a second, independent view of the same Events.
func readEvidence(t *testing.T, dir string) *evidence {
	t.Helper()
	type ref struct {
		Kind      string `json:"kind"`
		Name      string `json:"name"`
		UID       string `json:"uid"`
		FieldPath string `json:"fieldPath"`
	}
	var list struct {
		Items []struct {
			Metadata struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
				UID       string `json:"uid"`
			} `json:"metadata"`
			Reason         string `json:"reason"`
			Message        string `json:"message"` // core/v1
			Note           string `json:"note"`    // events.k8s.io/v1
			InvolvedObject *ref   `json:"involvedObject"`
			Regarding      *ref   `json:"regarding"`
			EventTime      string `json:"eventTime"`
		} `json:"items"`
	}
	ev := &evidence{pods: map[string]rawPod{}}
	seen := map[string]bool{}
	for _, file := range []string{"events.core.v1.json", "events.events.k8s.io.v1.json"} {
		list.Items = nil
		readJSON(t, filepath.Join(dir, file), &list)
		for _, it := range list.Items {
			if seen[it.Metadata.UID] {
				continue
			}
			seen[it.Metadata.UID] = true
			e := rawEvent{UID: it.Metadata.UID, Name: it.Metadata.Name, Namespace: it.Metadata.Namespace, Reason: it.Reason, Message: it.Message + it.Note}
			r := it.InvolvedObject
			if r == nil {
				r = it.Regarding
			}
			if r != nil {
				e.Kind, e.About, e.AboutUID, e.FieldPath = r.Kind, r.Name, r.UID, r.FieldPath
			}
			if it.EventTime != "" {
				at, err := time.Parse(time.RFC3339Nano, it.EventTime)
				if err != nil {
					t.Fatalf("%s: eventTime %q: %v", it.Metadata.Name, it.EventTime, err)
				}
				e.EventTime = at
			}
			dot := strings.LastIndexByte(e.Name, '.')
			ns, err := strconv.ParseInt(e.Name[dot+1:], 16, 64)
			if err != nil {
				t.Fatalf("event name %q has no hex suffix: %v", e.Name, err)
			}
			e.NameTime = time.Unix(0, ns)
			ev.events = append(ev.events, e)
		}
	}
	sort.Slice(ev.events, func(i, j int) bool { return ev.events[i].NameTime.Before(ev.events[j].NameTime) })
	var pods struct {
		Items []struct {
			Metadata struct {
				Name            string `json:"name"`
				Namespace       string `json:"namespace"`
				UID             string `json:"uid"`
				OwnerReferences []struct {
					Kind string `json:"kind"`
					Name string `json:"name"`
				} `json:"ownerReferences"`
			} `json:"metadata"`
			Status struct {
				Conditions []struct {
					Type               string `json:"type"`
					Status             string `json:"status"`
					LastTransitionTime string `json:"lastTransitionTime"`
				} `json:"conditions"`
			} `json:"status"`
		} `json:"items"`
	}
	readJSON(t, filepath.Join(dir, "pods.json"), &pods)
	for _, it := range pods.Items {
		p := rawPod{UID: it.Metadata.UID, Name: it.Metadata.Name, Namespace: it.Metadata.Namespace}
		for _, o := range it.Metadata.OwnerReferences {
			if o.Kind == "ReplicaSet" {
				p.ReplicaSet = o.Name
			}
		}
		for _, c := range it.Status.Conditions {
			if c.Type == "PodReadyToStartContainers" && c.Status == "True" {
				at, err := time.Parse(time.RFC3339, c.LastTransitionTime)
				if err != nil {
					t.Fatalf("%s: %v", p.Name, err)
				}
				p.SandboxSecond = at
			}
		}
		ev.pods[p.UID] = p
	}
	return ev
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// first returns the earliest event about the Pod (and container, if not "") with the reason.
func (ev *evidence) first(podUID, container, reason string) (rawEvent, bool) {
	for _, e := range ev.events {
		if e.AboutUID == podUID && e.Reason == reason && (container == "" || containerOf(e.FieldPath) == container) {
			return e, true
		}
	}
	return rawEvent{}, false
}

// containerOf reads "spec.containers{web}" or "spec.initContainers{init}" as "web" / "init".
func containerOf(fieldPath string) string {
	_, rest, ok := strings.Cut(fieldPath, "{")
	if !ok {
		return ""
	}
	return strings.TrimSuffix(rest, "}")
}

// steps are the kubelet's per-container events in the order it works through them.
var steps = []string{"Pulling", "Pulled", "Created", "Started"}

// lastStep is the container's latest first-occurrence step event, the end of what the kubelet
// reported doing for it.
func (ev *evidence) lastStep(podUID, container string) (rawEvent, bool) {
	return ev.extremeStep(podUID, container, func(a, b time.Time) bool { return a.After(b) })
}

// firstStep is the container's earliest step event: the kubelet had moved on to it.
func (ev *evidence) firstStep(podUID, container string) (rawEvent, bool) {
	return ev.extremeStep(podUID, container, func(a, b time.Time) bool { return a.Before(b) })
}

// extremeStep is the container's step event whose name time beats every other's by better.
func (ev *evidence) extremeStep(podUID, container string, better func(a, b time.Time) bool) (rawEvent, bool) {
	var out rawEvent
	found := false
	for _, r := range steps {
		if e, ok := ev.first(podUID, container, r); ok && (!found || better(e.NameTime, out.NameTime)) {
			out, found = e, true
		}
	}
	return out, found
}

// nameSource says which event a boundary with source event-name must have been read from, by
// what the boundary is: the span's name and side. It returns a description of the event for
// failure messages; ok is false when no event can justify the boundary.
func (ev *evidence) nameSource(tr *phases.Trace, s *phases.Span, side string) (rawEvent, string, bool) {
	pod := ev.pods[tr.Pod.UID]
	container := ""
	if s.Name == "container" || strings.HasPrefix(s.Name, "container.") {
		_, rest, _ := strings.Cut(s.Path, "/")
		container, _, _ = strings.Cut(rest, "/")
	}
	kubelet := func(reason string) (rawEvent, string, bool) {
		e, ok := ev.first(pod.UID, container, reason)
		return e, reason + " of " + container, ok
	}
	created := func() (rawEvent, string, bool) {
		for _, e := range ev.events {
			if e.Namespace == pod.Namespace && e.Kind == "ReplicaSet" && e.Reason == "SuccessfulCreate" && e.Message == "Created pod: "+pod.Name {
				return e, "SuccessfulCreate of the Pod", true
			}
		}
		return rawEvent{}, "SuccessfulCreate of the Pod", false
	}
	switch s.Name + "/" + side {
	case "controllers.deployment/end", "controllers.replicaset/start":
		var found []rawEvent
		for _, e := range ev.events {
			if e.Namespace == pod.Namespace && e.Reason == "ScalingReplicaSet" && strings.HasPrefix(e.Message, "Scaled up replica set "+pod.ReplicaSet+" ") {
				found = append(found, e)
			}
		}
		if len(found) != 1 {
			return rawEvent{}, fmt.Sprintf("the one scale-up of %s (found %d)", pod.ReplicaSet, len(found)), false
		}
		return found[0], "ScalingReplicaSet of " + pod.ReplicaSet, true
	case "controllers/end", "controllers.replicaset/end", "scheduling/start":
		return created()
	case "container.image_pull/start":
		// An image already present has no Pulling: its pull is the instant of Pulled.
		if e, ok := ev.first(pod.UID, container, "Pulling"); ok {
			return e, "Pulling of " + container, true
		}
		return kubelet("Pulled")
	case "container.image_pull/end", "container.image_pull.transfer/end":
		return kubelet("Pulled")
	case "container.create/start":
		if e, ok := ev.first(pod.UID, container, "Pulled"); ok {
			return e, "Pulled of " + container, true
		}
		return kubelet("Pulling")
	case "container.create/end", "container.start/start":
		return kubelet("Created")
	case "container.start/end", "container.readiness/start", "container.post_start/start", "container.startup_probe/start", "container.run/start":
		return kubelet("Started")
	case "container/end", "container.init/end", "container.sidecar/end":
		e, ok := ev.lastStep(pod.UID, container)
		return e, "the last step event of " + container, ok
	case "container/start", "container.init/start", "container.sidecar/start", "kubelet.sandbox/end":
		// The kubelet's turn for a container starts where the previous container's last step
		// ended; the first container's, where the sandbox ended, which its own first step
		// bounds from above.
		prev := ""
		for i := range tr.Pod.Containers {
			c := tr.Pod.Containers[i].Name
			if c == container || (s.Name == "kubelet.sandbox" && i == 0) {
				if prev == "" {
					e, ok := ev.firstStep(pod.UID, tr.Pod.Containers[0].Name)
					return e, "the first step event of " + tr.Pod.Containers[0].Name, ok
				}
				e, ok := ev.lastStep(pod.UID, prev)
				return e, "the last step event of " + prev, ok
			}
			prev = c
		}
	case "status/start", "status.running/start":
		var out rawEvent
		found := false
		for _, c := range tr.Pod.Containers {
			if c.Init && !c.Sidecar {
				continue
			}
			if e, ok := ev.first(pod.UID, c.Name, "Started"); ok && (!found || e.NameTime.After(out.NameTime)) {
				out, found = e, true
			}
		}
		return out, "the last Started of the app containers", found
	}
	return rawEvent{}, "", false
}

// timeSource says which eventTime a boundary with source event-time must equal: the bind is the
// Scheduled event; the Pod's creation can be bounded by the scheduler's first failed attempt.
func (ev *evidence) timeSource(tr *phases.Trace, s *phases.Span, side string) (rawEvent, string, bool) {
	switch s.Name + "/" + side {
	case "scheduling/end", "kubelet/start", "kubelet.sandbox/start":
		e, ok := ev.first(tr.Pod.UID, "", "Scheduled")
		return e, "Scheduled", ok
	case "controllers/end", "controllers.replicaset/end", "scheduling/start":
		e, ok := ev.first(tr.Pod.UID, "", "FailedScheduling")
		return e, "the first FailedScheduling", ok
	}
	return rawEvent{}, "", false
}

// pulledRE reads the kubelet's message for an image it pulled.
var pulledRE = regexp.MustCompile(`^Successfully pulled image "[^"]+" in (\S+) \((\S+) including waiting\)\. Image size: (\d+) bytes\.$`)

// checkEvidence holds one capture's traces against the capture's own JSON and returns how many
// boundaries it checked.
func checkEvidence(t *testing.T, dir string, traces []*phases.Trace) int {
	t.Helper()
	ev := readEvidence(t, dir)
	checked := 0
	for _, tr := range traces {
		if _, ok := ev.pods[tr.Pod.UID]; !ok {
			t.Errorf("%s: traced Pod not in pods.json", tr.Pod.Name)
			continue
		}
		for i := range tr.Spans {
			s := &tr.Spans[i]
			for _, side := range []string{"start", "end"} {
				at, key := s.Start, phases.AttrSourceStart
				if side == "end" {
					at, key = s.End, phases.AttrSourceEnd
				}
				switch s.Attr(key) {
				case phases.SourceEventName.String():
					e, what, ok := ev.nameSource(tr, s, side)
					if !ok {
						t.Errorf("%s: %s %s is an event-name stamp, but no event in the capture explains it (%s)", tr.Pod.Name, s.Path, side, what)
						continue
					}
					if d := at.Sub(e.NameTime); d < -eventNameTolerance || d > eventNameTolerance {
						t.Errorf("%s: %s %s = %s, but the name of %s (%s) says %s: off by %v", tr.Pod.Name, s.Path, side, at.Format(time.RFC3339Nano), what, e.Name, e.NameTime.UTC().Format(time.RFC3339Nano), d)
					}
					checked++
				case phases.SourceEventTime.String():
					e, what, ok := ev.timeSource(tr, s, side)
					if !ok || e.EventTime.IsZero() {
						t.Errorf("%s: %s %s is an event-time stamp, but no eventTime in the capture explains it (%s)", tr.Pod.Name, s.Path, side, what)
						continue
					}
					if d := at.Sub(e.EventTime); d < -eventTimeTolerance || d > eventTimeTolerance {
						t.Errorf("%s: %s %s = %s, but %s's eventTime is %s: off by %v", tr.Pod.Name, s.Path, side, at.Format(time.RFC3339Nano), what, e.EventTime.Format(time.RFC3339Nano), d)
					}
					checked++
				}
			}
		}
		// The bind: whatever the tracer chose, the scheduling phase ends at the Scheduled
		// event's eventTime when the capture has one.
		if e, ok := ev.first(tr.Pod.UID, "", "Scheduled"); ok && !e.EventTime.IsZero() {
			sch := tr.Phase(phases.PhaseScheduling)
			if d := sch.End.Sub(e.EventTime); d < -eventTimeTolerance || d > eventTimeTolerance {
				t.Errorf("%s: scheduling ends %s, Scheduled's eventTime is %s", tr.Pod.Name, sch.End.Format(time.RFC3339Nano), e.EventTime.Format(time.RFC3339Nano))
			}
			checked++
		}
		checked += checkPulls(t, ev, tr)
	}
	return checked
}

// checkPulls holds each pull span against the kubelet's own figures in its Pulled message:
// the transfer child lasts exactly "in X" and ends at Pulled; the pull span, Pulling → Pulled,
// is the "Y including waiting" the kubelet measured inside those two events.
func checkPulls(t *testing.T, ev *evidence, tr *phases.Trace) int {
	t.Helper()
	checked := 0
	for _, c := range tr.Pod.Containers {
		pulled, ok := ev.first(tr.Pod.UID, c.Name, "Pulled")
		if !ok {
			continue
		}
		m := pulledRE.FindStringSubmatch(pulled.Message)
		if m == nil {
			continue // already present: nothing was pulled
		}
		transfer, err1 := time.ParseDuration(m[1])
		total, err2 := time.ParseDuration(m[2])
		size, err3 := strconv.ParseInt(m[3], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			t.Fatalf("%s: Pulled message %q: %v %v %v", tr.Pod.Name, pulled.Message, err1, err2, err3)
		}
		path := "container/" + c.Name + "/image_pull"
		if c.Init {
			path = "container.init/" + c.Name + "/image_pull"
			if c.Sidecar {
				path = "container.sidecar/" + c.Name + "/image_pull"
			}
		}
		pull, tx := tr.Find(path), tr.Find(path+"/transfer")
		if pull == nil || tx == nil {
			t.Errorf("%s: the kubelet pulled %s (%q) but the trace has no %s with a transfer child", tr.Pod.Name, c.Name, pulled.Message, path)
			continue
		}
		if tx.Duration() != transfer || !tx.End.Equal(pulled.NameTime) {
			t.Errorf("%s: transfer %v ending %s, the kubelet said %v ending at Pulled %s", tr.Pod.Name, tx.Duration(), tx.End.Format(time.RFC3339Nano), transfer, pulled.NameTime.UTC().Format(time.RFC3339Nano))
		}
		if over := pull.Duration() - total; over < 0 || over >= pulledTruncation+pulledStampSlack {
			t.Errorf("%s: pull %v, the kubelet said %v including waiting: %v over, want [0, %v)", tr.Pod.Name, pull.Duration(), total, over, pulledTruncation+pulledStampSlack)
		} else {
			t.Logf("%s: pull %v, kubelet's total %v: %v over", tr.Pod.Name, pull.Duration(), total, over)
		}
		wantMs := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
		if pull.Attr(phases.AttrPullTotal) != wantMs(total) || tx.Attr(phases.AttrPullTransfer) != wantMs(transfer) || pull.Attr(phases.AttrImageSize) != size {
			t.Errorf("%s: pull attributes %v / %v, want total %v ms, transfer %v ms, size %d", tr.Pod.Name, pull.Attrs, tx.Attrs, wantMs(total), wantMs(transfer), size)
		}
		checked += 3
	}
	return checked
}

// TestRealNodeEvidence checks every capture's traces against the capture's raw JSON.
func TestRealNodeEvidence(t *testing.T) {
	for _, dir := range realNodeDirs(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			n := checkEvidence(t, dir, replayDir(t, dir))
			if n == 0 {
				t.Fatal("no boundary was checked against the capture")
			}
			t.Logf("%d boundaries and durations checked against the capture's events", n)
		})
	}
}

// TestRealNodeWholeSeconds replays the captures, which have no receive times, so the sandbox's
// end is known only from PodReadyToStartContainers' whole second and the events around it. The
// sandbox ended in that second, after the bind, and before the kubelet's first event about a
// container (its name's nanoseconds); the kubelet moves on to the container at once, so the
// sandbox is drawn up to that event, and the container's steps follow each other without a
// hole. Read from the capture's JSON, not from what the tracer made of it.
func TestRealNodeWholeSeconds(t *testing.T) {
	for _, dir := range realNodeDirs(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			ev := readEvidence(t, dir)
			for _, tr := range replayDir(t, dir) {
				pod := ev.pods[tr.Pod.UID]
				sb, kubelet := tr.Find("kubelet.sandbox"), tr.Phase(phases.PhaseKubelet)
				first, ok := ev.firstStep(pod.UID, tr.Pod.Containers[0].Name)
				if pod.SandboxSecond.IsZero() || !ok {
					t.Errorf("%s: the capture has no sandbox second or no container event to check against", pod.Name)
					continue
				}
				// The window the evidence leaves: [second, second+1s) ∩ [bind, first event].
				lo, hi := pod.SandboxSecond, pod.SandboxSecond.Add(time.Second)
				if kubelet.Start.After(lo) {
					lo = kubelet.Start
				}
				if first.NameTime.Before(hi) {
					hi = first.NameTime
				}
				if sb.End.Before(lo) || sb.End.After(hi) {
					t.Errorf("%s: sandbox ends %s, outside the evidence's window [%s, %s]", pod.Name, sb.End.Format(time.RFC3339Nano), lo.Format(time.RFC3339Nano), hi.Format(time.RFC3339Nano))
				}
				if !sb.End.Equal(first.NameTime) {
					t.Errorf("%s: sandbox ends %s, want at the kubelet's first container event %s (%s)", pod.Name, sb.End.Format(time.RFC3339Nano), first.Name, first.NameTime.UTC().Format(time.RFC3339Nano))
				}
				if sb.Duration() == 0 && first.NameTime.After(kubelet.Start) {
					t.Errorf("%s: sandbox drawn as 0 ms, yet the first container event came %v after the bind", pod.Name, first.NameTime.Sub(kubelet.Start))
				}
				want := float64(hi.Sub(lo)) / float64(time.Millisecond)
				if got, _ := sb.Attr(phases.AttrUncertaintyEnd).(float64); got != want {
					t.Errorf("%s: sandbox end uncertainty %v ms, want the window's %v ms", pod.Name, got, want)
				}
				t.Logf("%s: sandbox %v, its end within a %.1f ms window (second %s, first event %s %s)", pod.Name, sb.Duration().Round(100*time.Microsecond), want, pod.SandboxSecond.Format("15:04:05"), first.Reason, first.NameTime.UTC().Format("15:04:05.000000"))
				checkNoHoles(t, tr)
			}
		})
	}
}

// checkNoHoles: a container's span starts where the kubelet turned to it, its first step starts
// there, and each of its sequential steps starts where the one before ended.
func checkNoHoles(t *testing.T, tr *phases.Trace) {
	t.Helper()
	turn := tr.Find("kubelet.sandbox").End
	for _, c := range tr.Pod.Containers {
		path := "container/" + c.Name
		if c.Init {
			path = "container.init/" + c.Name
			if c.Sidecar {
				path = "container.sidecar/" + c.Name
			}
		}
		cs := tr.Find(path)
		if cs == nil {
			t.Errorf("%s: no span %s", tr.Pod.Name, path)
			return
		}
		if !cs.Start.Equal(turn) {
			t.Errorf("%s: %s starts %s, want where the kubelet turned to it, %s", tr.Pod.Name, path, cs.Start.Format(time.RFC3339Nano), turn.Format(time.RFC3339Nano))
		}
		at := cs.Start
		for _, step := range []string{"image_pull", "create", "start"} {
			s := tr.Find(path + "/" + step)
			if s == nil {
				break // a failed pull ends the steps
			}
			if !s.Start.Equal(at) {
				t.Errorf("%s: %s/%s starts %s, %v after the step before it ended", tr.Pod.Name, path, step, s.Start.Format(time.RFC3339Nano), s.Start.Sub(at))
			}
			at = s.End
		}
		turn = cs.End
	}
}
