// Package tracer turns a live cluster, a recording or an explain's snapshot into observations
// and traces.
//
// The Watcher (watch.go) runs one reflector per watched kind and namespace, keeps only what the
// correlator reads of each object (Transform) and hands every change on as a Delta stamped
// with its receive time. The Correlator (correlator.go) consumes Deltas in one goroutine: it
// keeps each Pod's state and joins it with Events (events.go, messages.go), owners (owners.go),
// EndpointSlices and the audit log (audit.go), and when a Pod is done — Ready and serving,
// failed, stuck or deleted — builds its phases.Trace for the Sink. The rollout tracker
// (rollouts.go, workloads.go) follows Deployments, StatefulSets and DaemonSets in the same
// goroutine and builds a rollout.Trace for each rollout. Recordings (recording.go,
// recording_writer.go) are the Delta stream as JSON lines, read back losslessly or refused with
// a reason.
package tracer
