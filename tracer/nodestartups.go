package tracer

import (
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/readyspan/readyspan/node"
	"github.com/readyspan/readyspan/objects"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/watch"
)

// A new Node's startup is a trace of its own (node.startup, package node): from its
// provisioner's decision (Karpenter's NodeClaim created) or its creation, through its Ready,
// network and startup taints and Karpenter's initialization, to its DaemonSet Pods Ready; the
// Pods that waited for it linked. Traced for each Node the watch sees added while readyspan
// runs, when Config.Nodes takes node traces: a Node listed at start began before.

// NodeSink takes each finished node startup trace.
type NodeSink interface {
	ExportNode(*node.Trace)
}

// NodeSinkFunc adapts a function to NodeSink.
type NodeSinkFunc func(*node.Trace)

// ExportNode calls f.
func (f NodeSinkFunc) ExportNode(t *node.Trace) { f(t) }

// nodeStartup is what is kept of a Node's startup while it is traced, beside its nodeSeen.
type nodeStartup struct {
	started    time.Time // the receive time of its addition, for the stuck deadline
	doneAt     time.Time // when it was first found done, for the settle time
	daemonPods []node.DaemonPod
	waiters    []phases.PodRef
}

// maxNodeStartups bounds the Node startups traced at once: a cluster adds nodes by the hundred
// at most; beyond the bound a new Node's startup is not traced (counted dropped).
const maxNodeStartups = 2000

// startNodeStartup begins tracing the startup of a Node the watch saw added.
func (c *Correlator) startNodeStartup(d *watch.Delta, name string, n *nodeSeen) {
	listed := name != "" && name == c.cfg.TraceNode
	if c.cfg.Nodes == nil || d.Type != watch.Added || !listed && (d.Initial || d.Recv.IsZero()) {
		return
	}
	if len(c.nodeStartups) >= maxNodeStartups {
		c.stats.Dropped("node_startups_cap")
		return
	}
	n.startup, n.traced = &nodeStartup{started: d.Recv}, true
	if d.Recv.IsZero() {
		n.startup.started = stampOf(n.created, phases.SourceMetadata).Time()
	}
	if c.nodeStartups == nil {
		c.nodeStartups = map[string]*nodeSeen{}
	}
	c.nodeStartups[name] = n
}

// noteNodePod notes a Pod bound to a Node whose startup is traced: a DaemonSet's Pod, whose
// Ready the node's startup ends with, or a Pod created before the Node, which waited for it.
func (c *Correlator) noteNodePod(d *watch.Delta, p *corev1.Pod) {
	n := c.nodeStartups[p.Spec.NodeName]
	if n == nil {
		return
	}
	st := n.startup
	if ref := objects.ControllerOf(&p.ObjectMeta); ref != nil && ref.Kind == "DaemonSet" {
		i := slices.IndexFunc(st.daemonPods, func(dp node.DaemonPod) bool { return dp.UID == string(p.UID) })
		if i < 0 {
			if len(st.daemonPods) >= node.MaxDaemonPods {
				return
			}
			st.daemonPods = append(st.daemonPods, node.DaemonPod{PodRef: podRefOf(p), DaemonSet: ref.Name})
			i = len(st.daemonPods) - 1
		}
		if dp := &st.daemonPods[i]; !dp.Ready.Known() && objects.IsReady(p) {
			dp.Ready.Add(objects.Condition(p, corev1.PodReady).LastTransitionTime.Time, phases.SourceStatus)
			dp.Ready.Add(d.WatchTime(), phases.SourceWatch)
		}
		c.checkNodeStartup(p.Spec.NodeName, n, d.Recv)
		return
	}
	if stampOf(n.created, phases.SourceMetadata) < phases.InstantOf(p.CreationTimestamp.Time) ||
		len(st.waiters) >= node.MaxWaiters ||
		slices.ContainsFunc(st.waiters, func(w phases.PodRef) bool { return w.UID == string(p.UID) }) {
		return
	}
	st.waiters = append(st.waiters, podRefOf(p))
}

