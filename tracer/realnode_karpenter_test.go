package tracer

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/readyspan/readyspan/node"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/rollout/tracker"
)

// The capture in testdata/real-node/karpenter was recorded with deploy/local/scripts/
// capture-karpenter.sh on the local cluster: Karpenter v1.15 with its KWOK provider provisions
// Nodes for a Deployment of three Pods that fit no existing node, then consolidates them when the
// Deployment is scaled to 2 (evicting a Pod: Underutilized) and deletes them at 0. The test below
// replays readyspan's recording of the whole cluster (the capture's watch.*.jsonl) and holds each Node's startup trace, each
// waiting Pod's wait and the replacement of the evicted Pod against what kubectl's watch streams
// and the Events in the capture state, read here without the tracer's parsing.

const karpenterDir = "testdata/real-node/karpenter"

// karpenterEvidence is what the capture's kubectl streams state.
type karpenterEvidence struct {
	claims map[string]*claimEvidence // by NodeClaim name
	nodes  map[string]*nodeEvidence  // by Node name
	// bound is each Pod's node and the scheduler's bind (its Scheduled eventTime), by Pod name.
	bound map[string]bindEvidence
	// nominated are the Pods Karpenter nominated a NodeClaim for; evicted the Pods it evicted,
	// with the cause its Event states.
	nominated map[string]bool
	evicted   map[string]string
}

type claimEvidence struct {
	uid, node                         string
	created                           time.Time
	launched, registered, initialized time.Time // each condition's lastTransitionTime, first seen True
}

type nodeEvidence struct {
	uid, claim     string // the NodeClaim that owns it
	created, ready time.Time
}

type bindEvidence struct {
	node string
	at   time.Time
}

