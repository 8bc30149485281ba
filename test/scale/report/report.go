// Package report turns what one run of the scale test bed recorded (the load driver's Ready
// times, the OTLP receiver's receive times, /proc samples of readyspan and of the bare baseline,
// counters from readyspan's and the apiserver's /metrics) into the figures of docs/scale.md: a
// Report, written as JSON and as a table.
package report

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/readyspan/readyspan/test/scale/procstat"
)

// Level is the load one run applied.
type Level struct {
	Nodes    int     `json:"nodes"`     // fake (KWOK) nodes
	Pods     int     `json:"pods"`      // Pods that exist at the end (Deployments × replicas)
	Startups int     `json:"startups"`  // Pods started: Pods × (1 + rolls)
	Rate     float64 `json:"rate"`      // Pod startups per second asked of the driver
	Replicas int     `json:"replicas"`  // per Deployment
	Rolls    int     `json:"rolls"`     // rollouts of each Deployment after its creation
	Settle   string  `json:"settle"`    // readyspan's settle time, taken off the export lag
	Duration string  `json:"duration"`  // the load phase, first create to last Ready
	Started  string  `json:"started"`   // RFC 3339
	Machine  string  `json:"machine"`   // cores and memory, for comparing runs
	Complete bool    `json:"complete"`  // every started Pod was seen Ready before the deadline
	Missing  int     `json:"missing"`   // Pods started but never seen Ready
	Sustain  float64 `json:"sustained"` // Pods Ready per second over the load phase
}

// PodTimes is what the load driver saw of one Pod on its own watch.
type PodTimes struct {
	UID     string    `json:"uid"`
	Ready   time.Time `json:"ready"`            // Ready=True first seen
	Serving time.Time `json:"serving,omitzero"` // its address first ready in an EndpointSlice
}

// Summary is a distribution's nearest-rank percentiles, in milliseconds for JSON.
type Summary struct {
	N     int     `json:"n"`
	P50ms float64 `json:"p50_ms"`
	P99ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
	MinMs float64 `json:"min_ms"`
}

// Summarize returns the nearest-rank p50, p99, min and max of ds (zero for none).
func Summarize(ds []time.Duration) Summary {
	if len(ds) == 0 {
		return Summary{}
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return Summary{N: len(s), P50ms: ms(rank(s, 0.50)), P99ms: ms(rank(s, 0.99)), MaxMs: ms(s[len(s)-1]), MinMs: ms(s[0])}
}

// rank is the nearest-rank percentile of sorted s: the smallest value with at least q of the
// values at or below it.
func rank(s []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(s)))) - 1
	if i < 0 {
		i = 0
	}
	return s[i]
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }

// Lag is the export lag of every Pod with a trace: the trace's receive time less the Pod's
// Ready time on the driver's watch (from Serving instead when fromServing and known) less settle,
// the time readyspan waits on purpose for late events. Missing lists the Pods with no trace.
func Lag(pods []PodTimes, received map[string]time.Time, settle time.Duration, fromServing bool) (lags []time.Duration, missing []string) {
	for _, p := range pods {
		if p.Ready.IsZero() {
			continue
		}
		got, ok := received[TraceID(p.UID)]
		if !ok {
			missing = append(missing, p.UID)
			continue
		}
		from := p.Ready
		if fromServing && p.Serving.After(from) {
			from = p.Serving
		}
		lags = append(lags, got.Sub(from)-settle)
	}
	sort.Strings(missing)
	return lags, missing
}

// TraceID is the trace ID readyspan gives a Pod's trace: its UID without dashes.
func TraceID(uid string) string { return strings.ReplaceAll(strings.ToLower(uid), "-", "") }

