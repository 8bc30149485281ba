package tracer

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/rollout/tracker"
	"github.com/readyspan/readyspan/tracecontext"
	"github.com/readyspan/readyspan/watch"
)

// The contexts the tests write, as a CI job's SDK would (the KEP's example and another).
const (
	ctxA = "00-4bf92f3577b34da6a3ce929d0e0e4737-00f067aa0ba902b7-01"
	ctxB = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
)

// ctxCounter counts the values refused, as the Prometheus exporter does.
type ctxCounter struct {
	noStats
	ignored map[tracecontext.Reason]int
}

func (c *ctxCounter) TraceContextIgnored(r tracecontext.Reason) { c.ignored[r]++ }

// wavesDeltas is the rolling-update-waves capture (four Deployments each created, then updated
// to generation 2) as the API sent it, the objects copied so a test may annotate them.
func wavesDeltas(t *testing.T) []watch.Delta {
	t.Helper()
	deltas, err := Kinds.LoadRecording(filepath.Join("testdata", "real-node", "rolling-update-waves"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range deltas {
		if deltas[i].Object != nil {
			deltas[i].Object = deltas[i].Object.DeepCopyObject()
		}
	}
	return deltas
}

const annotated = "web-s1u0" // the Deployment the tests annotate

// annotateDeployment sets the Deployment's traceparent on each of its versions value says
// (generation, index among its versions) a value for; "" leaves a version without.
func annotateDeployment(deltas []watch.Delta, value func(gen int64, n int) string) {
	n := 0
	for i := range deltas {
		d, ok := deltas[i].Object.(*appsv1.Deployment)
		if !ok || d.Name != annotated {
			continue
		}
		if v := value(d.Generation, n); v != "" {
			setAnnotation(&d.ObjectMeta.Annotations, v)
		}
		n++
	}
}

func setAnnotation(m *map[string]string, v string) {
	if *m == nil {
		*m = map[string]string{}
	}
	(*m)[tracecontext.Annotation] = v
}

// annotateAfterUpdate is kubectl apply, then kubectl annotate: a version of the Deployment
// like the one that started generation 2, with the annotation, received after later.
func annotateAfterUpdate(t *testing.T, deltas []watch.Delta, value string, after time.Duration) []watch.Delta {
	t.Helper()
	for i := range deltas {
		d, ok := deltas[i].Object.(*appsv1.Deployment)
		if !ok || d.Name != annotated || d.Generation != 2 {
			continue
		}
		c := d.DeepCopy()
		setAnnotation(&c.Annotations, value)
		at := deltas[i].Recv.Add(after)
		j := i + 1
		for j < len(deltas) && deltas[j].Recv.Before(at) {
			j++
		}
		annotate := watch.Delta{Resource: deltas[i].Resource, Type: watch.Modified, Object: c, Recv: at}
		return append(deltas[:j], append([]watch.Delta{annotate}, deltas[j:]...)...)
	}
	t.Fatal("no generation 2 of the Deployment in the capture")
	return nil
}

// replayWith replays deltas as `readyspan replay` does, with the counter and cfg's setting.
func replayWith(deltas []watch.Delta, counter *ctxCounter, ignore bool) ([]*phases.Trace, []*rollout.Trace) {
	var pods []*phases.Trace
	var rollouts []*rollout.Trace
	c := New(Config{Backfill: true, IgnoreTraceContext: ignore, Rollouts: tracker.SinkFunc(func(r *rollout.Trace) { rollouts = append(rollouts, r) })},
		SinkFunc(func(tr *phases.Trace) { pods = append(pods, tr) }), counter, nil)
	Replay(c, deltas)
	return pods, rollouts
}

// rolloutOf is the annotated Deployment's rollout of generation gen.
func rolloutOf(t *testing.T, rollouts []*rollout.Trace, gen int64) *rollout.Trace {
	t.Helper()
	for _, r := range rollouts {
		if r.Rollout.Workload.Name == annotated && r.Rollout.Generation == gen {
			return r
		}
	}
	t.Fatalf("no rollout of generation %d of %s", gen, annotated)
	return nil
}

// contextLinks are a span's links to a trace context.
func contextLinks(s *phases.Span) []phases.Link {
	var out []phases.Link
	for _, l := range s.Links() {
		if l.Attrs[0].Key == phases.AttrLinkRelation && l.Attrs[0].Value == phases.LinkTraceContext {
			out = append(out, l)
		}
	}
	return out
}

func parsed(t *testing.T, v string) tracecontext.Context {
	t.Helper()
	c, _, ok := tracecontext.Parse(v)
	if !ok {
		t.Fatalf("%s refused", v)
	}
	return c
}

// wantChild holds a rollout to be the child of the context v: in its trace, under its span,
// with no link to it.
func wantChild(t *testing.T, r *rollout.Trace, v string) {
	t.Helper()
	c := parsed(t, v)
	root := r.Root()
	if r.TraceID != phases.TraceID(c.TraceID) || root.ParentSpanID != phases.SpanID(c.SpanID) {
		t.Errorf("generation %d: trace %s parent %s, want the child of %s", r.Rollout.Generation, r.TraceID, root.ParentSpanID, v)
	}
	if root.Attr(phases.AttrTraceContextRelation) != phases.TraceContextChild || root.Attr(phases.AttrTraceContextSource) != phases.TraceContextWorkload {
		t.Errorf("generation %d: relation %v source %v", r.Rollout.Generation, root.Attr(phases.AttrTraceContextRelation), root.Attr(phases.AttrTraceContextSource))
	}
	if len(contextLinks(root)) != 0 {
		t.Errorf("generation %d: a child that links to its parent too", r.Rollout.Generation)
	}
}

// wantLinked holds a rollout to keep its own trace and link to the context v.
func wantLinked(t *testing.T, r *rollout.Trace, v string) {
	t.Helper()
	c := parsed(t, v)
	root := r.Root()
	own := rollout.AttemptTraceIDFor(r.Rollout.Workload.UID, r.Rollout.Generation, r.Rollout.Attempt)
	if r.TraceID != own || !root.ParentSpanID.IsZero() {
		t.Errorf("generation %d: trace %s parent %s, want its own trace %s as a root", r.Rollout.Generation, r.TraceID, root.ParentSpanID, own)
	}
	ls := contextLinks(root)
	if len(ls) != 1 || ls[0].TraceID != phases.TraceID(c.TraceID) || ls[0].SpanID != phases.SpanID(c.SpanID) {
		t.Errorf("generation %d: links %v, want one to %s", r.Rollout.Generation, ls, v)
	}
	if root.Attr(phases.AttrTraceContextRelation) != phases.TraceContextLink {
		t.Errorf("generation %d: relation %v", r.Rollout.Generation, root.Attr(phases.AttrTraceContextRelation))
	}
}

// wantNone holds a rollout to be as without any context.
func wantNone(t *testing.T, r *rollout.Trace) {
	t.Helper()
	own := rollout.AttemptTraceIDFor(r.Rollout.Workload.UID, r.Rollout.Generation, r.Rollout.Attempt)
	if root := r.Root(); r.TraceID != own || !root.ParentSpanID.IsZero() || len(contextLinks(root)) != 0 || root.Attr(phases.AttrTraceContextRelation) != nil {
		t.Errorf("generation %d: joined to a context it was not written for", r.Rollout.Generation)
	}
}

// wantPodsFollow holds every new Pod of the rollout to keep its own trace ID (its UID), link to
// the context v from its root (source as given), and to the rollout's trace as the rollout
// records it.
func wantPodsFollow(t *testing.T, r *rollout.Trace, pods []*phases.Trace, v, source string) {
	t.Helper()
	c := parsed(t, v)
	byUID := map[string]*phases.Trace{}
	for _, p := range pods {
		byUID[p.Pod.UID] = p
	}
	if len(r.Rollout.NewPods) == 0 {
		t.Fatal("the rollout made no Pods: the test would prove nothing")
	}
	for _, np := range r.Rollout.NewPods {
		p := byUID[np.UID]
		if p == nil {
			t.Errorf("Pod %s: no trace", np.Name)
			continue
		}
		if p.TraceID != phases.TraceIDFor(np.UID) {
			t.Errorf("Pod %s: trace %s, not its UID", np.Name, p.TraceID)
		}
		ls := contextLinks(p.Root())
		if len(ls) != 1 || ls[0].TraceID != phases.TraceID(c.TraceID) || ls[0].SpanID != phases.SpanID(c.SpanID) {
			t.Errorf("Pod %s: context links %v, want one to %s", np.Name, ls, v)
		}
		if got := p.Root().Attr(phases.AttrTraceContextSource); got != source {
			t.Errorf("Pod %s: source %v, want %s", np.Name, got, source)
		}
		back := false
		for _, l := range p.Root().Links() {
			back = back || l.TraceID == r.TraceID && l.SpanID == r.Root().SpanID
		}
		if !back {
			t.Errorf("Pod %s does not link to its rollout's trace %s", np.Name, r.TraceID)
		}
	}
}

// The belonging rule on the versions of a real capture's Deployment: a context new with the
// write that starts a rollout, or written while it runs, makes the rollout its child; one carried
// over from before is only linked; the Pods follow by link.
func TestTraceContextBelongs(t *testing.T) {
	t.Run("in the manifest of the update", func(t *testing.T) {
		deltas := wavesDeltas(t)
		annotateDeployment(deltas, func(gen int64, _ int) string { return map[int64]string{2: ctxA}[gen] })
		pods, rollouts := replayWith(deltas, &ctxCounter{ignored: map[tracecontext.Reason]int{}}, false)
		wantNone(t, rolloutOf(t, rollouts, 1))
		r := rolloutOf(t, rollouts, 2)
		wantChild(t, r, ctxA)
		wantPodsFollow(t, r, pods, ctxA, phases.TraceContextWorkload)
	})
	t.Run("in the manifest since the create", func(t *testing.T) {
		deltas := wavesDeltas(t)
		annotateDeployment(deltas, func(int64, int) string { return ctxA })
		pods, rollouts := replayWith(deltas, &ctxCounter{ignored: map[tracecontext.Reason]int{}}, false)
		wantChild(t, rolloutOf(t, rollouts, 1), ctxA)
		r := rolloutOf(t, rollouts, 2) // GitOps applying the same manifest with a new image
		wantLinked(t, r, ctxA)
		wantPodsFollow(t, r, pods, ctxA, phases.TraceContextWorkload)
	})
	t.Run("a new value with the update", func(t *testing.T) {
		deltas := wavesDeltas(t)
		annotateDeployment(deltas, func(gen int64, _ int) string { return map[int64]string{1: ctxA, 2: ctxB}[gen] })
		_, rollouts := replayWith(deltas, &ctxCounter{ignored: map[tracecontext.Reason]int{}}, false)
		wantChild(t, rolloutOf(t, rollouts, 1), ctxA)
		wantChild(t, rolloutOf(t, rollouts, 2), ctxB)
	})
	t.Run("kubectl apply, then kubectl annotate", func(t *testing.T) {
		deltas := annotateAfterUpdate(t, wavesDeltas(t), ctxA, 200*time.Millisecond)
		pods, rollouts := replayWith(deltas, &ctxCounter{ignored: map[tracecontext.Reason]int{}}, false)
		wantNone(t, rolloutOf(t, rollouts, 1))
		r := rolloutOf(t, rollouts, 2)
		wantChild(t, r, ctxA)
		wantPodsFollow(t, r, pods, ctxA, phases.TraceContextWorkload)
	})
	t.Run("annotated after its Pods' traces referred to the rollout", func(t *testing.T) {
		// A minute after the update: the rollout's Pods were Ready long before, their traces
		// link to the rollout's own trace, which it keeps; the context is linked.
		deltas := annotateAfterUpdate(t, wavesDeltas(t), ctxA, 12*time.Second)
		_, rollouts := replayWith(deltas, &ctxCounter{ignored: map[tracecontext.Reason]int{}}, false)
		r := rolloutOf(t, rollouts, 2)
		if r.Rollout.Outcome != rollout.OutcomeComplete {
			t.Fatalf("outcome %s", r.Rollout.Outcome)
		}
		wantLinked(t, r, ctxA)
	})
	t.Run("a Pod's own context, the first it carried", func(t *testing.T) {
		// The Pod created with one context; from its binding on, a scheduler's own (KEP-5927).
		const scheduler = "00-33333333333333333333333333333333-4444444444444444-01"
		deltas := annotateAfterUpdate(t, wavesDeltas(t), ctxA, 200*time.Millisecond)
		for i := range deltas {
			if p, ok := deltas[i].Object.(*corev1.Pod); ok && strings.HasPrefix(p.Name, annotated+"-") {
				v := ctxB
				if p.Spec.NodeName != "" {
					v = scheduler
				}
				setAnnotation(&p.Annotations, v)
			}
		}
		pods, rollouts := replayWith(deltas, &ctxCounter{ignored: map[tracecontext.Reason]int{}}, false)
		r := rolloutOf(t, rollouts, 2)
		wantChild(t, r, ctxA)
		wantPodsFollow(t, r, pods, ctxB, phases.TraceContextPod)
	})
}

// Hostile and malformed values leave every trace as it was without them, and each value is
// counted once per object, by reason, however many versions carry it; with --trace-context=off
// even a valid one is not read.
func TestTraceContextIgnored(t *testing.T) {
	basePods, baseRollouts := replayWith(wavesDeltas(t), &ctxCounter{ignored: map[tracecontext.Reason]int{}}, false)
	tests := []struct {
		name   string
		value  string
		ignore bool
		want   map[tracecontext.Reason]int
	}{
		{"uppercase", strings.ToUpper(ctxA), false, map[tracecontext.Reason]int{tracecontext.ReasonMalformed: 0}},
		{"version ff", "ff" + ctxA[2:], false, map[tracecontext.Reason]int{tracecontext.ReasonVersion: 0}},
		{"zero trace ID", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", false, map[tracecontext.Reason]int{tracecontext.ReasonZeroID: 0}},
		{"a megabyte", ctxA + strings.Repeat("-\x1b[2J", 1<<18), false, map[tracecontext.Reason]int{tracecontext.ReasonTooLong: 0}},
		{"terminal escapes", "00-\x1b]8;;http://x\x07" + ctxA[5:], false, map[tracecontext.Reason]int{tracecontext.ReasonMalformed: 0}},
		{"valid, but off", ctxA, true, map[tracecontext.Reason]int{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			deltas := wavesDeltas(t)
			// The Deployment from its creation, and each of its Pods: counted once each.
			annotateDeployment(deltas, func(int64, int) string { return tt.value })
			pods := map[string]bool{}
			for i := range deltas {
				if p, ok := deltas[i].Object.(*corev1.Pod); ok && strings.HasPrefix(p.Name, annotated+"-") {
					setAnnotation(&p.Annotations, tt.value)
					pods[string(p.UID)] = true
				}
			}
			for r := range tt.want {
				tt.want[r] = 1 + len(pods)
			}
			// As the informers would hold them: through Transform (bounded).
			for i := range deltas {
				if deltas[i].Object != nil {
					o, err := Kinds.Transform(deltas[i].Object)
					if err != nil {
						t.Fatal(err)
					}
					deltas[i].Object = o.(runtime.Object)
				}
			}
			counter := &ctxCounter{ignored: map[tracecontext.Reason]int{}}
			gotPods, gotRollouts := replayWith(deltas, counter, tt.ignore)
			if !reflect.DeepEqual(counter.ignored, tt.want) {
				t.Errorf("counted %v, want %v (%d Pods)", counter.ignored, tt.want, len(pods))
			}
			if !reflect.DeepEqual(gotRollouts, baseRollouts) {
				t.Error("the rollouts' traces differ from those without the annotation")
			}
			if !reflect.DeepEqual(gotPods, basePods) {
				t.Error("the Pods' traces differ from those without the annotation")
			}
		})
	}
}

// A bare Pod with a context: its root links to it, and its trace ID stays its UID (never the
// context's child: restarts, replicas and the replacement links rely on the UID).
func TestTraceContextBarePod(t *testing.T) {
	deltas := wavesDeltas(t)
	const bare = "web-s2u0-"
	uids := map[string]bool{}
	for i := range deltas {
		if p, ok := deltas[i].Object.(*corev1.Pod); ok && strings.HasPrefix(p.Name, bare) {
			p.OwnerReferences = nil // as if created by a client, not by a ReplicaSet
			setAnnotation(&p.Annotations, ctxB)
			uids[string(p.UID)] = true
		}
	}
	pods, _ := replayWith(deltas, &ctxCounter{ignored: map[tracecontext.Reason]int{}}, false)
	c := parsed(t, ctxB)
	seen := 0
	for _, p := range pods {
		if !uids[p.Pod.UID] {
			continue
		}
		seen++
		root := p.Root()
		if p.Pod.Root != phases.RootBarePod {
			t.Errorf("Pod %s: root kind %s, not a bare Pod", p.Pod.Name, p.Pod.Root)
		}
		if p.TraceID != phases.TraceIDFor(p.Pod.UID) || !root.ParentSpanID.IsZero() {
			t.Errorf("Pod %s: trace %s parent %s, want its UID's trace as a root", p.Pod.Name, p.TraceID, root.ParentSpanID)
		}
		ls := contextLinks(root)
		if len(ls) != 1 || ls[0].TraceID != phases.TraceID(c.TraceID) || ls[0].SpanID != phases.SpanID(c.SpanID) {
			t.Errorf("Pod %s: context links %v", p.Pod.Name, ls)
		}
		if root.Attr(phases.AttrTraceContextSource) != phases.TraceContextPod || root.Attr(phases.AttrTraceContextRelation) != phases.TraceContextLink {
			t.Errorf("Pod %s: source %v relation %v", p.Pod.Name, root.Attr(phases.AttrTraceContextSource), root.Attr(phases.AttrTraceContextRelation))
		}
	}
	if seen == 0 || seen != len(uids) {
		t.Fatalf("%d of the %d bare Pods traced", seen, len(uids))
	}
}

// A rollout superseded links to its successor's trace: the context's when the successor is its
// child. The successor's trace ID is fixed from then on (the superseded rollout's link must not
// point at a trace that never exists), so a context written for it after that does not replace
// its parent.
func TestTraceContextSuperseded(t *testing.T) {
	const ctxC = "00-11111111111111111111111111111111-2222222222222222-01"
	deltas := wavesDeltas(t)
	// Generation 3, with a new template and its own context, 2 s after generation 2: the update
	// still rolls out, so generation 3 supersedes it. Then another context is written for it.
	deltas = withVersion(t, deltas, 2*time.Second, func(d *appsv1.Deployment) {
		d.Generation = 3
		d.Annotations["readyspan.dev/template-hash"] += "-3" // as Transform keeps a new template's signature
		setAnnotation(&d.Annotations, ctxB)
	})
	deltas = withVersion(t, deltas, 2500*time.Millisecond, func(d *appsv1.Deployment) {
		d.Generation = 3
		d.Annotations["readyspan.dev/template-hash"] += "-3"
		setAnnotation(&d.Annotations, ctxC)
	})
	_, rollouts := replayWith(deltas, &ctxCounter{ignored: map[tracecontext.Reason]int{}}, false)
	old, next := rolloutOf(t, rollouts, 2), rolloutOf(t, rollouts, 3)
	if old.Rollout.Outcome != rollout.OutcomeSuperseded {
		t.Fatalf("generation 2: outcome %s, want superseded", old.Rollout.Outcome)
	}
	if old.Rollout.SupersededBy != next.TraceID {
		t.Errorf("generation 2 links to %s as its successor, generation 3's trace is %s", old.Rollout.SupersededBy, next.TraceID)
	}
	wantChild(t, next, ctxB)
	found := false
	for _, l := range next.Root().Links() {
		found = found || l.TraceID == phases.TraceID(parsed(t, ctxC).TraceID)
	}
	if found {
		t.Error("the context written after the trace ID was handed out is taken too")
	}
}

// withVersion inserts a version of the annotated Deployment, made from its generation 2 by
// change, received after later than generation 2.
func withVersion(t *testing.T, deltas []watch.Delta, after time.Duration, change func(*appsv1.Deployment)) []watch.Delta {
	t.Helper()
	for i := range deltas {
		d, ok := deltas[i].Object.(*appsv1.Deployment)
		if !ok || d.Name != annotated || d.Generation != 2 {
			continue
		}
		c := d.DeepCopy()
		change(c)
		at := deltas[i].Recv.Add(after)
		j := i + 1
		for j < len(deltas) && deltas[j].Recv.Before(at) {
			j++
		}
		v := watch.Delta{Resource: deltas[i].Resource, Type: watch.Modified, Object: c, Recv: at}
		return append(deltas[:j], append([]watch.Delta{v}, deltas[j:]...)...)
	}
	t.Fatal("no generation 2 of the Deployment in the capture")
	return nil
}
