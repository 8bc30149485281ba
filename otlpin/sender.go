package otlpin

import (
	"context"

	"github.com/readyspan/readyspan/access"
	"github.com/readyspan/readyspan/phases"
)

// The verbs on the non-resource path AccessPath that say what a sender may write, beyond
// VerbSend, which every sender needs on an authenticated address. They follow the kubelet's
// NodeRestriction: a node's identity writes only its own Pods.
const (
	// AccessPath is the one path a sender is authorized on, whether it sends OTLP/HTTP or
	// OTLP/gRPC.
	AccessPath = "/v1/traces"
	// VerbSend lets a sender send at all: its kubelet and containerd spans count for the Pods
	// bound to the node its token names (a node-bound ServiceAccount token, e.g. a Collector
	// DaemonSet's), and for no Pod when its token names none.
	VerbSend = "create"
	// VerbAnyNode lets a sender's kubelet and containerd spans count for Pods on any node: a
	// gateway Collector that forwards what every node sends.
	VerbAnyNode = "create-any-node"
	// VerbAPIServer lets a sender's kube-apiserver spans count: they describe every Pod's
	// requests, so only the apiserver's own Collector should have it.
	VerbAPIServer = "create-apiserver"
)

// Sender is what a request's sender may write into Pod traces.
type Sender struct {
	// Name says who sent, for the log: the authenticated user, or "" on a trusted address.
	Name string
	// Node, when set, is the one node whose Pods the sender's kubelet and containerd spans may
	// join.
	Node string
	// AnyNode lets its kubelet and containerd spans join Pods on any node.
	AnyNode bool
	// APIServer lets its kube-apiserver spans join.
	APIServer bool
}

// Trusted is a sender on an address nobody is asked about: loopback, or one the operator
// opened with --otlp-receive-insecure.
var Trusted = Sender{AnyNode: true, APIServer: true}

// senderOf is the sender of a request: its checked identity where the address is guarded,
// else Trusted.
func senderOf(ctx context.Context) Sender {
	id, ok := access.IdentityFrom(ctx)
	if !ok {
		return Trusted
	}
	return Sender{Name: id.User, Node: id.Node, AnyNode: id.Has(VerbAnyNode), APIServer: id.Has(VerbAPIServer)}
}

// may reports whether the sender may write a span of the component, and the node its spans
// are then bound to ("" for any).
func (s Sender) may(component string) (node string, ok bool) {
	switch component {
	case phases.ServiceAPIServer:
		return "", s.APIServer
	case phases.ServiceKubelet, phases.ServiceContainerd:
		if s.AnyNode {
			return "", true
		}
		return s.Node, s.Node != ""
	}
	return "", false
}

// mayReport says whether the sender may report the kube-proxy rules of the node: its own node
// when node-bound, any node when it may write for any.
func (s Sender) mayReport(node string) bool {
	return s.AnyNode || s.Node != "" && s.Node == node
}
