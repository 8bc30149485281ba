// Package watch is readyspan's side of the cluster: it turns a live cluster, a recording or a
// snapshot into Deltas, and knows nothing of what they mean.
//
// The kinds to read are a Registry of Kinds, which the reader of the objects declares and hands
// in (package tracer's Kinds): how each is listed and watched, what is kept of its objects
// (Transform), how it is recorded and in which order snapshots are read, which of its writes
// the audit log is read for, and which verbs RBAC must grant. Nothing here lists kinds itself.
//
// The Watcher (watch.go) runs one reflector per Kind and namespace, keeps only each object's
// identity (Registry.LastSeen, for deletions a relist finds) and hands every change on as a
// Delta stamped with its receive time; health.go says when the watch is not whole. The Source
// (source.go) adds the audit log (audit.go) and, when asked, the admission webhook
// configurations (webhooks.go) that the OTLP input labels webhooks with. Recordings
// (recording.go, recording_writer.go) are the Delta stream as JSON lines, read back losslessly
// or refused with a reason; Snapshot lists every Kind once, for explain. encoding.go reads every
// built-in kind in protobuf unless JSON is asked for.
package watch
