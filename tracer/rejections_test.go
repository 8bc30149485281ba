package tracer

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/rollout/tracker"
	"github.com/readyspan/readyspan/watch"
)

// The rejection captures are recordings (readyspan record -n NS) on the local node of one
// Deployment each whose Pod creates the apiserver refused:
//
//	rejections-quota        3 replicas against a ResourceQuota of pods=1, raised to 5 after ~63 s
//	rejections-webhook      2 replicas labelled readyspan.dev/deny: the local webhook denies them
//	rejections-podsecurity  2 replicas in a namespace enforcing restricted: no securityContext
//
// recorded for 150 s. The replicaset controller retries with back-off: ten distinct quota and
// PodSecurity messages (each names its generated Pod) and then a "(combined from similar
// events)" Event counting on; the webhook's one message, one Event counting on.

// rejectionEvidence is what a capture's own Events say of the refusals, read from the recorded
// JSON with nothing of the tracer's parsing.
type rejectionEvidence struct {
	first      time.Time // the first FailedCreate's name (nanoseconds)
	firstRecv  time.Time // when it was received
	count      int       // occurrences: each Event's highest count, summed
	messages   []string
	podCreated []time.Time // SuccessfulCreate of each Pod, by its name
}

func readRejectionEvidence(t *testing.T, dir string) rejectionEvidence {
	t.Helper()
	var ev rejectionEvidence
	counts := map[string]int{}
	eachLine(t, filepath.Join(dir, "watch.events.core.v1.jsonl"), func(line []byte) {
		var w struct {
			Recv   time.Time `json:"recv"`
			Object struct {
				Metadata struct{ Name, UID string } `json:"metadata"`
				Reason   string                     `json:"reason"`
				Message  string                     `json:"message"`
				Count    int                        `json:"count"`
			} `json:"object"`
		}
		if err := json.Unmarshal(line, &w); err != nil {
			t.Fatal(err)
		}
		o := &w.Object
		dot := strings.LastIndexByte(o.Metadata.Name, '.')
		ns, err := strconv.ParseInt(o.Metadata.Name[dot+1:], 16, 64)
		if err != nil {
			t.Fatalf("event name %q: %v", o.Metadata.Name, err)
		}
		at := time.Unix(0, ns)
		switch o.Reason {
		case "FailedCreate":
			if ev.first.IsZero() || at.Before(ev.first) {
				ev.first, ev.firstRecv = at, w.Recv
			}
			counts[o.Metadata.UID] = max(counts[o.Metadata.UID], o.Count)
			ev.messages = append(ev.messages, o.Message)
		case "SuccessfulCreate":
			ev.podCreated = append(ev.podCreated, at)
		}
	})
	for _, n := range counts {
		ev.count += n
	}
	return ev
}

// countingStats counts the refused creates the tracer reports (rollout.RejectedCreates).
type countingStats struct {
	mu       sync.Mutex
	rejected map[rollout.RejectionClass]int
}

func (s *countingStats) Delta(string)           {}
func (s *countingStats) Dropped(string)         {}
func (s *countingStats) InPhase(map[string]int) {}
func (s *countingStats) Unparsed(string)        {}
func (s *countingStats) PodCreatesRejected(c rollout.RejectionClass, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rejected[c] += n
}

func replayRejections(t *testing.T, dir string) ([]*rollout.Trace, *countingStats) {
	t.Helper()
	deltas, err := Kinds.LoadRecording(dir)
	if err != nil {
		t.Fatal(err)
	}
	stats := &countingStats{rejected: map[rollout.RejectionClass]int{}}
	var rs []*rollout.Trace
	c := New(Config{Rollouts: tracker.SinkFunc(func(r *rollout.Trace) { rs = append(rs, r) })},
		SinkFunc(func(*phases.Trace) {}), stats, nil)
	// The deadlines run on the recording's own clock, ticked every 200 ms as readyspan run
	// ticks, and on to 40 s after its last delta.
	var clock time.Time
	tick := func(until time.Time) {
		for !clock.IsZero() && clock.Add(200*time.Millisecond).Before(until) {
			clock = clock.Add(200 * time.Millisecond)
			c.Tick(clock)
		}
		clock = until
		c.Tick(clock)
	}
	for i := range deltas {
		if r := deltas[i].Recv; !r.IsZero() && r.After(clock) {
			tick(r)
		}
		c.Handle(deltas[i])
	}
	tick(clock.Add(40 * time.Second))
	c.Flush(phases.OutcomeInProgress)
	return rs, stats
}