// watchStream reads kubectl's --output-watch-events -o json stream: one JSON object after
// another.
func watchStream(t *testing.T, name string, each func(typ string, obj json.RawMessage)) {
	t.Helper()
	f, err := os.Open(filepath.Join(karpenterDir, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	for dec.More() {
		var ev struct {
			Type   string          `json:"type"`
			Object json.RawMessage `json:"object"`
		}
		if err := dec.Decode(&ev); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		each(ev.Type, ev.Object)
	}
}

type rawCondition struct {
	Type, Status       string
	LastTransitionTime time.Time `json:"lastTransitionTime"`
}

func readKarpenterEvidence(t *testing.T) *karpenterEvidence {
	ev := &karpenterEvidence{claims: map[string]*claimEvidence{}, nodes: map[string]*nodeEvidence{},
		bound: map[string]bindEvidence{}, nominated: map[string]bool{}, evicted: map[string]string{}}
	type meta struct {
		Name              string    `json:"name"`
		UID               string    `json:"uid"`
		CreationTimestamp time.Time `json:"creationTimestamp"`
		OwnerReferences   []struct{ Kind, Name string }
	}
	watchStream(t, "nodeclaims.watch.json", func(_ string, raw json.RawMessage) {
		var o struct {
			Metadata meta `json:"metadata"`
			Status   struct {
				NodeName   string         `json:"nodeName"`
				Conditions []rawCondition `json:"conditions"`
			} `json:"status"`
		}
		if err := json.Unmarshal(raw, &o); err != nil {
			t.Fatal(err)
		}
		c := ev.claims[o.Metadata.Name]
		if c == nil {
			c = &claimEvidence{uid: o.Metadata.UID, created: o.Metadata.CreationTimestamp}
			ev.claims[o.Metadata.Name] = c
		}
		if o.Status.NodeName != "" {
			c.node = o.Status.NodeName
		}
		for _, cond := range o.Status.Conditions {
			at := map[string]*time.Time{"Launched": &c.launched, "Registered": &c.registered, "Initialized": &c.initialized}[cond.Type]
			if at != nil && cond.Status == "True" && at.IsZero() {
				*at = cond.LastTransitionTime
			}
		}
	})
	watchStream(t, "nodes.watch.json", func(_ string, raw json.RawMessage) {
		var o struct {
			Metadata meta `json:"metadata"`
			Status   struct {
				Conditions []rawCondition `json:"conditions"`
			} `json:"status"`
		}
		if err := json.Unmarshal(raw, &o); err != nil {
			t.Fatal(err)
		}
		n := ev.nodes[o.Metadata.Name]
		if n == nil {
			n = &nodeEvidence{uid: o.Metadata.UID, created: o.Metadata.CreationTimestamp}
			ev.nodes[o.Metadata.Name] = n
		}
		for _, r := range o.Metadata.OwnerReferences {
			if r.Kind == "NodeClaim" {
				n.claim = r.Name
			}
		}
		for _, cond := range o.Status.Conditions {
			if cond.Type == "Ready" && cond.Status == "True" && n.ready.IsZero() {
				n.ready = cond.LastTransitionTime
			}
		}
	})
	var events struct {
		Items []struct {
			Reason         string `json:"reason"`
			Message        string `json:"message"`
			EventTime      string `json:"eventTime"`
			InvolvedObject struct {
				Kind, Name string
			} `json:"involvedObject"`
		} `json:"items"`
	}
	b, err := os.ReadFile(filepath.Join(karpenterDir, "events.karpenter-capture.list.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &events); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		pod := e.InvolvedObject.Name
		switch e.Reason {
		case "Scheduled":
			at, err := time.Parse(time.RFC3339Nano, e.EventTime)
			_, to, ok := strings.Cut(e.Message, " to ")
			if err != nil || !ok {
				t.Fatalf("Scheduled %s: %q at %q", pod, e.Message, e.EventTime)
			}
			ev.bound[pod] = bindEvidence{node: to, at: at}
		case "Nominated":
			ev.nominated[pod] = true
		case "Evicted":
			ev.evicted[pod] = strings.TrimPrefix(e.Message, "Evicted pod: ")
		}
	}
	if len(ev.claims) < 2 || len(ev.nominated) == 0 || len(ev.evicted) == 0 {
		t.Fatalf("the capture lacks what the test holds: %d NodeClaims, %d Pods nominated, %d evicted", len(ev.claims), len(ev.nominated), len(ev.evicted))
	}
	return ev
}

// withinSecondOf reports whether at lies in the whole second a condition states, or the watch's
// delivery after it: [s, s+1s+consistency slack].
func withinSecondOf(at, s time.Time) bool {
	return !at.Before(s) && at.Sub(s) <= time.Second+1500*time.Millisecond
}

// TestRealNodeKarpenter: Karpenter's Nodes on the local cluster, as the capture's own streams
// state them. Each NodeClaim's Node has one startup trace, keyed by the claim's UID, whose steps
// end in the second the NodeClaim's conditions and the Node's creation and Ready state; each Pod
// Karpenter nominated waited for the Node it was bound to, its wait ending by the scheduler's
// bind and covered by the node's steps with no gap or overlap, and linked to that Node's trace;
// the Pod that replaces the evicted one names Karpenter's cause and the node.
func TestRealNodeKarpenter(t *testing.T) {
	ev := readKarpenterEvidence(t)
	deltas, err := Kinds.LoadRecording(karpenterDir)
	if err != nil {
		t.Fatal(err)
	}
	pods := map[string]*phases.Trace{}
	nodes := map[string]*node.Trace{}
	var rollouts []*rollout.Trace
	c := New(Config{Backfill: true, Nodes: NodeSinkFunc(func(tr *node.Trace) { nodes[tr.Startup.Name] = tr }),
		Rollouts: tracker.SinkFunc(func(tr *rollout.Trace) { rollouts = append(rollouts, tr) })},
		SinkFunc(func(tr *phases.Trace) { pods[tr.Pod.Name] = tr }), nil, nil)
	for _, w := range Replay(c, deltas) {
		t.Errorf("replay warned: %s", w)
	}

	for name, cl := range ev.claims {
		tr := nodes[cl.node]
		if tr == nil {
			t.Errorf("NodeClaim %s (Node %q): no startup trace", name, cl.node)
			continue
		}
		if tr.TraceID != phases.TraceIDFor(cl.uid) || tr.Summary.Outcome != node.OutcomeReady || tr.Summary.Provisioner != phases.ServiceKarpenter {
			t.Errorf("node %s: trace %s %s %q, want the claim's UID, ready, karpenter", cl.node, tr.TraceID, tr.Summary.Outcome, tr.Summary.Provisioner)
		}
		n := ev.nodes[cl.node]
		want := map[string]time.Time{node.SpanLaunch: cl.launched, node.SpanInstance: n.created, node.SpanRegistration: cl.registered,
			node.SpanKubeletReady: n.ready, node.SpanInitialization: cl.initialized}
		for _, sp := range tr.Spans[1:] {
			if s, ok := want[sp.Name]; ok && !withinSecondOf(sp.End, s) {
				t.Errorf("node %s: %s ends at %s, the capture states %s", cl.node, sp.Name, sp.End.Format(time.StampMilli), s.Format(time.Stamp))
			}
		}
		if !withinSecondOf(tr.Root().Start, cl.created) {
			t.Errorf("node %s: starts at %s, its NodeClaim was created at %s", cl.node, tr.Root().Start.Format(time.StampMilli), cl.created.Format(time.Stamp))
		}
	}

	waited := 0
	for pod := range ev.nominated {
		tr, b := pods[pod], ev.bound[pod]
		if tr == nil || b.node == "" {
			t.Errorf("Pod %s: trace %v, bound to %q", pod, tr != nil, b.node)
			continue
		}
		w := tr.Find(phases.SpanSchedulingWaitingForNode)
		if w == nil {
			t.Errorf("Pod %s: no wait for its node", pod)
			continue
		}
		waited++
		if w.Attr(phases.AttrNodeName) != b.node || w.End.After(b.at) {
			t.Errorf("Pod %s: waited for %v until %s; bound to %s at %s", pod, w.Attr(phases.AttrNodeName), w.End.Format(time.StampMicro), b.node, b.at.Format(time.StampMicro))
		}
		claim := ev.claims[ev.nodes[b.node].claim]
		if l := w.Links(); claim == nil || len(l) != 1 || l[0].TraceID != phases.TraceIDFor(claim.uid) {
			t.Errorf("Pod %s: links %v, want the startup trace of %s", pod, l, b.node)
		}
		at, steps := w.Start, 0
		for _, sp := range tr.Spans {
			if sp.ParentSpanID != w.SpanID {
				continue
			}
			steps++
			if !sp.Start.Equal(at) || sp.End.Before(sp.Start) {
				t.Errorf("Pod %s: %s %s → %s after the step before ended at %s", pod, sp.Name, sp.Start.Format(time.StampMicro), sp.End.Format(time.StampMicro), at.Format(time.StampMicro))
			}
			at = sp.End
		}
		if steps < 4 || !at.Equal(w.End) {
			t.Errorf("Pod %s: %d steps ending at %s, the wait at %s", pod, steps, at.Format(time.StampMicro), w.End.Format(time.StampMicro))
		}
	}
	if waited == 0 {
		t.Fatal("no Pod waited for a node")
	}
	// The Deployment's rollout says its Pods waited for new nodes.
	var created *rollout.Trace
	for _, r := range rollouts {
		if r.Rollout.Kind == rollout.KindCreate {
			created = r
		}
	}
	if want := fmt.Sprintf("%d Pods waited for new nodes", waited); created == nil || !strings.Contains(created.Summary.Sentence, want) {
		t.Errorf("the Deployment's rollout (found: %v) does not say %q", created != nil, want)
		if created != nil {
			t.Logf("its sentence: %s", created.Summary.Sentence)
		}
	}

	for victim, cause := range ev.evicted {
		var by *phases.Trace
		for _, tr := range pods {
			if tr.Root().Attr(phases.AttrReplacesPod) == victim {
				by = tr
			}
		}
		if by == nil {
			t.Errorf("no trace of a Pod replacing %s", victim)
			continue
		}
		root := by.Root()
		if root.Attr(phases.AttrReplacesDisruption) != cause || root.Attr(phases.AttrReplacesDisruptedBy) != "karpenter" ||
			root.Attr(phases.AttrReplacesNode) != ev.bound[victim].node {
			t.Errorf("%s replaces %s: disruption %v by %v from %v; Karpenter's Event says %q, the Pod ran on %s", by.Pod.Name, victim,
				root.Attr(phases.AttrReplacesDisruption), root.Attr(phases.AttrReplacesDisruptedBy), root.Attr(phases.AttrReplacesNode), cause, ev.bound[victim].node)
		}
	}
}
