// Package prometheus turns finished traces into histograms and counts readyspan's own health.
// Labels are bounded: phase, outcome, result, resource, reason, cause — never a Pod, node or image
// name. The Pod histograms can also carry the namespace and the workload (Options), each capped,
// with "other" past the cap.
package prometheus

import (
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/tracecontext"
)

// Buckets for seconds-to-minutes latencies: sub-second scheduling to ten-minute stuck Pods.
var Buckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600}

// DropReasons are the values of readyspan_traces_dropped_total's reason label.
var DropReasons = []string{"queue_full", "export_failed", "shutdown", "in_flight_cap", "pending_events_cap", "not_leader", "exported_by_previous_leader"}

// Metrics holds every metric readyspan exposes. It implements the tracer's and the OTLP
// exporter's stats interfaces and is a trace sink.
type Metrics struct {
	phaseDuration *prometheus.HistogramVec
	startup       *prometheus.HistogramVec
	startupSLI    *prometheus.HistogramVec
	podLabels     *podLabeler
	labelOverflow *prometheus.CounterVec
	imagePull     prometheus.Histogram
	imagePulls    *prometheus.CounterVec
	schedAttempts prometheus.Histogram
	schedWaits    *prometheus.HistogramVec
	podsInPhase   *prometheus.GaugeVec
	podsStuck     *prometheus.CounterVec
	podsFailed    *prometheus.CounterVec
	tracesDone    *prometheus.CounterVec
	inconsistent  *prometheus.CounterVec
	watchEvents   *prometheus.CounterVec
	watchErrors   *prometheus.CounterVec
	watchRestarts *prometheus.CounterVec
	unparsed      *prometheus.CounterVec
	ctxIgnored    *prometheus.CounterVec
	exported      prometheus.Counter
	dropped       *prometheus.CounterVec
	exportErrors  prometheus.Counter
	cacheSynced   prometheus.Gauge
	leader        prometheus.Gauge
	buildInfo     *prometheus.GaugeVec
	inFlight      prometheus.Gauge
	rollouts      rolloutMetrics
	nodes         nodeMetrics
	lastMile      lastMileMetrics
	components    *componentMetrics
}

