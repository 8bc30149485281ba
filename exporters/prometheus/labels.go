package prometheus

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// The opt-in labels of the Pod histograms (Options.PodLabels).
const (
	// LabelNamespace is the Pod's namespace.
	LabelNamespace = "namespace"
	// LabelWorkload is the name of the workload the Pod belongs to: its Deployment for a
	// Deployment's ReplicaSet, else its controller (ReplicaSet, StatefulSet, DaemonSet, Job…);
	// empty for a bare Pod.
	LabelWorkload = "workload"
)

// PodLabels are the values Options.PodLabels may hold, in the order they are added.
var PodLabels = []string{LabelNamespace, LabelWorkload}

// OtherValue is what an opt-in label reads once its cap is reached.
const OtherValue = "other"

// DefaultLabelLimit bounds each opt-in label's values unless --metrics-label-limit says
// otherwise: enough for a cluster's teams, small enough that readyspan_phase_duration_seconds
// (six phases, a few outcomes, 21 buckets each) stays within tens of thousands of series.
const DefaultLabelLimit = 50

// Options are the opt-in parts of readyspan's metrics.
type Options struct {
	// PodLabels are labels added to the Pod histograms (readyspan_phase_duration_seconds,
	// readyspan_pod_startup_duration_seconds, readyspan_pod_startup_sli_duration_seconds):
	// LabelNamespace, LabelWorkload or both. None by default.
	PodLabels []string
	// LabelLimit is how many values each of them keeps: the namespace label its first
	// LabelLimit namespaces, the workload label its first LabelLimit workloads (a workload is
	// its namespace and its name). Later ones read OtherValue and are counted in
	// readyspan_metrics_label_overflow_total.
	LabelLimit int
}

// Validate checks the options: known labels, each once, and a positive limit when any is on.
func (o Options) Validate() error {
	for i, l := range o.PodLabels {
		if !slices.Contains(PodLabels, l) {
			return fmt.Errorf("--metrics-pod-labels: unknown label %q (allowed: %s)", l, strings.Join(PodLabels, ", "))
		}
		if slices.Contains(o.PodLabels[:i], l) {
			return fmt.Errorf("--metrics-pod-labels: %q given twice", l)
		}
	}
	if len(o.PodLabels) > 0 && o.LabelLimit < 1 {
		return errors.New("--metrics-label-limit must be at least 1 with --metrics-pod-labels")
	}
	return nil
}

// podLabeler gives the opt-in labels' values for a Pod, each capped: a label's first limit
// values are kept, later ones become OtherValue, and each trace that gets OtherValue is counted
// by label. The Pod histograms then hold at most limit+1 namespaces and, with both labels,
// 2·limit+1 (namespace, workload) pairs: limit workloads, each kept namespace's "other", and
// ("other", "other").
type podLabeler struct {
	namespace, workload bool
	names               []string // the labels, in PodLabels' order
	limit               int
	overflow            *prometheus.CounterVec

	mu         sync.Mutex
	namespaces map[string]struct{}
	workloads  map[workloadKey]struct{}
}

// workloadKey is a workload as the cap counts it: the same name in two namespaces is two
// workloads.
type workloadKey struct{ namespace, name string }

func newPodLabeler(o Options, overflow *prometheus.CounterVec) *podLabeler {
	l := &podLabeler{limit: o.LabelLimit, overflow: overflow,
		namespaces: map[string]struct{}{}, workloads: map[workloadKey]struct{}{}}
	for _, name := range PodLabels {
		if !slices.Contains(o.PodLabels, name) {
			continue
		}
		l.names = append(l.names, name)
		overflow.WithLabelValues(name) // counted from zero: an alert on it sees the first
		switch name {
		case LabelNamespace:
			l.namespace = true
		case LabelWorkload:
			l.workload = true
		}
	}
	return l
}

// values are the opt-in labels' values for a Pod of the namespace and workload, in l.names'
// order (none when no label is on).
func (l *podLabeler) values(namespace, workload string) []string {
	if len(l.names) == 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, 2)
	nsKept := true
	if l.namespace {
		nsKept = admit(l.namespaces, namespace, l.limit)
		if nsKept {
			out = append(out, namespace)
		} else {
			out = append(out, OtherValue)
			l.overflow.WithLabelValues(LabelNamespace).Inc()
		}
	}
	if l.workload {
		// A workload of a namespace that fell into "other" has no name of its own there: it
		// would mix names from every namespace past the cap.
		if nsKept && admit(l.workloads, workloadKey{namespace, workload}, l.limit) {
			out = append(out, workload)
		} else {
			out = append(out, OtherValue)
			l.overflow.WithLabelValues(LabelWorkload).Inc()
		}
	}
	return out
}

// admit reports whether v keeps its own value: it has one already, or the set is under the cap
// and v takes the next place.
func admit[K comparable](set map[K]struct{}, v K, limit int) bool {
	if _, ok := set[v]; ok {
		return true
	}
	if len(set) >= limit {
		return false
	}
	set[v] = struct{}{}
	return true
}
