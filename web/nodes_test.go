package web

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/readyspan/readyspan/internal/captures"
	"github.com/readyspan/readyspan/node"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/rollout/tracker"
	"github.com/readyspan/readyspan/tracer"
)

// karpenterStartup is a Node's startup as tracer/testdata/real-node/karpenter holds one
// (NodeClaim default-27qkv and its KWOK Node): each boundary its object's whole-second stamp and
// readyspan's receive time, with one DaemonSet Pod and two Pods that waited for it. uid tells
// startups apart; n moves it n minutes on.
func karpenterStartup(uid string, n int) *node.Startup {
	base := time.Date(2026, 12, 5, 9, 43, 47, 0, time.UTC).Add(time.Duration(n) * time.Minute)
	at := func(status, watchMs int) phases.Times {
		var ts phases.Times
		ts.Add(base.Add(time.Duration(status)*time.Second), phases.SourceStatus)
		ts.Add(base.Add(time.Duration(watchMs)*time.Millisecond), phases.SourceWatch)
		return ts
	}
	s := &node.Startup{
		Name: "kwok-default-27qkv-devourerink-2-xtckf382xe-4024404070", UID: "5cda1e64-ae6b-4b50-83e0-284136e51b31-" + uid,
		Provisioner: phases.ServiceKarpenter,
		Claim: &phases.NodeClaimSeen{Name: "default-27qkv", UID: "b3014ac8-727a-4a1b-954f-2ae721fffcf0-" + uid, NodePool: "default",
			Created: at(0, 180), Launched: at(0, 910), Registered: at(5, 5_620), Initialized: at(11, 11_340)},
		Created: at(5, 5_090), Ready: at(9, 9_210), NetworkReady: at(5, 5_090), TaintsRemoved: at(10, 10_050),
		DaemonPods: []node.DaemonPod{{PodRef: phases.PodRef{Namespace: "kube-system", Name: "kindnet-7xq2p", UID: "dp-" + uid},
			DaemonSet: "kindnet", Ready: at(12, 12_400)}},
		Waiters: []phases.PodRef{{Namespace: "default", Name: "inflate-6d8f7c9b5d-2x7qz", UID: "w1-" + uid},
			{Namespace: "default", Name: "inflate-6d8f7c9b5d-9kq4m", UID: "w2-" + uid}},
		Outcome: node.OutcomeReady,
	}
	return s
}

func nodeTrace(uid string, n int) *node.Trace { return node.Build(karpenterStartup(uid, n)) }