// Sustained is the rate at which Pods turned Ready: Pods after the first over the time from the
// first to the last Ready (0 for fewer than two).
func Sustained(pods []PodTimes) float64 {
	var first, last time.Time
	n := 0
	for _, p := range pods {
		if p.Ready.IsZero() {
			continue
		}
		n++
		if first.IsZero() || p.Ready.Before(first) {
			first = p.Ready
		}
		if p.Ready.After(last) {
			last = p.Ready
		}
	}
	if n < 2 || !last.After(first) {
		return 0
	}
	return round(float64(n-1)/last.Sub(first).Seconds(), 2)
}

// Process is one process's cost over the run.
type Process struct {
	CPUSeconds     float64 `json:"cpu_seconds"`               // over the load phase and the export that follows
	CPUPer1000Pods float64 `json:"cpu_seconds_per_1000_pods"` // CPUSeconds per 1,000 Pod startups
	CPUCores       float64 `json:"cpu_cores"`                 // CPUSeconds over the wall time
	RSSIdleMiB     float64 `json:"rss_idle_mib"`              // synced, before the load
	RSSSteadyMiB   float64 `json:"rss_steady_mib"`            // median after the load, every Pod still cached
	RSSPeakMiB     float64 `json:"rss_peak_mib"`              // VmHWM
	BytesPerPod    float64 `json:"bytes_per_cached_pod"`      // (steady − idle) / Pods existing at the end
	// ReadMiB is what the process read (procstat's ReadBytes) over the same time as CPUSeconds:
	// for a watcher, what the apiserver sent it, as received.
	ReadMiB float64 `json:"read_mib"`
	// RSSTrendMiBPerMin is the slope of RSS over the second half of the load: with Deployments
	// rolled again and again at a constant number of Pods (a soak), memory that is let go stays
	// flat and anything kept per startup shows as a rise.
	RSSTrendMiBPerMin float64 `json:"rss_trend_mib_per_min"`
}

// Window marks the phases of a run in the samples.
type Window struct {
	LoadStart time.Time // the driver's first create
	LoadEnd   time.Time // every trace received (or the wait for them ended)
	End       time.Time // the end of the steady-state samples
}

// Cost computes a Process from its samples: idle RSS from those before LoadStart, CPU between
// LoadStart and LoadEnd, steady RSS from those after LoadEnd.
func Cost(samples []procstat.Sample, w Window, startups, pods int) Process {
	var idle, steady []float64
	var cpuStart, cpuEnd *procstat.Sample
	var out Process
	var trendMin, trendMiB []float64 // the load's second half: minutes since it began, RSS
	secondHalf := w.LoadStart.Add(w.LoadEnd.Sub(w.LoadStart) / 2)
	for i := range samples {
		s := &samples[i]
		if s.Finished {
			continue
		}
		out.RSSPeakMiB = math.Max(out.RSSPeakMiB, mib(s.PeakRSS))
		switch {
		case s.At.Before(w.LoadStart):
			idle = append(idle, float64(s.RSS))
			cpuStart = s
		case !s.At.After(w.LoadEnd):
			cpuEnd = s
			if !s.At.Before(secondHalf) {
				trendMin = append(trendMin, s.At.Sub(w.LoadStart).Minutes())
				trendMiB = append(trendMiB, mib(s.RSS))
			}
		default:
			steady = append(steady, float64(s.RSS))
		}
	}
	if cpuStart != nil && cpuEnd != nil {
		out.CPUSeconds = round((cpuEnd.CPU - cpuStart.CPU).Seconds(), 2)
		out.ReadMiB = round(mib(cpuEnd.ReadBytes-cpuStart.ReadBytes), 2)
		if wall := cpuEnd.At.Sub(cpuStart.At).Seconds(); wall > 0 {
			out.CPUCores = round(out.CPUSeconds/wall, 3)
		}
		if startups > 0 {
			out.CPUPer1000Pods = round(out.CPUSeconds*1000/float64(startups), 3)
		}
	}
	out.RSSTrendMiBPerMin = round(slope(trendMin, trendMiB), 2)
	idleRSS, steadyRSS := median(idle), median(steady)
	out.RSSIdleMiB, out.RSSSteadyMiB = round(idleRSS/(1<<20), 1), round(steadyRSS/(1<<20), 1)
	out.RSSPeakMiB = round(out.RSSPeakMiB, 1)
	if pods > 0 && len(idle) > 0 && len(steady) > 0 {
		out.BytesPerPod = math.Round((steadyRSS - idleRSS) / float64(pods))
	}
	return out
}