// New registers readyspan's metrics with reg. workloads are the kinds of workload readyspan
// traces rollouts of (tracer.RolloutKinds), the values of the rollout metrics' workload label;
// o adds the opt-in labels (Options.Validate must have accepted it).
func New(reg prometheus.Registerer, version string, workloads []string, o Options) *Metrics {
	h := func(name, help string) prometheus.HistogramOpts {
		return prometheus.HistogramOpts{Name: name, Help: help, Buckets: Buckets}
	}
	overflow := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "readyspan_metrics_label_overflow_total",
		Help: "Traces whose namespace or workload label (--metrics-pod-labels) read \"other\" because the label had reached --metrics-label-limit values, and admission webhook calls whose webhook label read \"other\" past its first " + strconv.Itoa(WebhookLabelLimit) + " declared names, by label."}, []string{"label"})
	pl := newPodLabeler(o, overflow)
	m := &Metrics{
		phaseDuration: prometheus.NewHistogramVec(h("readyspan_phase_duration_seconds",
			"Length of each startup phase (submit, apiserver, controllers, scheduling, kubelet, status) of traced Pods, by how the startup ended. Phases readyspan could not measure at both ends are not observed."),
			append([]string{"phase", "outcome"}, pl.names...)),
		startup: prometheus.NewHistogramVec(h("readyspan_pod_startup_duration_seconds",
			"Pod created to Ready (and ready in its Services' endpoints), for Pods that became Ready."), pl.names),
		startupSLI: prometheus.NewHistogramVec(h("readyspan_pod_startup_sli_duration_seconds",
			"SIG-scalability pod startup SLI: Pod created to all containers started, excluding image pulls and init containers; stateless Pods scheduled at the first attempt."), pl.names),
		podLabels:     pl,
		labelOverflow: overflow,
		imagePull: prometheus.NewHistogram(h("readyspan_image_pull_duration_seconds",
			"Cold image pulls, Pulling to Pulled (including time queued behind other pulls on the node).")),
		imagePulls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "readyspan_image_pulls_total",
			Help: "Image pulls of traced Pods' containers by result: pulled (the image was fetched; once per container), present (already on the node; once per container), failed (each pull attempt that failed)."}, []string{"result"}),
		schedAttempts: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "readyspan_scheduling_attempts",
			Help: "Scheduling attempts per traced Pod (failed attempts plus the successful bind).", Buckets: []float64{1, 2, 3, 5, 10, 20, 50}}),
		schedWaits: prometheus.NewHistogramVec(h("readyspan_scheduling_wait_duration_seconds",
			"Waits within the scheduling phase that were not the scheduler's, by wait: gated (created to the last scheduling gate removed), node (no node fitted to the new Node the Pod was bound to turning Ready). The scheduling phase's length includes them."),
			[]string{"wait"}),
		podsInPhase: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "readyspan_pods_in_phase",
			Help: "Pods being traced right now, by the phase they are in."}, []string{"phase"}),
		podsStuck: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "readyspan_pods_stuck_total",
			Help: "Pods exported as stuck (not Ready after --stuck-after), by the phase they were stuck in."}, []string{"phase"}),
		podsFailed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "readyspan_pod_startups_failed_total",
			Help: "Pods exported as failed (a persistent failure shown for --fail-after, or the Pod failed), by reason: the container's waiting reason (ErrImagePull, ImagePullBackOff, CrashLoopBackOff, CreateContainerConfigError…), other for anything else (Evicted, a failed Pod's own reason)."}, []string{"reason"}),
		tracesDone: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "readyspan_traces_total",
			Help: "Traces reconstructed, by outcome."}, []string{"outcome"}),
		inconsistent: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "readyspan_traces_inconsistent_total",
			Help: "Traces whose timestamps put a milestone before one that must precede it (marked readyspan.time.inconsistent and left out of the histograms), by cause: the two milestones, as in created_before_replicaset_scaled_up (a container's steps: container_…). Each trace counts once per cause. On a healthy cluster none is counted: each is a bug in readyspan or a clock to look at."}, []string{"cause"}),
		watchEvents: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "readyspan_watch_events_total",
			Help: "Watch events received, by resource."}, []string{"resource"}),
		watchErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "readyspan_watch_errors_total",
			Help: "Watch and list errors, by resource and reason (forbidden, expired, other)."}, []string{"resource", "reason"}),
		watchRestarts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "readyspan_watch_restarts_total",
			Help: "Lists and watches started again, by resource and reason: watch_closed (a new watch resumes where a closed one stopped; watches are closed after 5 to 10 minutes by design), relist (everything listed again: after 410 Gone, or after listing and watching failed)."}, []string{"resource", "reason"}),
		unparsed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "readyspan_unparsed_messages_total",
			Help: "Event messages readyspan reads (Pulled, Failed, BackOff, ScalingReplicaSet, SuccessfulCreate) in a format it does not know, by the Event's reason; nothing is read from them."}, []string{"reason"}),
		ctxIgnored: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "readyspan_trace_context_ignored_total",
			Help: "tracing.k8s.io/traceparent annotation values (of workloads and Pods) ignored, by reason: too_long, malformed, invalid_version, zero_id. Each value counts once per object that carries it; the trace is as without it."}, []string{"reason"}),
		exported: prometheus.NewCounter(prometheus.CounterOpts{Name: "readyspan_traces_exported_total",
			Help: "Traces sent to the OTLP backend."}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "readyspan_traces_dropped_total",
			Help: "Traces or observations dropped, by reason (queue_full, export_failed, shutdown, in_flight_cap, pending_events_cap, not_leader, exported_by_previous_leader)."}, []string{"reason"}),
		exportErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "readyspan_export_errors_total",
			Help: "Failed OTLP export attempts (each is retried with backoff)."}),
		cacheSynced: prometheus.NewGauge(prometheus.GaugeOpts{Name: "readyspan_cache_synced",
			Help: "1 once every informer cache has synced."}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "readyspan_leader",
			Help: "1 while this replica exports traces (the leader, or leader election is off)."}),
		buildInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "readyspan_build_info",
			Help: "readyspan's version; always 1."}, []string{"version", "goversion"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "readyspan_pods_in_flight",
			Help: "Pods being traced right now."}),
		rollouts:   newRolloutMetrics(workloads),
		nodes:      newNodeMetrics(),
		lastMile:   newLastMileMetrics(workloads),
		components: newComponentMetrics(overflow),
	}
	reg.MustRegister(m.phaseDuration, m.startup, m.startupSLI, m.labelOverflow, m.imagePull, m.imagePulls, m.schedAttempts, m.schedWaits,
		m.podsInPhase, m.podsStuck, m.podsFailed, m.tracesDone, m.inconsistent, m.watchEvents, m.watchErrors, m.watchRestarts, m.unparsed, m.ctxIgnored, m.exported, m.dropped,
		m.exportErrors, m.cacheSynced, m.leader, m.buildInfo, m.inFlight)
	reg.MustRegister(m.rollouts.collectors()...)
	reg.MustRegister(m.nodes.collectors()...)
	reg.MustRegister(m.lastMile.collectors()...)
	reg.MustRegister(m.components.collectors()...)
	m.rollouts.init()
	m.nodes.init()
	m.lastMile.init()
	m.buildInfo.WithLabelValues(version, runtime.Version()).Set(1)
	m.initSeries()
	return m
}

