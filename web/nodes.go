package web

import (
	"github.com/readyspan/readyspan/node"
	"github.com/readyspan/readyspan/phases"
)

// NodeSummary is one line of the node list: a new Node's startup.
type NodeSummary struct {
	ID          string `json:"id"`   // the node's trace ID
	Name        string `json:"name"` // "" while only its NodeClaim exists
	Provisioner string `json:"provisioner,omitempty"`
	NodeClaim   string `json:"nodeClaim,omitempty"`
	NodePool    string `json:"nodePool,omitempty"`
	Outcome     string `json:"outcome"`
	// Reason is what a stuck or deleted node still waited for, or why it went.
	Reason     string  `json:"reason,omitempty"`
	Start      string  `json:"start"` // RFC 3339, UTC
	DurationMs float64 `json:"durationMs"`
	DurText    string  `json:"durText,omitempty"` // as PodSummary.DurText
	Waiters    int     `json:"waiters"`           // how many Pods waited for it
}

// NodeView is a node's startup waterfall: every span of its trace, as a Pod's, and the Pods that
// waited for it.
type NodeView struct {
	NodeSummary
	Spans  []SpanView   `json:"spans"`
	Waited []WaiterView `json:"waited"`
}

// WaiterView is a Pod that waited for the node: its root links to the Pod's trace.
type WaiterView struct {
	UID     string `json:"uid,omitempty"` // "" where the trace does not say
	Pod     string `json:"pod"`           // namespace/name
	TraceID string `json:"traceId"`
	// Held says the UI holds the Pod's trace, so the page can open it (set when served).
	Held bool `json:"held,omitempty"`
}

// The colours of a node's steps: the component each one waits on (node.Build's services), as a
// Pod's waterfall colours its spans by their phase. A node's kubelet shares the Pod's kubelet's.
const (
	CatNodeProvisioner = "node_provisioner" // the NodeClaim's launch, registration, initialization
	CatNodeInstance    = "node_instance"    // the cloud provider's instance, until the Node exists
	CatNodeNetwork     = "node_network"     // the CNI, until NetworkUnavailable is False
	CatNodeAgents      = "node_agents"      // the agents that remove startup taints
	catKubelet         = "kubelet"
)

// NodeCategories are the categories a node's spans are drawn in, the root's ("root") aside.
var NodeCategories = []string{CatNodeProvisioner, CatNodeInstance, catKubelet, CatNodeNetwork, CatNodeAgents}

var nodeStepCats = map[string]string{
	node.SpanLaunch: CatNodeProvisioner, node.SpanRegistration: CatNodeProvisioner, node.SpanInitialization: CatNodeProvisioner,
	node.SpanInstance: CatNodeInstance, node.SpanKubeletReady: catKubelet, node.SpanDaemonSets: catKubelet, node.SpanDaemonPod: catKubelet,
	node.SpanNetwork: CatNodeNetwork, node.SpanStartupTaints: CatNodeAgents,
}

// nodeCat is a node span's category; a step this version does not know is its node agents', as
// node.Build's service of one is.
func nodeCat(name string) string {
	if c, ok := nodeStepCats[name]; ok {
		return c
	}
	return CatNodeAgents
}

// nodeSummary is the list line of a node's startup trace.
func nodeSummary(t *node.Trace) NodeSummary {
	root := t.Root()
	return NodeSummary{
		ID: t.TraceID.String(), Name: attrString(root, phases.AttrNodeName), Provisioner: t.Summary.Provisioner,
		NodeClaim: attrString(root, phases.AttrNodeClaimName), NodePool: attrString(root, phases.AttrNodePool),
		Outcome: string(t.Summary.Outcome), Reason: attrString(root, phases.AttrNodeReason),
		Start: rfc3339(root.Start), DurationMs: ms(root.Duration()), DurText: durText(root),
		Waiters: len(waitersOf(t)),
	}
}

// nodeView turns a node's startup trace into its waterfall, no Pod held.
func nodeView(t *node.Trace) *NodeView {
	return &NodeView{NodeSummary: nodeSummary(t), Spans: nodeSpanRows(t.Spans), Waited: waitersOf(t)}
}

func nodeEntry(t *node.Trace) *entry {
	v := nodeSummary(t)
	e := &entry{id: v.ID, start: t.Root().Start, node: v, waited: waitersOf(t), spans: t.Spans}
	e.size = spansBytes(t.Spans) + entryOverhead + int64(len(v.ID)+len(v.Name)+len(v.Provisioner)+len(v.NodeClaim)+
		len(v.NodePool)+len(v.Outcome)+len(v.Reason)+len(v.Start)+len(v.DurText))
	for _, w := range e.waited {
		e.size += waiterSize + int64(len(w.UID)+len(w.Pod)+len(w.TraceID))
	}
	return e
}

// waiterSize is a WaiterView's own size: four words of string headers and the flag.
const waiterSize = 4*16 + 8

// waitersOf are the Pods the root links to as having waited for the node. The link names the
// Pod and its trace; its UID, which opens its view, is the Startup's.
func waitersOf(t *node.Trace) []WaiterView {
	uids := map[phases.TraceID]string{}
	if t.Startup != nil {
		for _, w := range t.Startup.Waiters {
			uids[phases.TraceIDFor(w.UID)] = w.UID
		}
	}
	out := []WaiterView{}
	for _, l := range t.Root().Links() {
		if linkRelation(l) != node.LinkWaited {
			continue
		}
		w := WaiterView{UID: uids[l.TraceID], TraceID: l.TraceID.String()}
		for _, a := range l.Attrs {
			if a.Key == phases.AttrPodName {
				w.Pod, _ = a.Value.(string)
			}
		}
		out = append(out, w)
	}
	return out
}

// nodeSpanRows are a node's waterfall rows: a Pod's (spanRows), each coloured by the component
// it waited on, and each DaemonSet Pod's row named after its Pod.
func nodeSpanRows(spans []phases.Span) []SpanView {
	rows := spanRows(spans)
	for i, r := range phases.TreeOrder(spans) { // spanRows' order
		if r.Index == 0 {
			continue
		}
		s := &spans[r.Index]
		rows[i].Cat = nodeCat(s.Name)
		if s.Name == node.SpanDaemonPod {
			rows[i].Label += " " + attrString(s, phases.AttrNamespace) + "/" + attrString(s, phases.AttrPodName)
		}
	}
	return rows
}

func linkRelation(l phases.Link) string {
	for _, a := range l.Attrs {
		if a.Key == phases.AttrLinkRelation {
			v, _ := a.Value.(string)
			return v
		}
	}
	return ""
}

// markNodesHeld says, on each row that links to a node's startup trace, whether held has it.
func markNodesHeld(rows []SpanView, held func(id string) bool) {
	for i := range rows {
		if rows[i].NodeTrace != "" {
			rows[i].NodeHeld = held(rows[i].NodeTrace)
		}
	}
}

// markPodsHeld is a copy of ws, each saying whether held has its Pod.
func markPodsHeld(ws []WaiterView, held func(uid string) bool) []WaiterView {
	out := make([]WaiterView, len(ws))
	for i, w := range ws {
		w.Held = w.UID != "" && held(w.UID)
		out[i] = w
	}
	return out
}