// A node's startup is kept as a Pod's is: listed newest first, replaced by a trace of the same
// ID (a new leader exports it again), bounded by its own count and by the byte budget it shares
// with Pods and rollouts, whose oldest trace of any kind leaves first.
func TestRingNodes(t *testing.T) {
	r := NewRing(RingConfig{MaxNodes: 2})
	r.AddNode(nodeTrace("a", 0))
	r.AddNode(nodeTrace("b", 1))
	again := karpenterStartup("a", 0)
	again.Outcome, again.Reason, again.End = node.OutcomeStuck, "waiting for its DaemonSet Pods", time.Date(2026, 12, 5, 9, 53, 47, 0, time.UTC)
	r.AddNode(node.Build(again))
	ns := r.Nodes()
	if len(ns) != 2 || ns[0].ID != nodeTrace("b", 1).TraceID.String() || ns[1].Outcome != "stuck" || ns[1].Reason != again.Reason {
		t.Fatalf("after a re-export of a: %+v", ns)
	}
	// a, exported again, is newer than b: b is the oldest.
	r.AddNode(nodeTrace("c", 2))
	if ns := r.Nodes(); len(ns) != 2 || ns[0].ID != nodeTrace("c", 2).TraceID.String() || ns[1].ID != nodeTrace("a", 0).TraceID.String() {
		t.Errorf("MaxNodes 2: %+v, want c and a", ns)
	}
	if r.Node(nodeTrace("b", 1).TraceID.String()) != nil {
		t.Error("the oldest node is still served")
	}
	if want := nodeEntry(node.Build(again)).size + nodeEntry(nodeTrace("c", 2)).size; r.Bytes() != want {
		t.Errorf("Bytes() = %d, the nodes held add up to %d", r.Bytes(), want)
	}

	// One budget for the three kinds: a Pod, a node, two Pods; the first Pod leaves, then a
	// second node, and the first node (older than the Pods left) leaves.
	shared := NewRing(RingConfig{MaxBytes: podEntry(podTrace("p2", 1)).size + podEntry(podTrace("p3", 2)).size + nodeEntry(nodeTrace("n", 0)).size})
	shared.AddPod(podTrace("p1", 0))
	shared.AddNode(nodeTrace("n", 0))
	shared.AddPod(podTrace("p2", 1))
	shared.AddPod(podTrace("p3", 2))
	if _, np := shared.Len(); np != 2 || len(shared.Nodes()) != 1 || shared.Pod("p1") != nil {
		t.Errorf("%d Pods, %d nodes; want p1 gone, the node kept", np, len(shared.Nodes()))
	}
	shared.AddNode(nodeTrace("m", 3))
	if ns := shared.Nodes(); len(ns) != 1 || ns[0].ID != nodeTrace("m", 3).TraceID.String() {
		t.Errorf("a node over the budget: the older node should leave first, held %+v", ns)
	}
}

// The node list and a node's view as the page reads them: the list line's fields, every span
// with its bounds' sources and a category the page has a fill for, the DaemonSet Pod named, and
// the Pods that waited, the ones whose traces are held marked so. A node not held is a 404, as
// a Pod is, and another host's request is refused.
func TestNodeAPI(t *testing.T) {
	tr := nodeTrace("a", 0)
	ring := NewRing(RingConfig{})
	ring.AddNode(tr)
	ring.AddPod(podTrace("w1-a", 0)) // the first waiter is held, the second is not
	srv := httptest.NewServer(NewServer(ring, ServerConfig{}))
	defer srv.Close()

	var list []NodeSummary
	get(t, srv, "/api/v1/nodes?namespace=prod", http.StatusOK, &list)
	id := tr.TraceID.String()
	want := NodeSummary{ID: id, Name: "kwok-default-27qkv-devourerink-2-xtckf382xe-4024404070", Provisioner: "karpenter",
		NodeClaim: "default-27qkv", NodePool: "default", Outcome: "ready", Start: "2026-12-05T09:43:47.18Z", DurationMs: 12_220,
		Waiters: 2}
	if len(list) != 1 || list[0] != want {
		t.Fatalf("GET /api/v1/nodes: %+v\nwant %+v", list, want)
	}

	var v NodeView
	get(t, srv, "/api/v1/nodes/"+id, http.StatusOK, &v)
	if v.NodeSummary != want || len(v.Spans) != len(tr.Spans) {
		t.Fatalf("view: %+v with %d spans, want %d", v.NodeSummary, len(v.Spans), len(tr.Spans))
	}
	cats := map[string]bool{"root": true}
	for _, c := range NodeCategories {
		cats[c] = true
	}
	steps := map[string]string{}
	for _, s := range v.Spans {
		if s.SourceStart == "" || s.SourceEnd == "" || s.PrecisionStart == "" || s.PrecisionEnd == "" {
			t.Errorf("span %s: no bound's source or precision: %+v", s.Name, s)
		}
		if !cats[s.Cat] {
			t.Errorf("span %s: category %q the page does not draw", s.Name, s.Cat)
		}
		steps[s.Name] = s.Cat
		if s.Name == node.SpanDaemonPod && s.Label != node.SpanDaemonPod+" kube-system/kindnet-7xq2p" {
			t.Errorf("the DaemonSet Pod's row is labelled %q", s.Label)
		}
	}
	for name, cat := range map[string]string{node.SpanLaunch: CatNodeProvisioner, node.SpanInstance: CatNodeInstance,
		node.SpanKubeletReady: "kubelet", node.SpanStartupTaints: CatNodeAgents, node.SpanInitialization: CatNodeProvisioner} {
		if steps[name] != cat {
			t.Errorf("step %s: category %q, want %q (steps %v)", name, steps[name], cat, steps)
		}
	}
	wantWaited := []WaiterView{
		{UID: "w1-a", Pod: "default/inflate-6d8f7c9b5d-2x7qz", TraceID: phases.TraceIDFor("w1-a").String(), Held: true},
		{UID: "w2-a", Pod: "default/inflate-6d8f7c9b5d-9kq4m", TraceID: phases.TraceIDFor("w2-a").String()},
	}
	if len(v.Waited) != 2 || v.Waited[0] != wantWaited[0] || v.Waited[1] != wantWaited[1] {
		t.Errorf("waited: %+v\nwant %+v", v.Waited, wantWaited)
	}

	get(t, srv, "/api/v1/nodes/"+phases.TraceIDFor("nothing").String(), http.StatusNotFound, nil)
	req := httptest.NewRequest(http.MethodGet, "/api/v1/nodes", nil)
	req.Host = "attacker.example"
	rec := httptest.NewRecorder()
	NewServer(ring, ServerConfig{}).ServeHTTP(rec, req)
	if rec.Code != http.StatusMisdirectedRequest {
		t.Errorf("GET /api/v1/nodes from attacker.example: %d", rec.Code)
	}
}

