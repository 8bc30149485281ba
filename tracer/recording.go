package tracer

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/readyspan/readyspan/phases"
)

// A recording is a directory with one file per watched stream:
//
//	watch.<stream>.jsonl   one watch event per line: {"type":"ADDED","object":{…},"recv":"…"}
//	<stream>.json          a List snapshot (kubectl get -o json), used when no watch file exists
//
// audit.jsonl, if present, holds kube-apiserver audit log lines (the log backend's JSON lines).
//
// "recv" is readyspan's local receive time (RFC 3339, nanoseconds) and "initial" marks objects
// of the initial list. Recordings without "recv" (captured with curl ?watch=1) are replayed in
// resourceVersion order with object and event timestamps only.
//
// Streams: pods, replicasets, deployments, statefulsets, daemonsets, controllerrevisions,
// services, endpointslices, events.core.v1 and events.events.k8s.io.v1 (both views of the same
// Events; duplicates are dropped by UID).

// Stream is one recorded stream: a resource read through one API.
type Stream string

const (
	StreamPods           Stream = "pods"
	StreamReplicaSets    Stream = "replicasets"
	StreamDeployments    Stream = "deployments"
	StreamStatefulSets   Stream = "statefulsets"
	StreamDaemonSets     Stream = "daemonsets"
	StreamRevisions      Stream = "controllerrevisions"
	StreamServices       Stream = "services"
	StreamEndpointSlices Stream = "endpointslices"
	StreamEventsCore     Stream = "events.core.v1"
	StreamEventsV1       Stream = "events.events.k8s.io.v1"
)

// snapshotOrder is the order list snapshots are fed in: owners and Services before Pods, events
// before Pods so a Pod completed by its snapshot already has them.
var snapshotOrder = []Stream{StreamDeployments, StreamStatefulSets, StreamDaemonSets, StreamRevisions, StreamReplicaSets, StreamServices, StreamEventsCore, StreamEventsV1, StreamEndpointSlices, StreamPods}

func (s Stream) resource() Resource {
	switch s {
	case StreamPods:
		return ResourcePods
	case StreamReplicaSets:
		return ResourceReplicaSets
	case StreamDeployments:
		return ResourceDeployments
	case StreamStatefulSets:
		return ResourceStatefulSets
	case StreamDaemonSets:
		return ResourceDaemonSets
	case StreamRevisions:
		return ResourceControllerRevisions
	case StreamServices:
		return ResourceServices
	case StreamEndpointSlices:
		return ResourceEndpointSlices
	}
	return ResourceEvents
}

func (s Stream) newObject() runtime.Object {
	switch s {
	case StreamPods:
		return &corev1.Pod{}
	case StreamReplicaSets:
		return &appsv1.ReplicaSet{}
	case StreamDeployments:
		return &appsv1.Deployment{}
	case StreamStatefulSets:
		return &appsv1.StatefulSet{}
	case StreamDaemonSets:
		return &appsv1.DaemonSet{}
	case StreamRevisions:
		return &appsv1.ControllerRevision{}
	case StreamServices:
		return &corev1.Service{}
	case StreamEndpointSlices:
		return &discoveryv1.EndpointSlice{}
	case StreamEventsCore:
		return &corev1.Event{}
	case StreamEventsV1:
		return &eventsv1.Event{}
	}
	return nil
}

// StreamFor returns the stream an object is recorded in.
func StreamFor(obj runtime.Object) (Stream, bool) {
	switch obj.(type) {
	case *corev1.Pod:
		return StreamPods, true
	case *appsv1.ReplicaSet:
		return StreamReplicaSets, true
	case *appsv1.Deployment:
		return StreamDeployments, true
	case *appsv1.StatefulSet:
		return StreamStatefulSets, true
	case *appsv1.DaemonSet:
		return StreamDaemonSets, true
	case *appsv1.ControllerRevision:
		return StreamRevisions, true
	case *corev1.Service:
		return StreamServices, true
	case *discoveryv1.EndpointSlice:
		return StreamEndpointSlices, true
	case *corev1.Event:
		return StreamEventsCore, true
	case *eventsv1.Event:
		return StreamEventsV1, true
	}
	return "", false
}

// Line is one recorded watch event.
type Line struct {
	Type    DeltaType       `json:"type"`
	Object  json.RawMessage `json:"object"`
	Recv    *time.Time      `json:"recv,omitempty"`
	Initial bool            `json:"initial,omitempty"`
	// FinalStateUnknown: a deletion a relist found; the object holds its identity only.
	FinalStateUnknown bool `json:"finalStateUnknown,omitempty"`
}

// LoadError lists the lines of a recording that could not be read. Loading goes on past them:
// one bad line must not lose the rest of a bug report.
type LoadError struct {
	Problems []string
}

func (e *LoadError) Error() string {
	if len(e.Problems) == 1 {
		return e.Problems[0]
	}
	return fmt.Sprintf("%d unreadable lines in the recording; first: %s", len(e.Problems), e.Problems[0])
}