func TestRealRejections(t *testing.T) {
	for _, tc := range []struct {
		capture string
		class   rollout.RejectionClass
		// resumed: the capture raises the quota, and the rollout completes.
		resumed bool
		// phrase is in every refusal's message as the apiserver wrote it.
		phrase string
	}{
		{"rejections-quota", rollout.RejectQuota, true, "exceeded quota: pods, requested: pods=1, used: pods=1, limited: pods=1"},
		{"rejections-webhook", rollout.RejectWebhook, false, `admission webhook "deny.readyspan.dev" denied the request`},
		{"rejections-podsecurity", rollout.RejectPodSecurity, false, `violates PodSecurity "restricted:latest"`},
	} {
		t.Run(tc.capture, func(t *testing.T) {
			dir := filepath.Join("testdata", "real-node", tc.capture)
			ev := readRejectionEvidence(t, dir)
			for _, m := range ev.messages {
				if !strings.Contains(m, tc.phrase) {
					t.Fatalf("capture: a FailedCreate without %q: %q", tc.phrase, m)
				}
			}
			rs, stats := replayRejections(t, dir)
			want := 1
			if tc.resumed {
				want = 2
			}
			if len(rs) != want {
				t.Fatalf("%d rollout traces, want %d", len(rs), want)
			}
			// The first export: blocked, the rollout's default deadline after the first refusal
			// was received, with the refusal as its reason.
			b := rs[0]
			if b.Summary.Outcome != rollout.OutcomeBlocked {
				t.Fatalf("first trace's outcome %s, want blocked", b.Summary.Outcome)
			}
			root := b.Root()
			if got := root.End.Sub(ev.firstRecv); got < tracker.DefaultBlockedAfter || got > tracker.DefaultBlockedAfter+200*time.Millisecond {
				t.Errorf("blocked trace ends %s after the first refusal was received, want the blocked deadline (%s) plus a tick", got, tracker.DefaultBlockedAfter)
			}
			wantReason := string(tc.class) + ": "
			if !strings.HasPrefix(b.Rollout.Reason, wantReason) || !strings.Contains(b.Rollout.Reason, tc.phrase) ||
				root.Status != phases.StatusError || root.StatusMessage != b.Rollout.Reason {
				t.Errorf("reason %q, status %v %q: want %q… naming %q", b.Rollout.Reason, root.Status, root.StatusMessage, wantReason, tc.phrase)
			}
			if !strings.Contains(b.Summary.Sentence, "blocked ("+wantReason) {
				t.Errorf("sentence %q does not say blocked by %s", b.Summary.Sentence, tc.class)
			}
			if got := root.Attr(rollout.AttrRejectionClass); got != string(tc.class) {
				t.Errorf("root %s = %v, want %s", rollout.AttrRejectionClass, got, tc.class)
			}
			rej := b.Rollout.Rejections
			if len(rej) != 1 || rej[0].Class != tc.class || rej[0].Reason != "FailedCreate" || !rej[0].Cleared.IsZero() {
				t.Fatalf("rejections %+v, want one %s FailedCreate, still holding", rej, tc.class)
			}
			// Its first occurrence is the first FailedCreate Event's own nanosecond stamp.
			if !rej[0].First.Equal(ev.first) {
				t.Errorf("first refusal at %s, the first FailedCreate's name says %s", rej[0].First, ev.first)
			}
			blockedSpans := 0
			for i := range b.Spans {
				s := &b.Spans[i]
				if s.Name != rollout.BlockedSpanName {
					continue
				}
				blockedSpans++
				if !s.Start.Equal(ev.first) || s.Attr(rollout.AttrRejectionClass) != string(tc.class) || s.Status != phases.StatusError {
					t.Errorf("blocked span %s..%s %v: want from the first refusal, class %s, error", s.Start, s.End, s.Attrs, tc.class)
				}
				if p := spanByID(b, s.ParentSpanID); p == nil || p.Name != rollout.StepSpanName {
					t.Errorf("blocked span's parent is not the ReplicaSet's step")
				}
				if len(s.Events()) == 0 || !s.Events()[0].Time.Equal(ev.first) {
					t.Errorf("blocked span's events %v: want the first refusal at %s", s.Events(), ev.first)
				}
			}
			if blockedSpans != 1 {
				t.Errorf("%d %s spans, want 1", blockedSpans, rollout.BlockedSpanName)
			}
			// Every occurrence is counted once, into its class, however many versions of its
			// Event (and combined Events) were written.
			if got := stats.rejected[tc.class]; got != ev.count || len(stats.rejected) != 1 {
				t.Errorf("counted %v, want %d %s (each Event's highest count, summed)", stats.rejected, ev.count, tc.class)
			}
			if !tc.resumed {
				if n := rej[0].Count; n < 10 {
					t.Errorf("blocked trace counts %d refusals, the capture has %d in its first 30 s or more", n, ev.count)
				}
				return
			}
			// Raised quota: the controller made the two Pods it could not, and the rollout
			// completed, exported again under a trace that resumes the blocked one and keeps
			// the blocked time, ending when the first of those Pods was made.
			c := rs[1]
			if c.Summary.Outcome != rollout.OutcomeComplete || c.Rollout.Resumes != b.TraceID || c.TraceID == b.TraceID {
				t.Fatalf("second trace %s outcome %s resumes %s, want complete resuming %s", c.TraceID, c.Summary.Outcome, c.Rollout.Resumes, b.TraceID)
			}
			if len(ev.podCreated) != 3 {
				t.Fatalf("capture: %d SuccessfulCreate, want 3", len(ev.podCreated))
			}
			after := ev.podCreated[1] // the first Pod the raised quota let through
			cr := c.Rollout.Rejections
			if len(cr) != 1 || cr[0].Cleared.IsZero() {
				t.Fatalf("rejections %+v, want one cleared", cr)
			}
			if d := cr[0].Cleared.Sub(after); d < 0 || d > time.Second {
				t.Errorf("cleared at %s, %s after the SuccessfulCreate of the first Pod let through (%s)", cr[0].Cleared, d, after)
			}
			if int(cr[0].Count) != ev.count {
				t.Errorf("complete trace counts %d refusals, the Events %d", cr[0].Count, ev.count)
			}
			if !strings.Contains(c.Summary.Sentence, "blocked ") || !strings.Contains(c.Summary.Sentence, " by quota") {
				t.Errorf("sentence %q does not keep the blocked time", c.Summary.Sentence)
			}
			var link bool
			for _, l := range c.Root().Links() {
				link = link || l.TraceID == b.TraceID && l.SpanID == b.Root().SpanID
			}
			if !link {
				t.Errorf("the complete trace does not link to the blocked one's root")
			}
		})
	}
}

