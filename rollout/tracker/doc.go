// Package tracker follows workloads' rollouts: from the changes of Deployments, StatefulSets,
// DaemonSets, their ReplicaSets, ControllerRevisions and Pods, and their controllers' Events,
// it builds one rollout.Trace per rollout (what changed, each scaling step and the Pods it
// made or removed, and the verdict) and links each new Pod's trace to it.
//
// It is fed, in one goroutine, by package tracer's Correlator, which routes each delta of a
// kind to it through that kind's registry entry beside the Pod correlator, and hands it each
// finished Pod trace (PodTrace). It reads nothing of the correlator's state but what its
// Config passes: the audit log lookup and the kinds' wordings of their scaling Events.
package tracker