// initSeries makes the series that must exist before their first value: the gauges of the
// phases a Pod is traced in, and the counters that alerts compute increase() over, so that the
// first occurrence counts.
func (m *Metrics) initSeries() {
	for _, p := range []string{phases.PhaseScheduling, phases.PhaseKubelet, phases.PhaseStatus} {
		m.podsInPhase.WithLabelValues(p)
	}
	for _, r := range []string{"pulled", "present", "failed"} {
		m.imagePulls.WithLabelValues(r)
	}
	for _, p := range phases.Phases {
		m.podsStuck.WithLabelValues(p)
	}
	for _, r := range phases.FailureReasons {
		m.podsFailed.WithLabelValues(r)
	}
	m.podsFailed.WithLabelValues(phases.FailureReasonOther)
	for _, r := range DropReasons {
		m.dropped.WithLabelValues(r)
	}
	for _, r := range tracecontext.Reasons {
		m.ctxIgnored.WithLabelValues(string(r))
	}
}

// observe records v with the trace ID as exemplar, so a slow bucket links to its trace.
func observe(o prometheus.Observer, v time.Duration, traceID string) {
	if eo, ok := o.(prometheus.ExemplarObserver); ok {
		eo.ObserveWithExemplar(v.Seconds(), prometheus.Labels{"trace_id": traceID})
		return
	}
	o.Observe(v.Seconds())
}