func spanByID(t *rollout.Trace, id phases.SpanID) *phases.Span {
	for i := range t.Spans {
		if t.Spans[i].SpanID == id {
			return &t.Spans[i]
		}
	}
	return nil
}

// Events are best effort (a recorder's queue full, a spam filter): the Deployment's
// ReplicaFailure condition alone blocks the rollout, and its removal with the Pod made clears it.
func TestReplicaFailureConditionBlocks(t *testing.T) {
	s := newSim(t, "cond")
	d := s.deploymentOf("web", 1, 0)
	rs := s.replicaSet(d, "5d8f", 20)
	const msg = `pods "web-5d8f-x2k4f" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=1, limited: pods=1`
	s.deploymentAt(d, 100, func(d *appsv1.Deployment) {
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Conditions: []appsv1.DeploymentCondition{{
			Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: msg,
			LastTransitionTime: secs(s.at(100))}}}
	})
	// The quota raised 40 s later: the Pod made, the condition gone, the rollout complete.
	s.pod("web-5d8f-ab12c", rs, nil, []container{{name: "app"}}, 40_000)
	s.deploymentAt(d, 42_000, func(d *appsv1.Deployment) { completeStatus(d, secs(s.at(42_000))) })
	deltas := s.deltas

	stats := &countingStats{rejected: map[rollout.RejectionClass]int{}}
	var traces []*rollout.Trace
	c := New(Config{Rollouts: tracker.SinkFunc(func(r *rollout.Trace) { traces = append(traces, r) })}, SinkFunc(func(*phases.Trace) {}), stats, nil)
	var clock time.Time
	for _, dl := range deltas {
		for !clock.IsZero() && clock.Add(time.Second).Before(dl.Recv) {
			clock = clock.Add(time.Second)
			c.Tick(clock)
		}
		clock = dl.Recv
		c.Tick(clock)
		c.Handle(dl)
	}
	c.Tick(clock.Add(time.Minute))
	if len(traces) != 2 {
		t.Fatalf("%d rollout traces, want blocked then complete", len(traces))
	}
	b, done := traces[0], traces[1]
	if b.Summary.Outcome != rollout.OutcomeBlocked || b.Rollout.Reason != "quota: "+msg {
		t.Errorf("first: %s %q, want blocked by the condition's quota message", b.Summary.Outcome, b.Rollout.Reason)
	}
	if end := b.Root().End.Sub(s.at(100)); end < tracker.DefaultBlockedAfter || end > tracker.DefaultBlockedAfter+time.Second {
		t.Errorf("blocked exported %s after the condition was seen", end)
	}
	if j := b.Rollout.Rejections; len(j) != 1 || j[0].Count != 0 || j[0].Owner != "" {
		t.Errorf("rejections %+v: want one from the condition, which counts nothing and names no ReplicaSet", j)
	}
	if done.Summary.Outcome != rollout.OutcomeComplete || done.Rollout.Resumes != b.TraceID {
		t.Errorf("second: %s resuming %s, want complete resuming the blocked trace", done.Summary.Outcome, done.Rollout.Resumes)
	}
	if j := done.Rollout.Rejections; len(j) != 1 || j[0].Cleared.IsZero() || j[0].Cleared.Before(s.at(40_000)) {
		t.Errorf("rejections %+v: want cleared by the Pod made at 40 s", j)
	}
	if len(stats.rejected) != 0 {
		t.Errorf("counted %v from a condition: only Events' occurrences count", stats.rejected)
	}
}

