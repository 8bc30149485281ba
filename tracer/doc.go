// Package tracer turns the Deltas of package watch (a live cluster, a recording or an explain's
// snapshot) into traces.
//
// kinds.go is the registry of the kinds readyspan reads: each entry, in the file of its kind
// (deployments.go, jobs.go…), is a watch.Kind (how the watch side reads it; the table is handed
// to package watch as Kinds) and what the correlator and the rollout tracker do with its
// changes and Events. The Correlator (correlator.go) consumes Deltas in one goroutine (Loop,
// Replay): it keeps each Pod's state (pods.go) and joins it with Events (read into one shape by
// package events), owners (owners.go, controllers.go), EndpointSlices and the audit log
// (audit.go), and when a Pod is done — Ready and serving, failed, stuck or deleted — builds its
// phases.Trace for the Sink. Each delta and Event of a workload kind also goes, through the
// kind's entry and in the same goroutine, to the rollout tracker (package rollout/tracker),
// which builds a rollout.Trace for each rollout; stepOf (workloads.go) reads the kinds'
// scaling Events for it.
package tracer
