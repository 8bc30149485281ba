package rollout

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/readyspan/readyspan/phases"
)

// The messages are the apiserver's errors as the replicaset controller's FailedCreate quotes
// them (less "Error creating: "): the first three recorded on the local node
// (tracer/testdata/real-node/rejections-*), the others in the formats of the v1.37 admission
// plugins (ResourceQuota's "failed quota", a webhook that cannot be called, LimitRanger).
func TestClassifyRejection(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		want RejectionClass
	}{
		{`pods "web-7d6c4d58c8-97mdd" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=1, limited: pods=1`, RejectQuota},
		{`admission webhook "deny.readyspan.dev" denied the request: Pods labelled readyspan.dev/deny are denied by the local cluster's webhook (value "yes")`, RejectWebhook},
		{`pods "web-7d6c4d58c8-2nl6h" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "app" must set securityContext.allowPrivilegeEscalation=false)`, RejectPodSecurity},
		{`pods "web-1" is forbidden: failed quota: compute: must specify limits.cpu for: app; requests.cpu for: app`, RejectQuota},
		{`Internal error occurred: failed calling webhook "inject.example.com": failed to call webhook: Post "https://inject.example.svc:443/mutate?timeout=10s": dial tcp 10.96.0.7:443: connect: connection refused`, RejectWebhook},
		{`pods "web-1" is forbidden: maximum cpu usage per Container is 1, but limit is 2`, RejectOther},
		{`pods "web-1" is forbidden: ValidatingAdmissionPolicy 'no-latest' with binding 'b' denied request: latest tag`, RejectOther},
		{"", RejectOther},
	} {
		if got := ClassifyRejection(tc.msg); got != tc.want {
			t.Errorf("ClassifyRejection(%q) = %s, want %s", tc.msg, got, tc.want)
		}
	}
	if RejectionLabel("not-a-class") != RejectOther || RejectionLabel(RejectQuota) != RejectQuota {
		t.Error("RejectionLabel does not bound the label")
	}
}

func TestBoundMessage(t *testing.T) {
	long := strings.Repeat("é", MaxRejectionMessage) // two bytes each
	got := BoundMessage(long)
	if len(got) > MaxRejectionMessage || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
		t.Errorf("BoundMessage: %d bytes, valid %v, suffix …: %v", len(got), utf8.ValidString(got), strings.HasSuffix(got, "…"))
	}
	if BoundMessage("short") != "short" {
		t.Error("a short message changed")
	}
}

// A rollout blocked then let through: one rollout.blocked span under the ReplicaSet's step, from
// the first refusal to the Pod that cleared it, with the refusal's attributes and events; the
// trace of the resumed rollout has its own ID and links to the blocked one.
func TestBuildRejections(t *testing.T) {
	t0 := time.Date(2026, 7, 21, 10, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	times := func(s float64) phases.Times {
		return phases.Times{{At: phases.InstantOf(at(s)), Source: phases.SourceEventName}}
	}
	r := &Rollout{
		Workload: Workload{Kind: Deployment, Name: "web", Namespace: "ns", UID: "3f0c8c4e-7f2a-4e8a-9a59-0d0f1c2b3a4d"},
		Kind:     KindCreate, Generation: 1, Replicas: 2, Outcome: OutcomeComplete, Attempt: 1,
		Resumes: TraceIDFor("3f0c8c4e-7f2a-4e8a-9a59-0d0f1c2b3a4d", 1),
		Start:   times(0), Complete: times(50),
		Steps: []Step{{Time: times(0.1), Up: true, Target: "web-5d8f", From: 0, To: 2}},
		Rejections: []Rejection{{Owner: "web-5d8f", Reason: "FailedCreate", Class: RejectQuota, Count: 7,
			Message: `pods "web-5d8f-x" is forbidden: exceeded quota: pods`, First: at(0.2), Last: at(40), Cleared: at(45)}},
	}
	tr := Build(r)
	if tr.TraceID == TraceIDFor(r.Workload.UID, 1) || tr.TraceID != AttemptTraceIDFor(r.Workload.UID, 1, 1) {
		t.Errorf("trace ID %s: want the resumed attempt's own", tr.TraceID)
	}
	var link bool
	for _, l := range tr.Root().Links() {
		link = link || l.TraceID == r.Resumes && l.SpanID == RootSpanIDFor(r.Workload.UID, 1, 0)
	}
	if !link {
		t.Error("no link to the blocked trace's root")
	}
	var blocked, step *phases.Span
	for i := range tr.Spans {
		switch tr.Spans[i].Name {
		case BlockedSpanName:
			blocked = &tr.Spans[i]
		case StepSpanName:
			step = &tr.Spans[i]
		}
	}
	if blocked == nil || step == nil || blocked.ParentSpanID != step.SpanID {
		t.Fatalf("blocked span %v under step %v: want it under the ReplicaSet's step", blocked, step)
	}
	if !blocked.Start.Equal(at(0.2)) || !blocked.End.Equal(at(45)) || blocked.Status == phases.StatusError {
		t.Errorf("blocked span %s..%s status %v: want 0.2 s..45 s (cleared), not an error", blocked.Start, blocked.End, blocked.Status)
	}
	if blocked.Attr(AttrRejectionCount) != int64(7) || blocked.Attr(AttrRejectionClass) != "quota" || blocked.Attr(AttrRejectionOwner) != "web-5d8f" {
		t.Errorf("blocked span attrs %v", blocked.Attrs)
	}
	if ev := blocked.Events(); len(ev) != 2 || !ev[0].Time.Equal(at(0.2)) || !ev[1].Time.Equal(at(40)) {
		t.Errorf("events %v: want the first (0.2 s) and latest (40 s) refusal", ev)
	}
	if !strings.Contains(tr.Summary.Sentence, "blocked 44.8 s by quota") {
		t.Errorf("sentence %q does not keep the blocked time", tr.Summary.Sentence)
	}

	// Still blocked at the end: the outcome, the error and the sentence say so.
	r.Outcome, r.Attempt, r.Resumes = OutcomeBlocked, 0, phases.TraceID{}
	r.Rejections[0].Cleared = time.Time{}
	r.Reason = r.Rejections[0].Words()
	r.Complete = times(30)
	tr = Build(r)
	root := tr.Root()
	if root.Status != phases.StatusError || root.StatusMessage != r.Reason || root.Attr(AttrOutcome) != "blocked" || root.Attr(AttrRejectionClass) != "quota" {
		t.Errorf("root %v %q %v", root.Status, root.StatusMessage, root.Attrs)
	}
	if want := "blocked (quota: pods \"web-5d8f-x\" is forbidden: exceeded quota: pods)"; !strings.Contains(tr.Summary.Sentence, want) {
		t.Errorf("sentence %q, want %q in it", tr.Summary.Sentence, want)
	}
}