// A rollout reported blocked stays followed while it is blocked, past the stuck deadline: the
// gauge (and RolloutBlocked) hold, and nothing is exported again until it goes on.
func TestBlockedOutlivesTheStuckDeadline(t *testing.T) {
	deltas, err := Kinds.LoadRecording(filepath.Join("testdata", "real-node", "rejections-webhook"))
	if err != nil {
		t.Fatal(err)
	}
	var rs []*rollout.Trace
	prog := &progressStats{}
	c := New(Config{RolloutStuckAfter: 2 * time.Minute, Rollouts: tracker.SinkFunc(func(r *rollout.Trace) { rs = append(rs, r) })},
		SinkFunc(func(*phases.Trace) {}), prog, nil)
	last := feed(c, deltas)
	for at := last; at.Before(last.Add(10 * time.Minute)); at = at.Add(time.Second) {
		c.Tick(at)
	}
	if len(rs) != 1 || rs[0].Summary.Outcome != rollout.OutcomeBlocked {
		t.Fatalf("%d traces, want the one blocked", len(rs))
	}
	if n := prog.last.Blocked["Deployment/admission_webhook"]; n != 1 {
		t.Errorf("10 minutes on, past the 2-minute stuck deadline, blocked gauge %v, want Deployment/admission_webhook 1", prog.last.Blocked)
	}
}

type progressStats struct {
	noStats
	last rollout.Progress
}

func (p *progressStats) RolloutProgress(pr rollout.Progress) { p.last = pr }

// The Deployment's ReplicaFailure condition can arrive before the FailedCreate Event it copies
// (the recorder writes Events from a queue): the condition states its time to the second, the
// Event's name to the nanosecond, so the rejection's first occurrence is the Event's when it
// falls within the condition's second.
func TestConditionThenEventKeepsTheEventsStamp(t *testing.T) {
	s := newSim(t, "cond-event")
	d := s.deploymentOf("web", 1, 0)
	rs := s.replicaSet(d, "5d8f", 20)
	const msg = `pods "web-5d8f-x2k4f" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=1, limited: pods=1`
	refused := s.at(500) // 34.200: the refusal, as the Event's name states it
	s.deploymentAt(d, 1000, func(d *appsv1.Deployment) {
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Conditions: []appsv1.DeploymentCondition{{
			Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: "Error creating: " + msg,
			LastTransitionTime: secs(s.at(1000))}}} // 34.000
	})
	ev := &corev1.Event{
		TypeMeta:       metav1.TypeMeta{Kind: "Event", APIVersion: "v1"},
		ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", rs.Name, refused.UnixNano()), Namespace: s.ns, UID: s.uid("event"), ResourceVersion: s.nextRV(), CreationTimestamp: secs(s.at(1200))},
		InvolvedObject: corev1.ObjectReference{Kind: "ReplicaSet", Namespace: s.ns, Name: rs.Name, UID: rs.UID, APIVersion: "apps/v1", ResourceVersion: rs.ResourceVersion},
		Reason:         "FailedCreate", Message: "Error creating: " + msg, Type: corev1.EventTypeWarning,
		Source:         corev1.EventSource{Component: "replicaset-controller"},
		FirstTimestamp: secs(refused), LastTimestamp: secs(refused), Count: 1,
	}
	s.emit(ResourceEvents, watch.Added, ev, s.at(1200))

	var traces []*rollout.Trace
	c := New(Config{Rollouts: tracker.SinkFunc(func(r *rollout.Trace) { traces = append(traces, r) })}, SinkFunc(func(*phases.Trace) {}), nil, nil)
	var clock time.Time
	for _, dl := range s.deltas {
		clock = dl.Recv
		c.Tick(clock)
		c.Handle(dl)
	}
	c.Tick(clock.Add(tracker.DefaultBlockedAfter + time.Second))
	if len(traces) != 1 || traces[0].Summary.Outcome != rollout.OutcomeBlocked {
		t.Fatalf("%d rollout traces, want one blocked", len(traces))
	}
	j := traces[0].Rollout.Rejections
	if len(j) != 1 || j[0].Owner != rs.Name {
		t.Fatalf("rejections %+v, want one, named by its Event", j)
	}
	if !j[0].First.Equal(refused) {
		t.Errorf("first refusal at %s, want the Event's %s (the condition says %s)", j[0].First.Format(time.StampMicro), refused.Format(time.StampMicro), secs(s.at(1000)).Format(time.StampMicro))
	}
}
