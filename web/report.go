package web

import (
	"io"
	"sort"

	"github.com/readyspan/readyspan/node"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
)

// WriteReport writes one self-contained HTML file with the views of these traces: the rollout
// list, each rollout's Gantt, each Pod's and each new Node's waterfall, inline, for a bug report or a
// post-mortem. It loads nothing from the network and runs no script but its own (a
// Content-Security-Policy says so to the browser too). traceUI, when set, links each trace to a
// trace UI (see CheckTraceUI).
func WriteReport(w io.Writer, title, traceUI string, pods []*phases.Trace, rollouts []*rollout.Trace, nodes []*node.Trace) error {
	return writeReport(w, title, traceUI, pods, rollouts, nodes, "")
}

func writeReport(w io.Writer, title, traceUI string, pods []*phases.Trace, rollouts []*rollout.Trace, nodes []*node.Trace, banner string) error {
	if err := CheckTraceUI(traceUI); err != nil {
		return err
	}
	// Newest first, as the daemon lists them.
	rollouts = append([]*rollout.Trace(nil), rollouts...)
	sort.SliceStable(rollouts, func(i, j int) bool { return rollouts[i].Root().Start.After(rollouts[j].Root().Start) })
	pods = append([]*phases.Trace(nil), pods...)
	sort.SliceStable(pods, func(i, j int) bool { return pods[i].Root().Start.After(pods[j].Root().Start) })
	nodes = append([]*node.Trace(nil), nodes...)
	sort.SliceStable(nodes, func(i, j int) bool { return nodes[i].Root().Start.After(nodes[j].Root().Start) })
	d := &reportData{Title: title, Rollouts: []RolloutSummary{}, Pods: []PodSummary{}, Nodes: []NodeSummary{},
		Gantts: map[string]*RolloutView{}, Views: map[string]*PodView{}, NodeViews: map[string]*NodeView{}}
	for _, t := range rollouts {
		v := rolloutView(t)
		d.Rollouts = append(d.Rollouts, v.RolloutSummary)
		d.Gantts[v.ID] = v
	}
	for _, t := range pods {
		v := podView(t)
		d.Pods = append(d.Pods, v.PodSummary)
		d.Views[v.UID] = v
	}
	for _, t := range nodes {
		v := nodeView(t)
		d.Nodes = append(d.Nodes, v.NodeSummary)
		d.NodeViews[v.ID] = v
	}
	// The page links a Pod and a node only where the report holds the other's view.
	for _, v := range d.Views {
		markNodesHeld(v.Spans, func(id string) bool { return d.NodeViews[id] != nil })
	}
	for _, v := range d.NodeViews {
		v.Waited = markPodsHeld(v.Waited, func(uid string) bool { return d.Views[uid] != nil })
	}
	return writePageBanner(w, title, reportCSP, true, pageData{TraceUI: traceUI, Report: d}, banner)
}
