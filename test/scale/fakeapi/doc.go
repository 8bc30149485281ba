// Package fakeapi is a test-only Kubernetes API server for measuring watchers apart from the
// control plane: it answers list and watch (JSON or protobuf, by the Accept header; resource
// versions, 410 Gone, bookmarks, streamed initial lists as client-go's reflector asks for them)
// for every built-in resource, from a stream generated out of a recording of the scale test
// bed's load. The recording gives one Deployment's startup (its Service, ReplicaSet, Pods,
// Events and EndpointSlice, as the apiserver sent them); the stream repeats it under fresh
// names, UIDs and times, as often as a chosen rate of Pod startups asks, each copy with the
// timing the recording shows. The stream is encoded before it is served, so that the server
// costs the machine little while a watcher is measured: serving is copying bytes.
package fakeapi