// LoadRecording reads a recording directory into Deltas in replay order. It returns the deltas
// it could read together with a *LoadError describing lines it skipped.
func LoadRecording(dir string) ([]Delta, error) {
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("recording: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("recording %s is not a directory", dir)
	}
	var deltas []Delta
	var problems []string
	found := false
	allRecv := true
	var snapshots []Delta
	for _, s := range snapshotOrder {
		watchPath := filepath.Join(dir, "watch."+string(s)+".jsonl")
		if f, err := os.Open(watchPath); err == nil {
			found = true
			ds, probs, recv := readWatch(f, s, watchPath)
			f.Close()
			deltas = append(deltas, ds...)
			problems = append(problems, probs...)
			allRecv = allRecv && recv
			continue
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("open %s: %w", watchPath, err)
		}
		listPath := filepath.Join(dir, string(s)+".json")
		b, err := os.ReadFile(listPath)
		if errors.Is(err, os.ErrNotExist) {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("read %s: %w", listPath, err)
		}
		found = true
		ds, err := readList(b, s)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", listPath, err))
			continue
		}
		snapshots = append(snapshots, ds...)
	}
	if !found {
		return nil, fmt.Errorf("no recording in %s: expected watch.<stream>.jsonl or <stream>.json files (streams: pods, replicasets, deployments, services, endpointslices, events.core.v1, events.events.k8s.io.v1)", dir)
	}
	// Initial lists come before the changes that follow them, as in a live watch.
	var initial []Delta
	live := deltas[:0]
	for _, d := range deltas {
		if d.Initial {
			initial = append(initial, d)
		} else {
			live = append(live, d)
		}
	}
	snapshots = append(snapshots, initial...)
	deltas = live
	if allRecv {
		sort.SliceStable(deltas, func(i, j int) bool { return deltas[i].Recv.Before(deltas[j].Recv) })
	} else {
		// Without receive times, etcd revisions order changes across all resources.
		for i := range deltas {
			deltas[i].Recv = time.Time{}
		}
		sort.SliceStable(deltas, func(i, j int) bool { return rvOf(deltas[i].Object) < rvOf(deltas[j].Object) })
	}
	audit, probs, err := readAuditFile(filepath.Join(dir, "audit.jsonl"))
	if err != nil {
		return nil, err
	}
	problems = append(problems, probs...)
	out := append(audit, append(snapshots, deltas...)...)
	if len(problems) > 0 {
		return out, &LoadError{Problems: problems}
	}
	return out, nil
}

func rvOf(o runtime.Object) uint64 {
	type rv interface{ GetResourceVersion() string }
	if m, ok := o.(rv); ok {
		n, _ := strconv.ParseUint(m.GetResourceVersion(), 10, 64)
		return n
	}
	return 0
}

func readWatch(r io.Reader, s Stream, path string) ([]Delta, []string, bool) {
	var out []Delta
	var problems []string
	allRecv := true
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	n := 0
	for sc.Scan() {
		n++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		var l Line
		if err := json.Unmarshal([]byte(text), &l); err != nil {
			problems = append(problems, fmt.Sprintf("%s:%d: not a watch event: %v", path, n, err))
			continue
		}
		switch l.Type {
		case Added, Modified, Deleted:
		case "BOOKMARK", "ERROR":
			continue
		default:
			problems = append(problems, fmt.Sprintf("%s:%d: unknown watch event type %q", path, n, l.Type))
			continue
		}
		obj := s.newObject()
		if err := json.Unmarshal(l.Object, obj); err != nil {
			problems = append(problems, fmt.Sprintf("%s:%d: object is not a %s: %v", path, n, s, err))
			continue
		}
		d := Delta{Resource: s.resource(), Type: l.Type, Object: obj, Initial: l.Initial, FinalStateUnknown: l.FinalStateUnknown}
		if l.Recv != nil {
			d.Recv = *l.Recv
		} else {
			allRecv = false
		}
		out = append(out, d)
	}
	if err := sc.Err(); err != nil {
		problems = append(problems, fmt.Sprintf("%s:%d: %v", path, n+1, err))
	}
	return out, problems, allRecv
}

func readList(b []byte, s Stream) ([]Delta, error) {
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("not a List: %w", err)
	}
	out := make([]Delta, 0, len(list.Items))
	for i, raw := range list.Items {
		obj := s.newObject()
		if err := json.Unmarshal(raw, obj); err != nil {
			return nil, fmt.Errorf("item %d is not a %s: %w", i, s, err)
		}
		out = append(out, Delta{Resource: s.resource(), Type: Added, Object: obj, Initial: true})
	}
	return out, nil
}

// Replay feeds deltas to a correlator as the live watch would, running the deadlines at each
// receive time, and flushes the Pods still starting at the end as in-progress. It returns a
// warning for each trace whose recorded timestamps contradict each other (TimeWarnings): such
// a recording replays, but its figures are not to be believed, and a person should be told.
func Replay(c *Correlator, deltas []Delta) []string {
	var warnings []string
	sink := c.sink
	c.sink = SinkFunc(func(tr *phases.Trace) {
		warnings = append(warnings, TimeWarnings(tr)...)
		sink.Export(tr)
	})
	defer func() { c.sink = sink }()
	for _, d := range deltas {
		if !d.Recv.IsZero() {
			c.Tick(d.Recv)
		}
		c.Handle(d)
	}
	c.Flush(phases.OutcomeInProgress)
	return warnings
}

// TimeWarnings returns one line per impossible order of timestamps in the trace (a milestone
// stamped before one that must precede it, beyond precision and clock skew), naming the Pod.
func TimeWarnings(tr *phases.Trace) []string {
	out := make([]string, 0, len(tr.Summary.Inconsistencies))
	for _, why := range tr.Summary.Inconsistencies {
		out = append(out, fmt.Sprintf("pod %s/%s (trace %s): timestamps out of order: %s", tr.Pod.Namespace, tr.Pod.Name, tr.TraceID, why))
	}
	return out
}

func readAuditFile(path string) ([]Delta, []string, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	} else if err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	var out []Delta
	var problems []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for n := 1; sc.Scan(); n++ {
		a, err := ParseAuditLine(sc.Bytes())
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s:%d: %v", path, n, err))
			continue
		}
		if a != nil {
			out = append(out, Delta{Resource: ResourceAudit, Type: Added, Audit: a})
		}
	}
	return out, problems, sc.Err()
}
