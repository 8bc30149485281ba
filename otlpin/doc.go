// Package otlpin is readyspan's OTLP input (readyspan run --otlp-receive): it receives the
// components' own spans (the kube-apiserver's TracingConfiguration, the kubelets'
// KubeletConfiguration.tracing, containerd's OTLP tracing; directly or through an
// OpenTelemetry Collector) over OTLP/gRPC and OTLP/HTTP (protobuf), drops at once every span
// that concerns no Pod, Deployment, ReplicaSet, StatefulSet, DaemonSet or Job, and holds the
// rest, bounded in time and bytes, until a Pod's trace takes them (Store.Take) or they expire.
// Every span is counted: received, joined and dropped (by reason), per component.
//
// The input is a listener that accepts writes from the network, so every part of it is bounded
// for any shape of input (see docs/otlp.md):
//
//   - receiver.go serves both transports on one HTTP server with timeouts and a connection
//     limit; grpc.go is OTLP/gRPC's one unary method, served here rather than by a gRPC
//     library so that a message's stated length is checked and charged before it is read.
//   - inflight.go charges every request's bytes, as they are read and decompressed, to one
//     budget (an authenticated sender at most half of it) and refuses past it with the
//     retryable answer the OTLP specification names.
//   - decode.go reads the wire format straight into component spans, a chunk at a time,
//     keeping a bounded part of each and nothing in readyspan's attribute namespace.
//   - store.go files each chunk under one short hold of its lock, charges everything it keeps
//     (spans, the strings they share in intern.go, indexes, traces remembered as unrelated) to
//     one byte bound whose count tracks the live heap, and evicts the oldest past it.
//   - sender.go says who may write what: on an authenticated address, a node-bound sender's
//     kubelet and containerd spans join only its node's Pods, and the apiserver's spans come
//     only from a sender granted that; loopback is trusted.
//
// A component's trace is decided as a whole: one apiserver request, one kubelet syncPod with
// its CRI calls, and containerd's spans beneath those calls (the kubelet propagates its trace
// context to containerd) share a trace ID. A trace concerns a Pod or workload when one of its
// spans says so: an apiserver storage key (/pods/NS/NAME) or handler resource, a request path,
// a kubelet span's k8s.pod.uid. A trace none of whose spans says so is dropped once its root
// span (the last to end, so the last exported) has arrived; until then its spans are held as
// undecided, for a short time.
//
// Placing the spans in the Pod's trace is the phases package's (phases.Trace.Join); waiting for
// them is the daemon's.
package otlpin