// A node's strings come from the cluster (its name, its NodeClaim's and NodePool's, a DaemonSet
// Pod's): the API sends markup in them as JSON escapes, never as markup, as it does a Pod's.
func TestNodeAPIHostileStrings(t *testing.T) {
	s := karpenterStartup("h", 0)
	markup := `<img src=x onerror="alert(1)"></script>`
	s.Name, s.Claim.Name, s.Claim.NodePool, s.DaemonPods[0].Name, s.Waiters[0].Name = markup, markup, markup, markup, markup
	ring := NewRing(RingConfig{})
	tr := node.Build(s)
	ring.AddNode(tr)
	srv := httptest.NewServer(NewServer(ring, ServerConfig{}))
	defer srv.Close()
	for _, path := range []string{"/api/v1/nodes", "/api/v1/nodes/" + tr.TraceID.String()} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		var body bytes.Buffer
		_, _ = body.ReadFrom(resp.Body)
		resp.Body.Close()
		if strings.Contains(body.String(), "<img") || strings.Contains(body.String(), "</script") ||
			!strings.Contains(body.String(), `\u003cimg src=x onerror=\"alert(1)\"\u003e`) || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("GET %s (%s): %.300s", path, resp.Header.Get("Content-Type"), body.String())
		}
	}
}

// replayKarpenter rebuilds the real Karpenter capture's Pod and node traces.
func replayKarpenter(t *testing.T) ([]*phases.Trace, []*node.Trace) {
	t.Helper()
	deltas, err := tracer.Kinds.LoadRecording(captures.Path("karpenter"))
	if err != nil {
		t.Fatal(err)
	}
	var pods []*phases.Trace
	var nodes []*node.Trace
	c := tracer.New(tracer.Config{Backfill: true, Rollouts: tracker.SinkFunc(func(*rollout.Trace) {}),
		Nodes: tracer.NodeSinkFunc(func(tr *node.Trace) { nodes = append(nodes, tr) })},
		tracer.SinkFunc(func(tr *phases.Trace) { pods = append(pods, tr) }), nil, nil)
	tracer.Replay(c, deltas)
	return pods, nodes
}