// slope is the least-squares slope of y over x, 0 with fewer than two distinct x.
func slope(x, y []float64) float64 {
	n := float64(len(x))
	if n < 2 {
		return 0
	}
	var sx, sy, sxx, sxy float64
	for i := range x {
		sx, sy, sxx, sxy = sx+x[i], sy+y[i], sxx+x[i]*x[i], sxy+x[i]*y[i]
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

// Ratio is readyspan's figure over the baseline's (0 when the baseline's is 0).
func Ratio(readyspan, baseline float64) float64 {
	if baseline == 0 {
		return 0
	}
	return round(readyspan/baseline, 2)
}

// Report is one run's figures.
type Report struct {
	Level           Level              `json:"level"`
	ExportLag       Summary            `json:"export_lag"`                    // trace received − Ready − settle
	ExportLagServed Summary            `json:"export_lag_from_serving"`       // the same from the address ready in a slice
	Traces          int                `json:"traces"`                        // distinct Pods' traces received
	Repeats         int                `json:"trace_repeats"`                 // Pods' root spans received beyond one each
	Rollouts        int                `json:"rollout_traces"`                // distinct rollouts' traces received
	RolloutRepeats  int                `json:"rollout_repeats"`               // rollouts' root spans received beyond one each
	RootsByShard    map[string]int     `json:"root_spans_by_shard,omitempty"` // root spans received from each shard (readyspan.shard)
	Shards          []Process          `json:"shards,omitempty"`              // each shard's own cost; Readyspan is their sum
	Collector       *Process           `json:"collector,omitempty"`           // the OpenTelemetry Collector between readyspan and the receiver, when run
	CollectorSpans  map[string]float64 `json:"collector_spans,omitempty"`     // its receiver's accepted and refused spans, its exporter's sent and failed
	NoTrace         int                `json:"pods_without_trace"`
	Readyspan       Process            `json:"readyspan"`
	Baseline        Process            `json:"baseline"`
	BaselineJSON    *Process           `json:"baseline_json,omitempty"` // the same informers over JSON, when run
	RSSRatio        float64            `json:"rss_steady_ratio"`
	PeakRatio       float64            `json:"rss_peak_ratio"`
	CPURatio        float64            `json:"cpu_ratio"`
	WatchEvents     map[string]float64 `json:"watch_events"` // readyspan_watch_events_total by resource, over the run
	WatchEventsPerS float64            `json:"watch_events_per_second"`
	Dropped         map[string]float64 `json:"dropped"`           // readyspan_traces_dropped_total by reason
	Unparsed        map[string]float64 `json:"unparsed_messages"` // readyspan_unparsed_messages_total by reason
	ExportErrors    float64            `json:"export_errors"`
	UIRingMiB       float64            `json:"ui_ring_mib"`        // readyspan_ui_ring_bytes at the end: the web UI's recent traces, part of readyspan's RSS
	OTLPIn          *OTLPIn            `json:"otlp_in,omitempty"`  // readyspan's OTLP input, when it received spans (SCALE_OTLP_RECEIVE)
	ReadyspanHeap   Heap               `json:"readyspan_heap"`     // readyspan's Go heap at the end of the steady state
	Requests        map[string]float64 `json:"apiserver_requests"` // dispatched by the apiserver, by flow schema (one per user)
	// Watchers are readyspan and the baselines side by side, each in its encoding: what each
	// cost, and what the apiserver spent on it.
	Watchers []Watcher `json:"watchers,omitempty"`
	// APIServer is the kube-apiserver process over the same time, serving every client (the load
	// driver's writes, the controllers, KWOK and the watchers).
	APIServer *Process `json:"apiserver,omitempty"`
	// APIServerSent is what the apiserver's metrics say it sent every client over the run:
	// watch events and their MiB (apiserver_watch_events_sizes), LIST response MiB
	// (apiserver_response_sizes). They name no user.
	APIServerSent map[string]float64 `json:"apiserver_sent,omitempty"`
	Restart       *Restart           `json:"restart,omitempty"` // a fresh readyspan and baseline started into the cluster the load left
	Notes         []string           `json:"notes,omitempty"`
}

// Watcher is one watcher of the run, as its own user with a FlowSchema of its own.
type Watcher struct {
	Name     string  `json:"name"`     // readyspan, baseline
	Encoding string  `json:"encoding"` // what it asked for: protobuf, json
	User     string  `json:"user"`     // its user and FlowSchema
	Process  Process `json:"process"`  // its CPU, memory and bytes read (what the apiserver sent it)
	// Requests and RequestSeconds are the apiserver's flow-control figures of the user's
	// FlowSchema over the run: requests dispatched, and the seconds they executed (for a watch,
	// its start and streamed initial list, not the events it sends afterwards).
	Requests       float64 `json:"apiserver_requests"`
	RequestSeconds float64 `json:"apiserver_request_seconds"`
}

// OTLPIn is what readyspan's OTLP input (--otlp-receive) took in over the run, from its
// metrics at the end.
type OTLPIn struct {
	Received map[string]float64 `json:"received_spans"` // readyspan_otlp_received_spans_total by component
	Joined   map[string]float64 `json:"joined_spans"`   // readyspan_otlp_joined_spans_total by component
	Dropped  map[string]float64 `json:"dropped_spans"`  // readyspan_otlp_dropped_spans_total by reason
	// HeldSpans and HeldMiB are what it held at the end (readyspan_otlp_held_spans, _bytes):
	// spans no trace took yet, kept until --otlp-receive-hold.
	HeldSpans float64 `json:"held_spans"`
	HeldMiB   float64 `json:"held_mib"`
	// Missing is readyspan_otlp_traces_missing_component_total by component: traces exported
	// without spans they waited for.
	Missing map[string]float64 `json:"traces_missing_component"`
}

// Restart is what it costs to start watching a cluster that is already full: a readyspan (after
// a crash, an upgrade, a handover) and a baseline started side by side once the load is over,
// every Pod of it still there.
type Restart struct {
	Pods      int     `json:"pods"` // Pods in the cluster the processes started into
	Readyspan Catchup `json:"readyspan"`
	Baseline  Catchup `json:"baseline"`
	PeakRatio float64 `json:"rss_peak_ratio"`
	// Requests are, for each resource the processes watch, the apiserver's LIST requests over
	// the phase and the change in its open WATCH requests ("LIST pods", "open WATCH pods"),
	// from every client (the cluster is otherwise quiet). Two more open watches of a resource
	// and no LIST of it: both processes streamed their initial list (WatchList).
	Requests map[string]float64 `json:"apiserver_list_watch"`
	// ReadyspanHeap is readyspan's Go heap at the end of the phase: with Report.ReadyspanHeap,
	// whether a difference in RSS is data held or heap the runtime keeps.
	ReadyspanHeap Heap `json:"readyspan_heap"`
	// NewTraces and NewRollouts are the Pod and rollout traces received over the phase: none is
	// expected, every Pod having been Ready before the processes started.
	NewTraces   int `json:"new_pod_traces"`
	NewRollouts int `json:"new_rollout_traces"`
}

// Heap is a Go process's heap as its go_memstats metrics give it.
type Heap struct {
	AllocMiB  float64 `json:"alloc_mib"`     // heap objects, live and not yet collected
	InUseMiB  float64 `json:"inuse_mib"`     // spans holding objects
	KeptMiB   float64 `json:"idle_kept_mib"` // free spans not yet returned to the OS (part of RSS)
	NextGCMiB float64 `json:"next_gc_mib"`   // the heap size the next collection is due at
}

func (h Heap) String() string {
	return fmt.Sprintf("%.1f, %.1f, %.1f, %.1f", h.AllocMiB, h.InUseMiB, h.KeptMiB, h.NextGCMiB)
}

// HeapOf reads a Heap from a process's metric families.
func HeapOf(fams map[string]*dto.MetricFamily) Heap {
	get := func(name string) float64 {
		f, ok := fams[name]
		if !ok || len(f.GetMetric()) == 0 {
			return 0
		}
		return f.GetMetric()[0].GetGauge().GetValue() / (1 << 20)
	}
	return Heap{AllocMiB: get("go_memstats_heap_alloc_bytes"), InUseMiB: get("go_memstats_heap_inuse_bytes"),
		KeptMiB: get("go_memstats_heap_idle_bytes") - get("go_memstats_heap_released_bytes"), NextGCMiB: get("go_memstats_next_gc_bytes")}
}

// Catchup is one process's start into the full cluster.
type Catchup struct {
	SyncSeconds float64 `json:"sync_seconds"` // started → /readyz answered (every list synced)
	CPUSeconds  float64 `json:"cpu_seconds"`  // to sync
	RSSSyncMiB  float64 `json:"rss_at_sync_mib"`
	RSSAfterMiB float64 `json:"rss_after_mib"` // at the end of the phase (scalerun --restart-after)
	RSSPeakMiB  float64 `json:"rss_peak_mib"`  // VmHWM over the phase
}

// CatchupOf reads a Catchup from the samples of a process started at started whose /readyz
// first answered at synced: the CPU and RSS of the last sample at or before synced, the RSS of
// the last sample, the highest VmHWM.
func CatchupOf(samples []procstat.Sample, started, synced time.Time) Catchup {
	c := Catchup{SyncSeconds: synced.Sub(started).Seconds()}
	for _, sm := range samples {
		if sm.Finished {
			continue
		}
		if !sm.At.After(synced) {
			c.CPUSeconds, c.RSSSyncMiB = sm.CPU.Seconds(), mib(sm.RSS)
		}
		c.RSSAfterMiB = mib(sm.RSS)
		c.RSSPeakMiB = max(c.RSSPeakMiB, mib(sm.PeakRSS))
	}
	return c
}

// Table writes the report as the table make scale prints.
func (r *Report) Table(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	l := r.Level
	fmt.Fprintf(tw, "level\t%d nodes, %d Pods (%d startups: %d rolls), %.0f Pods/s asked, settle %s\n", l.Nodes, l.Pods, l.Startups, l.Rolls, l.Rate, l.Settle)
	fmt.Fprintf(tw, "load\t%s, %.1f Pods/s sustained, complete %v (missing %d)\n", l.Duration, l.Sustain, l.Complete, l.Missing)
	fmt.Fprintf(tw, "export lag (Ready → trace received − settle)\tp50 %s  p99 %s  max %s  (n %d, no trace %d)\n",
		fmtMs(r.ExportLag.P50ms), fmtMs(r.ExportLag.P99ms), fmtMs(r.ExportLag.MaxMs), r.ExportLag.N, r.NoTrace)
	fmt.Fprintf(tw, "export lag from serving (endpoints ready)\tp50 %s  p99 %s  max %s\n",
		fmtMs(r.ExportLagServed.P50ms), fmtMs(r.ExportLagServed.P99ms), fmtMs(r.ExportLagServed.MaxMs))
	fmt.Fprintf(tw, "traces received (repeats)\t%d Pods (%d), %d rollouts (%d)\n", r.Traces, r.Repeats, r.Rollouts, r.RolloutRepeats)
	if len(r.Shards) > 0 {
		fmt.Fprintf(tw, "root spans by shard\t%s\n", fmtCounts(r.RootsByShard))
		for i, p := range r.Shards {
			fmt.Fprintf(tw, "shard %d of %d\tCPU %.2f s, RSS steady %.1f MiB, peak %.1f MiB\n", i, len(r.Shards), p.CPUSeconds, p.RSSSteadyMiB, p.RSSPeakMiB)
		}
	}
	if c := r.Collector; c != nil {
		fmt.Fprintf(tw, "collector\tCPU %.2f s (%.3f cores), RSS steady %.1f MiB, peak %.1f MiB; spans %s\n", c.CPUSeconds, c.CPUCores, c.RSSSteadyMiB, c.RSSPeakMiB, fmtMap(r.CollectorSpans))
	}
	fmt.Fprintf(tw, "watch events/s (readyspan)\t%.1f\n", r.WatchEventsPerS)
	fmt.Fprintf(tw, "dropped / unparsed / export errors\t%s / %s / %.0f\n", fmtMap(r.Dropped), fmtMap(r.Unparsed), r.ExportErrors)
	fmt.Fprintf(tw, "apiserver requests by user\t%s\n", fmtMap(r.Requests))
	if o := r.OTLPIn; o != nil {
		fmt.Fprintf(tw, "OTLP input: received / joined spans\t%s / %s\n", fmtMap(o.Received), fmtMap(o.Joined))
		fmt.Fprintf(tw, "OTLP input: dropped spans / traces missing a component\t%s / %s\n", fmtMap(o.Dropped), fmtMap(o.Missing))
	}
	fmt.Fprintf(tw, "\t\n")
	fmt.Fprintf(tw, "\treadyspan\tbaseline\tratio\n")
	fmt.Fprintf(tw, "CPU seconds (load + export)\t%.2f\t%.2f\t%.2f\n", r.Readyspan.CPUSeconds, r.Baseline.CPUSeconds, r.CPURatio)
	fmt.Fprintf(tw, "CPU seconds per 1,000 Pods\t%.3f\t%.3f\t\n", r.Readyspan.CPUPer1000Pods, r.Baseline.CPUPer1000Pods)
	fmt.Fprintf(tw, "CPU cores (average)\t%.3f\t%.3f\t\n", r.Readyspan.CPUCores, r.Baseline.CPUCores)
	fmt.Fprintf(tw, "RSS idle MiB\t%.1f\t%.1f\t\n", r.Readyspan.RSSIdleMiB, r.Baseline.RSSIdleMiB)
	fmt.Fprintf(tw, "RSS steady MiB\t%.1f\t%.1f\t%.2f\n", r.Readyspan.RSSSteadyMiB, r.Baseline.RSSSteadyMiB, r.RSSRatio)
	fmt.Fprintf(tw, "RSS peak MiB\t%.1f\t%.1f\t%.2f\n", r.Readyspan.RSSPeakMiB, r.Baseline.RSSPeakMiB, r.PeakRatio)
	fmt.Fprintf(tw, "  of which the UI's ring of recent traces\t%.1f\t\t\n", r.UIRingMiB)
	if o := r.OTLPIn; o != nil {
		fmt.Fprintf(tw, "  held by the OTLP input at the end\t%.1f (%.0f spans)\t\t\n", o.HeldMiB, o.HeldSpans)
	}
	fmt.Fprintf(tw, "RSS trend, the load's second half, MiB/min\t%.2f\t%.2f\t\n", r.Readyspan.RSSTrendMiBPerMin, r.Baseline.RSSTrendMiBPerMin)
	fmt.Fprintf(tw, "bytes per cached Pod\t%.0f\t%.0f\t\n", r.Readyspan.BytesPerPod, r.Baseline.BytesPerPod)
	if p := r.BaselineJSON; p != nil {
		fmt.Fprintf(tw, "baseline over JSON\tCPU %.2f s, RSS steady %.1f MiB, peak %.1f MiB\t\t\n", p.CPUSeconds, p.RSSSteadyMiB, p.RSSPeakMiB)
	}
	if len(r.Watchers) > 0 {
		fmt.Fprintf(tw, "\t\n")
		fmt.Fprintf(tw, "each watcher\tCPU s\tCPU s per 1,000 Pods\tRSS steady / peak MiB\tread MiB (what the apiserver sent it)\tapiserver: requests, seconds executing\n")
		for _, wr := range r.Watchers {
			p := wr.Process
			fmt.Fprintf(tw, "%s (%s)\t%.2f\t%.3f\t%.1f / %.1f\t%.1f\t%.0f, %.3f\n", wr.Name, wr.Encoding, p.CPUSeconds, p.CPUPer1000Pods, p.RSSSteadyMiB, p.RSSPeakMiB, p.ReadMiB, wr.Requests, wr.RequestSeconds)
		}
	}
	if p := r.APIServer; p != nil {
		sent := r.APIServerSent
		fmt.Fprintf(tw, "kube-apiserver (every client)\t%.2f\t%.3f\t%.1f / %.1f\tsent %.0f watch events, %.1f MiB; LIST responses %.1f MiB\t\n", p.CPUSeconds, p.CPUPer1000Pods, p.RSSSteadyMiB, p.RSSPeakMiB,
			sent["watch events"], sent["watch event MiB"], sent["LIST response MiB"])
	}
	if rs := r.Restart; rs != nil {
		fmt.Fprintf(tw, "\t\n")
		fmt.Fprintf(tw, "started into the full cluster (%d Pods)\treadyspan\tbaseline\tratio\n", rs.Pods)
		fmt.Fprintf(tw, "seconds to sync\t%.1f\t%.1f\t\n", rs.Readyspan.SyncSeconds, rs.Baseline.SyncSeconds)
		fmt.Fprintf(tw, "CPU seconds to sync\t%.2f\t%.2f\t\n", rs.Readyspan.CPUSeconds, rs.Baseline.CPUSeconds)
		fmt.Fprintf(tw, "RSS at sync / after, MiB\t%.1f / %.1f\t%.1f / %.1f\t\n", rs.Readyspan.RSSSyncMiB, rs.Readyspan.RSSAfterMiB, rs.Baseline.RSSSyncMiB, rs.Baseline.RSSAfterMiB)
		fmt.Fprintf(tw, "RSS peak MiB\t%.1f\t%.1f\t%.2f\n", rs.Readyspan.RSSPeakMiB, rs.Baseline.RSSPeakMiB, rs.PeakRatio)
		fmt.Fprintf(tw, "readyspan's heap, MiB: objects, in use, kept idle, next GC\t%s (steady state before: %s)\t\t\n", rs.ReadyspanHeap, r.ReadyspanHeap)
		fmt.Fprintf(tw, "apiserver LISTs, open WATCHes (every client)\t%s\t\t\n", fmtMap(rs.Requests))
		fmt.Fprintf(tw, "traces received meanwhile (none expected)\t%d Pods, %d rollouts\t\t\n", rs.NewTraces, rs.NewRollouts)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(tw, "note\t%s\n", n)
	}
	return tw.Flush()
}

func fmtMs(v float64) string {
	return time.Duration(v * float64(time.Millisecond)).Round(time.Millisecond).String()
}

// fmtMap lists the non-zero entries of m by key ("none" if there is none).
func fmtCounts(m map[string]int) string {
	f := make(map[string]float64, len(m))
	for k, v := range m {
		f[k] = float64(v)
	}
	return fmtMap(f)
}

func fmtMap(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if v != 0 {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return "none"
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%.0f", k, m[k])
	}
	return strings.Join(parts, " ")
}
