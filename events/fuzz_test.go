package events

import (
	"strings"
	"testing"
)

// FuzzParsePreemptedMessage: a UID read from the scheduler's Preempted message is bounded, one
// word, and where the message says it is.
func FuzzParsePreemptedMessage(f *testing.F) {
	f.Add("Preempted by pod 5f0d3c1e-7a2b-4c1d-9e8f-0a1b2c3d4e5f on node node-1")
	f.Add("Preempted by pod 5f0d3c1e on node n (in kube-scheduler memory).")
	f.Add("Preempted by podgroup x on node n")
	f.Add("Preempted by pod  on node ")
	f.Fuzz(func(t *testing.T, msg string) {
		uid, ok := ParsePreemptedMessage(msg)
		if !ok {
			return
		}
		if uid == "" || len(uid) > MaxUID || strings.ContainsAny(uid, " \t\n") || !strings.HasPrefix(msg, "Preempted by pod "+uid+" on node ") {
			t.Fatalf("%q read as preemptor %q", msg, uid)
		}
	})
}

// FuzzContainerFromFieldPath feeds arbitrary field paths of kubelet Events.
func FuzzContainerFromFieldPath(f *testing.F) {
	f.Add("spec.containers{web}")
	f.Add("spec.initContainers{init}")
	f.Add("spec.containers{")
	f.Add("spec.ephemeralContainers{debug}}")
	f.Fuzz(func(t *testing.T, fp string) {
		name, init, ok := ContainerFromFieldPath(fp)
		if !ok {
			return
		}
		prefix := "spec.containers{"
		if init {
			prefix = "spec.initContainers{"
		}
		if !strings.HasSuffix(fp, name+"}") || (!strings.HasPrefix(fp, prefix) && !strings.HasPrefix(fp, "spec.ephemeralContainers{")) {
			t.Fatalf("%q read as container %q (init %v)", fp, name, init)
		}
	})
}

// FuzzParseDisruption: a disruption read from an autoscaler's Event names it and a bounded cause
// of one line that the message states.
func FuzzParseDisruption(f *testing.F) {
	f.Add("Evicted", "Evicted pod: Underutilized")
	f.Add("Evicted", "Evicted pod: Forceful Termination")
	f.Add("ScaleDown", "deleting pod for node scale down")
	f.Add("Evicted", "The node was low on resource: memory.")
	f.Fuzz(func(t *testing.T, reason, msg string) {
		d, ok := ParseDisruption(reason, msg)
		if !ok {
			return
		}
		if d.By == "" || d.Cause == "" || len(d.Cause) > maxCause || strings.ContainsAny(d.Cause, "\n\t") ||
			d.By == "karpenter" && msg != "Evicted pod: "+d.Cause {
			t.Fatalf("(%q, %q) read as %+v", reason, msg, d)
		}
	})
}
