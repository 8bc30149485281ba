// Package otlpin is readyspan's OTLP input (readyspan run --otlp-receive): it receives the
// components' own spans (the kube-apiserver's TracingConfiguration, the kubelets'
// KubeletConfiguration.tracing, containerd's OTLP tracing; directly or through an
// OpenTelemetry Collector) over OTLP/gRPC and OTLP/HTTP (protobuf), drops at once every span
// that concerns no Pod, Deployment, ReplicaSet, StatefulSet, DaemonSet or Job, and holds the
// rest, bounded in time and bytes, until a Pod's trace takes them (Store.Take) or they expire.
// Every span is counted: received, joined and dropped (by reason), per component.
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
