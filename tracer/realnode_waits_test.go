package tracer

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/readyspan/readyspan/phases"
)

// waitsCapture is a recording (readyspan record -A -l readyspan.dev/e2e=local) of the three
// e2e tests of test/e2e/scheduling_waits_test.go on the local v1.37.2 node: a Pod gated for 4 s
// whose gate the test removed with an Update (field manager readyspan-e2e-gatekeeper), a Pod no
// node fitted until KWOK brought up the Node the test created after posting cluster-autoscaler's
// TriggeredScaleUp, and a high-priority Pod that preempted a low-priority one still starting.
var waitsCapture = filepath.Join("testdata", "real-node", "scheduling-waits")

// The e2e test's own clock around its write that removed the gate (its log: "gate removed
// between 18:54:32.702147 and 18:54:32.708853").
var (
	gateRemovedAfter  = time.Date(2026, 12, 2, 18, 54, 32, 702147000, time.UTC)
	gateRemovedBefore = time.Date(2026, 12, 2, 18, 54, 32, 708853000, time.UTC)
)

// waitsEvidence is what the capture's objects and Events state, read from the recorded JSON
// with nothing of the tracer's parsing.
type waitsEvidence struct {
	uid       map[string]string    // Pod name → UID
	failed    map[string]time.Time // Pod name → its first FailedScheduling eventTime
	scheduled map[string]time.Time // Pod name → its Scheduled eventTime
	preempted map[string]string    // victim name → the Preempted event's message
	node      string               // the Node created during the capture
	nodeMade  time.Time            // its creationTimestamp
	nodeReady time.Time            // its Ready condition's lastTransitionTime
	// gateManagers are the managedFields (manager@time) of the gated Pod's last version with its
	// gate and its first without.
	gateManagers [2]string
	nominated    string // a status.nominatedNodeName the preemptor showed
}

func readWaitsEvidence(t *testing.T) *waitsEvidence {
	t.Helper()
	ev := &waitsEvidence{uid: map[string]string{}, failed: map[string]time.Time{}, scheduled: map[string]time.Time{}, preempted: map[string]string{}}
	eachLine(t, filepath.Join(waitsCapture, "watch.events.core.v1.jsonl"), func(line []byte) {
		var w struct {
			Object struct {
				Reason         string                      `json:"reason"`
				Message        string                      `json:"message"`
				EventTime      time.Time                   `json:"eventTime"`
				InvolvedObject struct{ Kind, Name string } `json:"involvedObject"`
			} `json:"object"`
		}
		if err := json.Unmarshal(line, &w); err != nil {
			t.Fatal(err)
		}
		o := &w.Object
		name := o.InvolvedObject.Name
		switch o.Reason {
		case "FailedScheduling":
			if _, ok := ev.failed[name]; !ok {
				ev.failed[name] = o.EventTime
			}
		case "Scheduled":
			ev.scheduled[name] = o.EventTime
		case "Preempted":
			ev.preempted[name] = o.Message
		}
	})
	eachLine(t, filepath.Join(waitsCapture, "watch.nodes.jsonl"), func(line []byte) {
		var w struct {
			Initial bool `json:"initial"`
			Object  struct {
				Metadata struct {
					Name              string    `json:"name"`
					CreationTimestamp time.Time `json:"creationTimestamp"`
				} `json:"metadata"`
				Status struct {
					Conditions []struct {
						Type, Status       string
						LastTransitionTime time.Time `json:"lastTransitionTime"`
					} `json:"conditions"`
				} `json:"status"`
			} `json:"object"`
		}
		if err := json.Unmarshal(line, &w); err != nil {
			t.Fatal(err)
		}
		if w.Initial || !strings.HasPrefix(w.Object.Metadata.Name, "kwok-") {
			return
		}
		ev.node, ev.nodeMade = w.Object.Metadata.Name, w.Object.Metadata.CreationTimestamp
		for _, c := range w.Object.Status.Conditions {
			if c.Type == "Ready" && c.Status == "True" && ev.nodeReady.IsZero() {
				ev.nodeReady = c.LastTransitionTime
			}
		}
	})
	gated := false
	eachLine(t, filepath.Join(waitsCapture, "watch.pods.jsonl"), func(line []byte) {
		var w struct {
			Object struct {
				Metadata struct {
					Name, UID     string
					ManagedFields []struct {
						Manager string    `json:"manager"`
						Time    time.Time `json:"time"`
					} `json:"managedFields"`
				} `json:"metadata"`
				Spec struct {
					SchedulingGates []struct{ Name string } `json:"schedulingGates"`
				} `json:"spec"`
				Status struct {
					NominatedNodeName string `json:"nominatedNodeName"`
				} `json:"status"`
			} `json:"object"`
		}
		if err := json.Unmarshal(line, &w); err != nil {
			t.Fatal(err)
		}
		o := &w.Object
		ev.uid[o.Metadata.Name] = o.Metadata.UID
		if o.Metadata.Name == "preemptor" && o.Status.NominatedNodeName != "" {
			ev.nominated = o.Status.NominatedNodeName
		}
		if o.Metadata.Name != "gated" {
			return
		}
		var mf []string
		for _, f := range o.Metadata.ManagedFields {
			mf = append(mf, f.Manager+"@"+f.Time.Format(time.RFC3339))
		}
		switch {
		case len(o.Spec.SchedulingGates) > 0:
			gated, ev.gateManagers[0] = true, strings.Join(mf, ",")
		case gated && ev.gateManagers[1] == "":
			ev.gateManagers[1] = strings.Join(mf, ",")
		}
	})
	return ev
}

