package prometheus

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
)

// ProgrammingModes are the mode label's values: kube-proxy's mode as the nodes' rules showed it,
// mixed when they differ, unknown when none said.
var ProgrammingModes = []string{"iptables", "nftables", "mixed", "unknown"}

// lastMileMetrics are the last mile's half of Metrics, from the traces readyspan node's reports
// completed: new Pods entering the nodes' kube-proxy rules, old Pods leaving them. Labels: mode
// (ProgrammingModes), workload_kind (the rollout kinds) — bounded.
type lastMileMetrics struct {
	programming *prometheus.HistogramVec
	incomplete  prometheus.Counter
	afterStop   *prometheus.HistogramVec
	lateOld     *prometheus.CounterVec
	workloads   []string
}

func newLastMileMetrics(workloads []string) lastMileMetrics {
	return lastMileMetrics{workloads: workloads,
		programming: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "readyspan_endpoint_programming_seconds",
			Help:    "Per new Pod and node reporting (readyspan node): from the Pod's address ready in its Services' EndpointSlices to that node's kube-proxy rules sending it traffic, by kube-proxy mode.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 7.5, 10, 15, 30}}, []string{"mode"}),
		incomplete: prometheus.NewCounter(prometheus.CounterOpts{Name: "readyspan_endpoint_programming_incomplete_total",
			Help: "New Pods some reporting node had not put in its kube-proxy rules when readyspan stopped waiting (--last-mile-wait)."}),
		afterStop: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "readyspan_old_pod_in_rotation_after_stop_seconds",
			Help:    "Per old Pod of a rollout, with readyspan node reporting: how long after its containers were told to stop (deletion plus a preStop sleep) the last node took it out of its kube-proxy rules; 0 when all did before.",
			Buckets: []float64{0, 0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 30}}, []string{"workload_kind"}),
		lateOld: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "readyspan_old_pods_in_rotation_after_stop_total",
			Help: "Old Pods of rollouts still in some node's kube-proxy rules after their containers were told to stop, by workload kind."}, []string{"workload_kind"}),
	}
}

func (l lastMileMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{l.programming, l.incomplete, l.afterStop, l.lateOld}
}

// init creates the series OldPodsInRotationAfterStop computes increase() over.
func (l lastMileMetrics) init() {
	for _, w := range l.workloads {
		l.lateOld.WithLabelValues(w)
	}
}

// exportPod records each node's programming of a new Pod, the trace ID as exemplar.
func (l lastMileMetrics) exportPod(t *phases.Trace) {
	g := t.Pod.Programming
	if g == nil {
		return
	}
	at, _ := t.Pod.EndpointsReady.Resolve()
	since := at.Time()
	mode := modeLabel(g.Mode)
	complete := true
	for _, n := range g.Nodes {
		if n.At.IsZero() {
			complete = false
			continue
		}
		observe(l.programming.WithLabelValues(mode), max(n.At.Sub(since), 0), t.TraceID.String())
	}
	if !complete {
		l.incomplete.Inc()
	}
}

// exportRollout records each old Pod's removal from the nodes' rules against its stop.
func (l lastMileMetrics) exportRollout(t *rollout.Trace) {
	kind := t.Rollout.Workload.Kind
	for i := range t.Rollout.OldPods {
		o := &t.Rollout.OldPods[i]
		if o.Rotation == nil {
			continue
		}
		after, late := o.AfterStop()
		if !late {
			after = 0
		} else {
			l.lateOld.WithLabelValues(kind).Inc()
		}
		observe(l.afterStop.WithLabelValues(kind), after, t.TraceID.String())
	}
}

func modeLabel(mode string) string {
	switch mode {
	case "iptables", "nftables", "mixed":
		return mode
	}
	return "unknown"
}
