package prometheus

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/readyspan/readyspan/rollout"
)

// RolloutBuckets reach from a few seconds (a scale of one Pod) to an hour (a large, slow rollout).
var RolloutBuckets = []float64{1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600, 900, 1800, 3600}

// rolloutMetrics are the rollout half of Metrics. Labels: workload (Deployment, StatefulSet,
// DaemonSet), kind (create, update, restart, rollback, scale), outcome — all bounded.
type rolloutMetrics struct {
	duration           *prometheus.HistogramVec
	steps              *prometheus.HistogramVec
	inProgress         *prometheus.GaugeVec
	pastDeadline       *prometheus.GaugeVec
	longestWithoutStep *prometheus.GaugeVec
	workloads          []string // the workload label's values
	blocked            *prometheus.GaugeVec
	rejected           *prometheus.CounterVec
}

func newRolloutMetrics(workloads []string) rolloutMetrics {
	return rolloutMetrics{
		workloads: workloads,
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "readyspan_rollout_duration_seconds",
			Help:    "Rollouts from the change to the controller's verdict (all updated and available, old Pods gone), by workload kind, rollout kind and outcome (complete, failed, superseded, paused, blocked).",
			Buckets: RolloutBuckets}, []string{"workload", "kind", "outcome"}),
		steps: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "readyspan_rollout_steps",
			Help:    "Scale-up waves per finished rollout (a Deployment's ScalingReplicaSet scale-ups of its new ReplicaSet; a StatefulSet's or DaemonSet's Pod creations), by workload kind.",
			Buckets: []float64{1, 2, 3, 5, 10, 20, 50, 100, 200}}, []string{"workload"}),
		inProgress: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "readyspan_rollouts_in_progress",
			Help: "Rollouts being traced right now, by workload kind and rollout kind."}, []string{"workload", "kind"}),
		pastDeadline: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "readyspan_rollouts_past_deadline",
			Help: "Rollouts in progress longer than their Deployment's progressDeadlineSeconds without the controller's verdict, by workload kind."}, []string{"workload"}),
		longestWithoutStep: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "readyspan_rollout_longest_without_step_seconds",
			Help: "Of the rollouts in progress, the longest time since one's last scaling step (or its start), by workload kind; 0 with none in progress."}, []string{"workload"}),
		blocked: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "readyspan_rollouts_blocked",
			Help: "Rollouts in progress whose Pod creates the apiserver is refusing (FailedCreate), none made since, by workload kind and rejection class (quota, admission_webhook, pod_security, other)."}, []string{"workload", "class"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "readyspan_pod_creates_rejected_total",
			Help: "Pod creates of a controller (ReplicaSet, StatefulSet, DaemonSet, Job) the apiserver refused, each occurrence of a FailedCreate Event once, by class (quota, admission_webhook, pod_security, other)."}, []string{"class"}),
	}
}

func (r rolloutMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{r.duration, r.steps, r.inProgress, r.pastDeadline, r.longestWithoutStep, r.blocked, r.rejected}
}

// init creates every gauge series, so an alert sees 0 rather than nothing, and the duration
// series of complete and failed rollouts, which alerts compute increase() over (RolloutSlow,
// RolloutFailed): a series born with its first rollout would hide that rollout from increase().
func (r rolloutMetrics) init() {
	for _, w := range r.workloads {
		for _, k := range rollout.Kinds {
			r.inProgress.WithLabelValues(w, string(k))
			for _, o := range []rollout.Outcome{rollout.OutcomeComplete, rollout.OutcomeFailed} {
				r.duration.WithLabelValues(w, string(k), string(o))
			}
		}
		r.pastDeadline.WithLabelValues(w)
		r.longestWithoutStep.WithLabelValues(w)
		for _, c := range rollout.RejectionClasses {
			r.blocked.WithLabelValues(w, string(c))
		}
	}
	for _, c := range rollout.RejectionClasses {
		r.rejected.WithLabelValues(string(c))
	}
}

// ExportRollout records a finished rollout; the exemplar is its trace ID.
func (m *Metrics) ExportRollout(t *rollout.Trace) {
	s := &t.Summary
	observe(m.rollouts.duration.WithLabelValues(s.WorkloadKind, string(s.Kind), string(s.Outcome)), s.Duration, t.TraceID.String())
	m.lastMile.exportRollout(t)
	if s.Outcome != rollout.OutcomeInProgress && s.Outcome != rollout.OutcomeBlocked {
		// A blocked rollout goes on, and is exported again when it ends: its waves count then.
		m.rollouts.steps.WithLabelValues(s.WorkloadKind).Observe(float64(s.Waves))
	}
}

// RolloutProgress publishes the rollouts in progress (tracker.Stats).
func (m *Metrics) RolloutProgress(p rollout.Progress) {
	for _, w := range m.rollouts.workloads {
		for _, k := range rollout.Kinds {
			m.rollouts.inProgress.WithLabelValues(w, string(k)).Set(float64(p.InProgress[w+"/"+string(k)]))
		}
		m.rollouts.pastDeadline.WithLabelValues(w).Set(float64(p.PastDeadline[w]))
		m.rollouts.longestWithoutStep.WithLabelValues(w).Set(p.LongestWithoutStep[w].Round(time.Millisecond).Seconds())
		for _, c := range rollout.RejectionClasses {
			m.rollouts.blocked.WithLabelValues(w, string(c)).Set(float64(p.Blocked[w+"/"+string(c)]))
		}
	}
}

// PodCreatesRejected counts refused Pod creates (rollout.RejectedCreates).
func (m *Metrics) PodCreatesRejected(class rollout.RejectionClass, n int) {
	m.rollouts.rejected.WithLabelValues(string(rollout.RejectionLabel(class))).Add(float64(n))
}
