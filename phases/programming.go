package phases

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// ServiceKubeProxy owns the data plane's span: kube-proxy on each node writes the rules that
// send a Service's traffic to the Pod.
const ServiceKubeProxy = "kube-proxy"

// Programming is the last mile of a Pod's startup: when kube-proxy on each node put the Pod's
// address into its Services' rotation, as readyspan's node component reported it (package
// dataplane). A Pod is serving once every node waited for has it; one that some node never
// programmed within the wait serves from the last node that did, and its span is an error.
type Programming struct {
	// Mode is kube-proxy's mode as the rules showed it (iptables, nftables); "" when the
	// nodes differ or none said.
	Mode string
	// Nodes are the nodes waited for, in no particular order: those whose node component was
	// reporting when the Pod entered its Services' endpoints. A node that starts reporting later
	// programs the Pod with everything else in its first sync and is not waited for.
	Nodes []NodeProgramming
	// Wait is how long readyspan waited for the nodes: a node without At did not program the
	// Pod within it.
	Wait time.Duration
}

// NodeProgramming is one node's part: At is when its rules first sent traffic to the Pod's
// address (zero: not within the wait), Precision how late that may have been seen.
type NodeProgramming struct {
	Node      string
	At        time.Time
	Precision time.Duration
}

// programmingSlowest is how many of the slowest nodes a trace names: the rest are in the
// span's percentiles only, so that a Pod on a 1,000-node cluster is not 1,000 spans.
const programmingSlowest = 5

// last is when the last node that programmed the Pod did (zero: none did).
func (g *Programming) last() (last time.Time) {
	if g == nil {
		return time.Time{}
	}
	for _, n := range g.Nodes {
		if n.At.After(last) {
			last = n.At
		}
	}
	return last
}

// programmed is the point the last node put the Pod in its rules, never before its address was
// in the endpoints (kube-proxy reads the EndpointSlice: a node that seems earlier has a clock
// behind). A node that never did within the wait does not move it: the span says it is missing.
func programmed(g *Programming, endpoints point) point {
	last := g.last()
	if last.IsZero() || !endpoints.observed {
		return point{}
	}
	p := point{t: InstantOf(last), src: SourceComponentSpan, observed: true}
	return later(p, endpoints)
}

// programming draws status.programming: from the Pod's address in its Services' endpoints to
// the last node that put it in its rules, with the spread over the nodes as attributes and the
// slowest nodes as events.
func (b *builder) programming(parent int, endpoints point) {
	g := b.pod.Programming
	if g == nil || len(g.Nodes) == 0 || !endpoints.observed {
		return
	}
	from := endpoints.t.Time()
	var delays []time.Duration
	var missing []string
	var last time.Time
	for _, n := range g.Nodes {
		if n.At.IsZero() {
			missing = append(missing, n.Node)
			continue
		}
		delays = append(delays, max(n.At.Sub(from), 0))
		if n.At.After(last) {
			last = n.At
		}
	}
	end := point{t: InstantOf(last), src: SourceComponentSpan, observed: !last.IsZero()}
	if last.IsZero() {
		end = point{t: InstantOf(from.Add(g.Wait)), src: SourceComponentSpan}
	}
	i := b.add(spanHead{Name: SpanStatusProgramming, Path: SpanStatusProgramming, Service: ServiceKubeProxy, room: 8},
		parent, endpoints, later(end, endpoints))
	s := &b.trace.Spans[i]
	s.Attrs = append(s.Attrs, Attr{AttrProgrammingNodes, int64(len(g.Nodes))},
		Attr{AttrProgrammingProgrammed, int64(len(delays))})
	if g.Mode != "" {
		s.Attrs = append(s.Attrs, Attr{AttrProgrammingMode, g.Mode})
	}
	if len(delays) > 0 {
		slices.Sort(delays)
		s.Attrs = append(s.Attrs, Attr{AttrProgrammingP50, millis(quantile(delays, 0.5))},
			Attr{AttrProgrammingP99, millis(quantile(delays, 0.99))}, Attr{AttrProgrammingMax, millis(delays[len(delays)-1])})
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		s.Status = StatusError
		s.StatusMessage = fmt.Sprintf("not in the rules of %d of %d nodes within %s: %s", len(missing), len(g.Nodes),
			g.Wait, strings.Join(firstOf(missing, programmingSlowest), ", "))
	}
	s.AddEvent(slowestNodes(g, from)...)
}

// slowestNodes are events at each of the slowest nodes' programming, latest first.
func slowestNodes(g *Programming, from time.Time) []Event {
	nodes := slices.Clone(g.Nodes)
	nodes = slices.DeleteFunc(nodes, func(n NodeProgramming) bool { return n.At.IsZero() })
	slices.SortFunc(nodes, func(a, b NodeProgramming) int { return b.At.Compare(a.At) })
	var out []Event
	for _, n := range firstOf(nodes, programmingSlowest) {
		out = append(out, Event{Name: EventNodeProgrammed, Time: n.At, Attrs: []Attr{
			{AttrNodeName, n.Node}, {AttrProgrammingDelay, millis(max(n.At.Sub(from), 0))},
			{AttrPrecisionEnd, n.Precision.String()}}})
	}
	return out
}

// quantile is the nearest-rank quantile of sorted durations.
func quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func firstOf[T any](s []T, n int) []T { return s[:min(n, len(s))] }

// EventNodeProgrammed marks, on status.programming, one of the slowest nodes putting the Pod in
// its rules.
const EventNodeProgrammed = "node.programmed"
