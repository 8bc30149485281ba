package terminal

import (
	"fmt"
	"io"
	"strings"

	"github.com/readyspan/readyspan/node"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/safetext"
)

// NodeWaterfall writes a node's startup trace as Waterfall writes a Pod's: its steps one under
// the other, each DaemonSet Pod under the last, with where each boundary came from.
func NodeWaterfall(w io.Writer, t *node.Trace) error {
	root := t.Root()
	s := t.Startup
	fmt.Fprintf(w, "node/%s  trace %s  %s  %s\n", safetext.Field(s.Name), t.TraceID, t.Summary.Outcome, durText(root))
	var about []string
	if s.Provisioner != "" {
		about = append(about, "provisioner "+safetext.Field(s.Provisioner))
	}
	if c := s.Claim; c != nil {
		about = append(about, "nodeclaim "+safetext.Field(c.Name))
		if c.NodePool != "" {
			about = append(about, "nodepool "+safetext.Field(c.NodePool))
		}
	}
	if n := len(s.Waiters); n > 0 {
		about = append(about, fmt.Sprintf("%d Pods waited for it", n))
	}
	if len(about) > 0 {
		fmt.Fprintf(w, "  %s\n", strings.Join(about, ", "))
	}
	if root.Status == phases.StatusError {
		fmt.Fprintf(w, "  error: %s\n", safetext.Field(root.StatusMessage))
	}
	for _, row := range phases.TreeOrder(t.Spans) {
		sp := &t.Spans[row.Index]
		name := strings.Repeat("  ", row.Depth) + sp.Name
		if p, ok := sp.Attr(phases.AttrPodName).(string); ok && sp.Name == node.SpanDaemonPod {
			ns, _ := sp.Attr(phases.AttrNamespace).(string)
			name += " " + safetext.Field(ns+"/"+p)
		}
		src := safetext.Field(fmt.Sprintf("%s→%s", sp.Attr(phases.AttrSourceStart), sp.Attr(phases.AttrSourceEnd)))
		fmt.Fprintf(w, "  %-34s %9s %10s |%s| %s\n", trim(name, 34), fmtDur(sp.Start.Sub(root.Start)), durText(sp), bar(sp, root), src)
	}
	return nil
}

// JSONNode writes a node's startup trace as JSON lines, one per span (as JSONLines).
func JSONNode(w io.Writer, t *node.Trace) error { return jsonSpans(w, t.TraceID, t.Spans) }
