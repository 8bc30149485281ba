// Package pod is one Pod's startup as its own versions and the Events about it show it: a
// state machine the correlator feeds each version (Apply) and Event (AddEvent) of an in-flight
// Pod, and asks for what it observed (Observe, a phases.Pod). It reads nothing of other objects:
// what a Pod's controllers, node, claims and Services say, the correlator adds to the
// observation.
package pod