func podRefOf(p *corev1.Pod) phases.PodRef {
	return phases.PodRef{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID)}
}

// checkNodeStartup exports the Node's startup trace once it is done (Ready, its network up,
// its startup taints gone, Karpenter's initialization, its DaemonSet Pods Ready) and has settled,
// or, not done, once it is past the stuck deadline.
func (c *Correlator) checkNodeStartup(name string, n *nodeSeen, now time.Time) {
	st := n.startup
	if st == nil || now.IsZero() {
		return
	}
	why := c.nodeNotDone(name, n)
	if why == "" {
		if st.doneAt.IsZero() {
			st.doneAt = now
		}
		if now.Sub(st.doneAt) >= c.cfg.Settle {
			c.exportNodeStartup(name, n, node.OutcomeReady, "", time.Time{})
		}
		return
	}
	st.doneAt = time.Time{}
	if now.Sub(st.started) >= c.cfg.StuckAfter {
		c.exportNodeStartup(name, n, node.OutcomeStuck, why, now)
	}
}

// nodeNotDone says what the Node's startup still waits for, "" when it is done.
func (c *Correlator) nodeNotDone(name string, n *nodeSeen) string {
	switch {
	case !n.ready.Known():
		return "not Ready"
	case n.tainted:
		return "startup taints not removed"
	}
	if cl := c.nodeClaims().byName[c.nodeClaims().byNode[name]]; cl != nil && !cl.initialized.Known() {
		return "NodeClaim not Initialized"
	}
	for _, p := range n.startup.daemonPods {
		if !p.Ready.Known() {
			return "DaemonSet Pods not Ready"
		}
	}
	return ""
}

// exportNodeStartup builds the Node's startup trace and hands it to Config.Nodes; the Node is
// not traced again.
func (c *Correlator) exportNodeStartup(name string, n *nodeSeen, outcome node.Outcome, reason string, end time.Time) {
	st := n.startup
	s := &node.Startup{Name: name, UID: n.uid, Claim: c.claimOf(name),
		Created: append(phases.Times(nil), n.created...), Ready: append(phases.Times(nil), n.ready...),
		NetworkReady: append(phases.Times(nil), n.networkReady...), TaintsRemoved: append(phases.Times(nil), n.taintsRemoved...),
		DaemonPods: st.daemonPods, Waiters: st.waiters, Outcome: outcome, End: end, Reason: reason}
	if s.Claim != nil {
		s.Provisioner = phases.ServiceKarpenter
	}
	n.startup = nil
	delete(c.nodeStartups, name)
	c.cfg.Nodes.ExportNode(node.Build(s))
}

// tickNodeStartups runs the settle and stuck deadlines of the startups traced.
func (c *Correlator) tickNodeStartups(now time.Time) {
	if len(c.nodeStartups) == 0 {
		return
	}
	for _, name := range c.sortedNodeStartups() {
		c.checkNodeStartup(name, c.nodeStartups[name], now)
	}
}

// flushNodeStartups exports every startup still traced as it stands (the end of a replay, an
// explain): ready when nothing is left to wait for, in progress otherwise.
func (c *Correlator) flushNodeStartups() {
	for _, name := range c.sortedNodeStartups() {
		n := c.nodeStartups[name]
		if why := c.nodeNotDone(name, n); why != "" {
			c.exportNodeStartup(name, n, node.OutcomeInProgress, why, c.now)
		} else {
			c.exportNodeStartup(name, n, node.OutcomeReady, "", time.Time{})
		}
	}
}

// sortedNodeStartups are the names of the Nodes whose startup is traced, in order, so that
// what the clock finishes is exported in the same order on every run.
func (c *Correlator) sortedNodeStartups() []string {
	names := make([]string, 0, len(c.nodeStartups))
	for name := range c.nodeStartups {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}