// TestRealNodeSchedulingWaits replays the capture and judges the waits against the API's own
// statements and the e2e test's clock; the full output is the golden scheduling-waits.txtar.
func TestRealNodeSchedulingWaits(t *testing.T) {
	traces := replayDir(t, waitsCapture)
	ev := readWaitsEvidence(t)
	byName := map[string]*phases.Trace{}
	for _, tr := range traces {
		checkShape(t, tr)
		byName[tr.Pod.Name] = tr
	}

	t.Run("gated", func(t *testing.T) {
		tr := byName["gated"]
		g := tr.Find(phases.SpanSchedulingGated)
		if g == nil {
			t.Fatal("no scheduling.gated span")
		}
		// The watch saw the gate gone within the test's write, a few ms after it returned at most.
		if g.End.Before(gateRemovedAfter) || g.End.After(gateRemovedBefore.Add(100*time.Millisecond)) {
			t.Errorf("scheduling.gated ends at %s, the test removed the gate between %s and %s", g.End.Format(time.StampMicro),
				gateRemovedAfter.Format(time.StampMicro), gateRemovedBefore.Format(time.StampMicro))
		}
		if s := ev.scheduled["gated"]; s.Before(g.End) {
			t.Errorf("Scheduled at %s, before the gate's removal at %s", s.Format(time.StampMicro), g.End.Format(time.StampMicro))
		}
		// What the capture shows of managedFields: the Update that only removed the gate changed
		// no entry (the apiserver stamps an entry when its manager sets a field), so nothing
		// there names the remover, and the span names none.
		if ev.gateManagers[0] == "" || ev.gateManagers[0] != ev.gateManagers[1] {
			t.Errorf("managedFields before and after the removal: %q, %q; the capture showed them unchanged", ev.gateManagers[0], ev.gateManagers[1])
		}
		if by := g.Attr(phases.AttrGatesRemovedBy); by != nil {
			t.Errorf("gates_removed_by=%v, but no managedFields entry changed", by)
		}
		if g.Attr(phases.AttrSourceEnd) != "watch" || g.Attr(phases.AttrPrecisionEnd) != "receive" {
			t.Errorf("gated end from %v (%v), want the watch", g.Attr(phases.AttrSourceEnd), g.Attr(phases.AttrPrecisionEnd))
		}
	})

	t.Run("waiting-for-node", func(t *testing.T) {
		tr := byName["waiter"]
		w := tr.Find(phases.SpanSchedulingWaitingForNode)
		if w == nil {
			t.Fatal("no scheduling.waiting_for_node span")
		}
		if ev.node == "" || ev.nodeReady.IsZero() {
			t.Fatalf("the capture shows no new Node Ready (%q)", ev.node)
		}
		if !w.Start.Equal(ev.failed["waiter"]) {
			t.Errorf("the wait starts at %s, the first FailedScheduling at %s", w.Start.Format(time.StampMicro), ev.failed["waiter"].Format(time.StampMicro))
		}
		if w.End.Before(ev.nodeReady) || w.End.After(ev.nodeReady.Add(time.Second)) {
			t.Errorf("the wait ends at %s, not in the Node's Ready second %s", w.End.Format(time.StampMicro), ev.nodeReady.Format(time.RFC3339))
		}
		if s := ev.scheduled["waiter"]; s.Before(w.End) {
			t.Errorf("Scheduled at %s, before the Node was Ready at %s", s.Format(time.StampMicro), w.End.Format(time.StampMicro))
		}
		if w.Attr(phases.AttrNodeName) != ev.node || w.Attr(phases.AttrAutoscaler) != "cluster-autoscaler" {
			t.Errorf("node %v, autoscaler %v; want %s, cluster-autoscaler", w.Attr(phases.AttrNodeName), w.Attr(phases.AttrAutoscaler), ev.node)
		}
		created, err := time.Parse(time.RFC3339Nano, w.Attr(phases.AttrNodeCreated).(string))
		if err != nil || created.Before(ev.nodeMade) || created.After(ev.nodeMade.Add(time.Second)) {
			t.Errorf("node created %v, its creationTimestamp %s", w.Attr(phases.AttrNodeCreated), ev.nodeMade.Format(time.RFC3339))
		}
	})

	t.Run("preemption", func(t *testing.T) {
		victim, preemptor := byName["victim"], byName["preemptor"]
		msg := ev.preempted["victim"]
		if !strings.Contains(msg, ev.uid["preemptor"]) {
			t.Fatalf("the Preempted event %q does not name the preemptor %s", msg, ev.uid["preemptor"])
		}
		if victim.Summary.Outcome != phases.OutcomeDeleted {
			t.Errorf("victim outcome %s", victim.Summary.Outcome)
		}
		root := victim.Root()
		if root.Attr(phases.AttrPreemptedByUID) != ev.uid["preemptor"] || root.Attr(phases.AttrPreemptedBy) != preemptor.Pod.Namespace+"/preemptor" {
			t.Errorf("victim preempted_by %v (%v), the event names %s", root.Attr(phases.AttrPreemptedBy), root.Attr(phases.AttrPreemptedByUID), ev.uid["preemptor"])
		}
		if ls := root.Links(); len(ls) != 1 || ls[0].TraceID != preemptor.TraceID {
			t.Errorf("victim links %v, want the preemptor's trace", ls)
		}
		sched := preemptor.Phase(phases.PhaseScheduling)
		if ls := sched.Links(); len(ls) != 1 || ls[0].TraceID != victim.TraceID {
			t.Errorf("preemptor links %v, want the victim's trace", ls)
		}
		if ev.nominated == "" || sched.Attr(phases.AttrNominatedNode) != ev.nominated {
			t.Errorf("nominated node %v, the Pod showed %q", sched.Attr(phases.AttrNominatedNode), ev.nominated)
		}
	})

	spans, waterfall := render(t, traces)
	golden(t, waitsCapture+".txtar", spans, waterfall)
}