// On Karpenter's real Nodes, the links run both ways, served and in the report: each node's view
// lists the Pods that waited for it, each held and opening its own view, and each such Pod's
// wait names that node's trace as held. With the nodes gone from the ring, the Pods' waits say
// it is not held, so the page offers no link to a view it cannot open.
func TestNodeLinksRealKarpenter(t *testing.T) {
	pods, nodes := replayKarpenter(t)
	if len(nodes) < 2 || len(pods) == 0 {
		t.Fatalf("%d nodes, %d Pods: the test would prove nothing", len(nodes), len(pods))
	}
	ring := NewRing(RingConfig{})
	for _, p := range pods {
		ring.AddPod(p)
	}
	for _, n := range nodes {
		ring.AddNode(n)
	}
	var b bytes.Buffer
	if err := WriteReport(&b, "karpenter", "", pods, nil, nodes); err != nil {
		t.Fatal(err)
	}
	report := reportOf(t, b.String())
	if len(report.Nodes) != len(nodes) || len(report.NodeViews) != len(nodes) {
		t.Fatalf("report: %d nodes listed, %d views; want %d", len(report.Nodes), len(report.NodeViews), len(nodes))
	}

	waited := map[string]string{} // Pod UID → the node's trace ID
	for _, n := range nodes {
		id := n.TraceID.String()
		var v NodeView
		if err := json.Unmarshal(ring.Node(id), &v); err != nil {
			t.Fatal(err)
		}
		if len(v.Waited) != len(n.Startup.Waiters) || len(v.Spans) != len(n.Spans) {
			t.Errorf("node %s: %d waiters, %d spans; want %d, %d", n.Startup.Name, len(v.Waited), len(v.Spans), len(n.Startup.Waiters), len(n.Spans))
		}
		for i, w := range v.Waited {
			if !w.Held || ring.Pod(w.UID) == nil || !report.NodeViews[id].Waited[i].Held {
				t.Errorf("node %s: waiter %+v not held (served, or in the report)", n.Startup.Name, w)
			}
			waited[w.UID] = id
		}
	}
	if len(waited) == 0 {
		t.Fatal("no Pod waited for a node: the test would prove nothing")
	}
	bare := NewRing(RingConfig{})
	for _, p := range pods {
		bare.AddPod(p)
	}
	for uid, id := range waited {
		for ringName, r := range map[string]*Ring{"with the nodes": ring, "without": bare} {
			var v PodView
			if err := json.Unmarshal(r.Pod(uid), &v); err != nil {
				t.Fatal(err)
			}
			found := false
			for _, s := range v.Spans {
				if s.NodeTrace == "" {
					continue
				}
				found = true
				if s.Name != phases.SpanSchedulingWaitingForNode || s.NodeTrace != id || s.NodeHeld != (r == ring) {
					t.Errorf("Pod %s %s: span %s links to node %s held %v; want the wait, %s, held %v", v.Name, ringName, s.Name, s.NodeTrace, s.NodeHeld, id, r == ring)
				}
			}
			if !found {
				t.Errorf("Pod %s %s: no span links to its node", v.Name, ringName)
			}
		}
		for _, s := range report.Views[uid].Spans {
			if s.NodeTrace != "" && (s.NodeTrace != id || !s.NodeHeld) {
				t.Errorf("report: Pod %s links to node %s held %v, want %s held", uid, s.NodeTrace, s.NodeHeld, id)
			}
		}
	}
}

// reportOf is a report's data block.
func reportOf(t *testing.T, page string) *reportData {
	t.Helper()
	const open = `<script type="application/json" id="rs-data">`
	start := strings.Index(page, open)
	end := strings.Index(page[max(start, 0):], "</script>")
	if start < 0 || end < 0 {
		t.Fatal("no data block")
	}
	var d pageData
	if err := json.Unmarshal([]byte(page[start+len(open):start+end]), &d); err != nil || d.Report == nil {
		t.Fatalf("data block: %v", err)
	}
	return d.Report
}
