package web

import (
	"io"
	"sort"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
)

// WriteReport writes one self-contained HTML file with the views of these traces: the rollout
// list, each rollout's Gantt and each Pod's waterfall, inline, for a bug report or a
// post-mortem. It loads nothing from the network and runs no script but its own (a
// Content-Security-Policy says so to the browser too). traceUI, when set, links each trace to a
// trace UI (see CheckTraceUI).
func WriteReport(w io.Writer, title, traceUI string, pods []*phases.Trace, rollouts []*rollout.Trace) error {
	if err := CheckTraceUI(traceUI); err != nil {
		return err
	}
	// Newest first, as the daemon lists them.
	rollouts = append([]*rollout.Trace(nil), rollouts...)
	sort.SliceStable(rollouts, func(i, j int) bool { return rollouts[i].Root().Start.After(rollouts[j].Root().Start) })
	pods = append([]*phases.Trace(nil), pods...)
	sort.SliceStable(pods, func(i, j int) bool { return pods[i].Root().Start.After(pods[j].Root().Start) })
	d := &reportData{Title: title, Rollouts: []RolloutSummary{}, Pods: []PodSummary{},
		Gantts: map[string]*RolloutView{}, Views: map[string]*PodView{}}
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
	return writePage(w, title, reportCSP, true, pageData{TraceUI: traceUI, Report: d})
}
