package prometheus

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/readyspan/readyspan/node"
	"github.com/readyspan/readyspan/phases"
)

// NodeBuckets reach from a few seconds (a warm pool's node) to half an hour (a GPU instance
// with its drivers).
var NodeBuckets = []float64{5, 10, 20, 30, 45, 60, 90, 120, 180, 240, 300, 420, 600, 900, 1200, 1800}

// Provisioners are the values of the node metrics' provisioner label: the autoscaler that
// added the Node, none where nothing says.
var Provisioners = []string{phases.ServiceKarpenter, phases.ServiceClusterAutoscaler, "none"}

// nodeMetrics are the node startup half of Metrics. Labels: provisioner (Provisioners), outcome
// (node.Outcome), step (the step's name without node.) — all bounded.
type nodeMetrics struct {
	duration *prometheus.HistogramVec
	steps    *prometheus.HistogramVec
}

func newNodeMetrics() nodeMetrics {
	return nodeMetrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "readyspan_node_startup_duration_seconds",
			Help:    "New Nodes from the provisioner's decision (Karpenter's NodeClaim created), or the Node's creation, to their last startup step (Ready, network, startup taints, initialization, DaemonSet Pods Ready), by provisioner and outcome (ready, stuck, deleted).",
			Buckets: NodeBuckets}, []string{"provisioner", "outcome"}),
		steps: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "readyspan_node_startup_step_duration_seconds",
			Help:    "Each step of a new Node's startup that was observed (launch, instance, registration, kubelet_ready, network, startup_taints, initialization, daemonsets), by provisioner and step.",
			Buckets: NodeBuckets}, []string{"provisioner", "step"}),
	}
}

func (n nodeMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{n.duration, n.steps}
}

// init creates the series alerts compute increase() over (NodeStartupSlow): a series born with
// its first node would hide that node from increase().
func (n nodeMetrics) init() {
	for _, p := range Provisioners {
		n.duration.WithLabelValues(p, string(node.OutcomeReady))
		n.duration.WithLabelValues(p, string(node.OutcomeStuck))
	}
}

// ExportNode records a finished node startup; the exemplar is its trace ID.
func (m *Metrics) ExportNode(t *node.Trace) {
	s := &t.Summary
	if s.Outcome == node.OutcomeInProgress {
		return // a flush: the node has not finished starting
	}
	p := s.Provisioner
	if p == "" {
		p = "none"
	}
	id := t.TraceID.String()
	observe(m.nodes.duration.WithLabelValues(p, string(s.Outcome)), s.Duration, id)
	for i, step := range node.Steps {
		if s.Drawn[i] {
			observe(m.nodes.steps.WithLabelValues(p, strings.TrimPrefix(step, "node.")), s.Steps[i], id)
		}
	}
}