// Export records a finished trace.
func (m *Metrics) Export(t *phases.Trace) {
	s := &t.Summary
	id := t.TraceID.String()
	outcome := string(s.Outcome)
	m.tracesDone.WithLabelValues(outcome).Inc()
	m.lastMile.exportPod(t)
	for i, cause := range s.InconsistencyCauses {
		if !slices.Contains(s.InconsistencyCauses[:i], cause) {
			m.inconsistent.WithLabelValues(cause).Inc()
		}
	}
	// The opt-in labels are taken only for a trace a histogram records: one that records none
	// takes no place under the labels' caps.
	var extra []string
	if slices.Contains(s.PhaseObserved[:], true) || (s.Outcome == phases.OutcomeReady && (s.Startup > 0 || s.SLIEligible)) {
		var ns, workload string
		if t.Pod != nil {
			ns, workload = t.Pod.Namespace, t.Pod.Workload
		}
		extra = m.podLabels.values(ns, workload)
	}
	for i, name := range phases.Phases {
		if s.PhaseObserved[i] {
			observe(m.phaseDuration.WithLabelValues(append([]string{name, outcome}, extra...)...), s.PhaseDurations[i], id)
		}
	}
	if s.Outcome == phases.OutcomeReady && s.Startup > 0 {
		observe(m.startup.WithLabelValues(extra...), s.Startup, id)
	}
	if s.SLIEligible && s.Outcome == phases.OutcomeReady {
		observe(m.startupSLI.WithLabelValues(extra...), s.SLI, id)
	}
	for _, d := range s.ColdPulls {
		observe(m.imagePull, d, id)
	}
	m.imagePulls.WithLabelValues("pulled").Add(float64(s.PullsPulled))
	m.imagePulls.WithLabelValues("present").Add(float64(s.PullsPresent))
	m.imagePulls.WithLabelValues("failed").Add(float64(s.PullsFailed))
	if s.SchedulingAttempts > 0 {
		m.schedAttempts.Observe(float64(s.SchedulingAttempts))
	}
	for _, w := range s.SchedulingWaits {
		observe(m.schedWaits.WithLabelValues(w.Kind), w.Duration, id)
	}
	m.components.export(t, id)
	switch s.Outcome {
	case phases.OutcomeStuck:
		m.podsStuck.WithLabelValues(s.CurrentPhase).Inc()
	case phases.OutcomeFailed:
		// Bounded: a failed Pod's status.reason (Evicted…) is free text and becomes "other".
		m.podsFailed.WithLabelValues(phases.FailureLabel(s.FailureReason)).Inc()
	}
}

// Delta counts a watch event (tracer.Stats).
func (m *Metrics) Delta(resource string) { m.watchEvents.WithLabelValues(resource).Inc() }

// Dropped counts a dropped observation or trace (tracer.Stats).
func (m *Metrics) Dropped(reason string) { m.dropped.WithLabelValues(reason).Inc() }

// Unparsed counts an Event message in an unknown format (tracer.Stats).
func (m *Metrics) Unparsed(reason string) { m.unparsed.WithLabelValues(reason).Inc() }

// TraceContextIgnored counts a traceparent annotation refused (tracecontext.Counter).
func (m *Metrics) TraceContextIgnored(reason tracecontext.Reason) {
	m.ctxIgnored.WithLabelValues(string(reason)).Inc()
}

// InPhase publishes the in-flight Pods per phase (tracer.Stats).
func (m *Metrics) InPhase(counts map[string]int) {
	total := 0
	for _, p := range []string{phases.PhaseScheduling, phases.PhaseKubelet, phases.PhaseStatus} {
		m.podsInPhase.WithLabelValues(p).Set(float64(counts[p]))
		total += counts[p]
	}
	m.inFlight.Set(float64(total))
}

// WatchError counts a watch or list error (tracer.WatchErrors).
func (m *Metrics) WatchError(resource, reason string) {
	m.watchErrors.WithLabelValues(resource, reason).Inc()
}

// WatchRestart counts a list or watch started again (tracer.WatchErrors).
func (m *Metrics) WatchRestart(resource, reason string) {
	m.watchRestarts.WithLabelValues(resource, reason).Inc()
}

// TraceExported, TraceDropped and ExportError implement the OTLP exporter's stats.
func (m *Metrics) TraceExported()             { m.exported.Inc() }
func (m *Metrics) TraceDropped(reason string) { m.dropped.WithLabelValues(reason).Inc() }
func (m *Metrics) ExportError()               { m.exportErrors.Inc() }

// SetCacheSynced and SetLeader publish readyspan's state.
func (m *Metrics) SetCacheSynced(ok bool) { m.cacheSynced.Set(b2f(ok)) }
func (m *Metrics) SetLeader(ok bool)      { m.leader.Set(b2f(ok)) }

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
