// Package dataplane is the last mile of a Pod's startup and of its removal: when each node's
// kube-proxy put the Pod's address into the rules that send a Service's traffic to it, and
// when it took it out again.
//
// The node component (readyspan node, a DaemonSet) reads its node's kube-proxy rules and
// reports every change as a span over OTLP to the central readyspan's --otlp-receive, under
// its node-bound identity. This file is the contract between the two: the component's
// service.name, its span names and attribute keys, and the Change and Sync they carry. The
// keys are outside readyspan's attribute namespace (readyspan.*), which the OTLP input drops
// from every sender.
package dataplane

import (
	"fmt"
	"net/netip"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/readyspan/readyspan/phases"
)

// Component is the service.name of the node component's spans.
const Component = "readyspan-node"

// Span names of the node component.
const (
	// SpanProgrammed: an endpoint entered a Service port's rotation on the node (the chain
	// that balances the Service's ClusterIP traffic now reaches it).
	SpanProgrammed = "endpoint.programmed"
	// SpanRemoved: an endpoint left that rotation.
	SpanRemoved = "endpoint.removed"
	// SpanSynced: the node's heartbeat, sent at start and every SyncEvery; it says the node
	// runs kube-proxy and is observed, so Pod traces wait for its rules.
	SpanSynced = "rules.synced"
)

// SyncEvery is how often the node component sends SpanSynced. A node that has not sent one
// for three times as long is no longer waited for.
const SyncEvery = 10 * time.Second

// Attribute keys of the node component's spans.
const (
	AttrNode      = "k8s.node.name"
	AttrNamespace = "k8s.namespace.name"
	AttrService   = "k8s.service.name"
	AttrPortName  = "k8s.service.port.name"
	AttrProtocol  = "network.transport" // tcp, udp, sctp
	AttrAddress   = "destination.address"
	AttrPort      = "destination.port"
	// AttrMode is kube-proxy's mode as the rules show it: iptables or nftables.
	AttrMode = "kube_proxy.mode"
	// AttrEndpoints is, on SpanSynced, how many endpoints are in some rotation on the node.
	AttrEndpoints = "kube_proxy.endpoints"
	// AttrPrecision is how late, at most, the change was seen after the rules changed (the
	// node component's poll period, or its read latency when it is told of each change).
	AttrPrecision = "kube_proxy.observation.precision_ms"
)

// Modes of kube-proxy the node component reads.
const (
	ModeIPTables = "iptables"
	ModeNFTables = "nftables"
)

// Endpoint is one address of one Service port as a node's rules name it.
type Endpoint struct {
	Namespace, Service, PortName string
	Protocol                     string // lower case: tcp, udp, sctp
	Address                      netip.Addr
	Port                         int32
}

func (e Endpoint) String() string {
	return fmt.Sprintf("%s/%s:%s -> %s", e.Namespace, e.Service, e.PortName,
		netip.AddrPortFrom(e.Address, uint16(e.Port)))
}

// Change is an endpoint entering (In) or leaving a Service port's rotation on a node.
type Change struct {
	Node string
	Endpoint
	In bool
	// At is when the node component saw the rules change; Precision bounds how late that is.
	At        time.Time
	Precision time.Duration
	Mode      string
}

// Sync is a node's heartbeat.
type Sync struct {
	Node, Mode string
	At         time.Time
	Endpoints  int
}

// Attrs are a change's span attributes (its name is SpanProgrammed or SpanRemoved).
func (c Change) Attrs() []phases.Attr {
	return []phases.Attr{
		{Key: AttrNode, Value: c.Node}, {Key: AttrNamespace, Value: c.Namespace},
		{Key: AttrService, Value: c.Service}, {Key: AttrPortName, Value: c.PortName},
		{Key: AttrProtocol, Value: c.Protocol}, {Key: AttrAddress, Value: c.Address.String()},
		{Key: AttrPort, Value: int64(c.Port)}, {Key: AttrMode, Value: c.Mode},
		{Key: AttrPrecision, Value: float64(c.Precision) / float64(time.Millisecond)},
	}
}

// SpanName is the change's span name.
func (c Change) SpanName() string {
	if c.In {
		return SpanProgrammed
	}
	return SpanRemoved
}

// Attrs are a heartbeat's span attributes (its name is SpanSynced).
func (s Sync) Attrs() []phases.Attr {
	return []phases.Attr{{Key: AttrNode, Value: s.Node}, {Key: AttrMode, Value: s.Mode},
		{Key: AttrEndpoints, Value: int64(s.Endpoints)}}
}

// Report is what one received span of the node component says: a Change or a Sync.
type Report struct {
	Change *Change
	Sync   *Sync
}

// Node is the node the report is about.
func (r Report) Node() string {
	switch {
	case r.Change != nil:
		return r.Change.Node
	case r.Sync != nil:
		return r.Sync.Node
	}
	return ""
}

// Parse reads a received span of the node component (as the OTLP input decodes it) into a
// Report. It refuses a span that is not one of the component's, or whose node, address or
// port is missing or malformed: every string in it came from a sender.
func Parse(sp *phases.ComponentSpan) (Report, error) {
	node := sp.Attr(AttrNode)
	if errs := validation.IsDNS1123Subdomain(node); len(errs) > 0 {
		return Report{}, fmt.Errorf("%s span's %s is not a node name", sp.Name, AttrNode)
	}
	mode := sp.Attr(AttrMode)
	if mode != ModeIPTables && mode != ModeNFTables {
		mode = "" // a mode readyspan does not know is not repeated
	}
	switch sp.Name {
	case SpanSynced:
		n, _ := intAttr(sp, AttrEndpoints)
		return Report{Sync: &Sync{Node: node, Mode: mode, At: sp.End, Endpoints: int(max(n, 0))}}, nil
	case SpanProgrammed, SpanRemoved:
	default:
		return Report{}, fmt.Errorf("unknown span %q", sp.Name)
	}
	addr, err := netip.ParseAddr(sp.Attr(AttrAddress))
	if err != nil {
		return Report{}, fmt.Errorf("%s: %w", AttrAddress, err)
	}
	port, ok := intAttr(sp, AttrPort)
	if !ok || port <= 0 || port > 65535 {
		return Report{}, fmt.Errorf("%s missing or out of range", AttrPort)
	}
	ns, svc, portName := sp.Attr(AttrNamespace), sp.Attr(AttrService), sp.Attr(AttrPortName)
	if len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1035Label(svc)) > 0 || len(portName) > validation.DNS1123LabelMaxLength {
		return Report{}, fmt.Errorf("%s span without a valid Service", sp.Name)
	}
	proto := sp.Attr(AttrProtocol)
	switch proto {
	case "tcp", "udp", "sctp", "":
	default:
		return Report{}, fmt.Errorf("%s span's %s is not tcp, udp or sctp", sp.Name, AttrProtocol)
	}
	c := &Change{Node: node, In: sp.Name == SpanProgrammed, At: sp.End, Mode: mode,
		Endpoint: Endpoint{Namespace: ns, Service: svc, PortName: portName,
			Protocol: proto, Address: addr.Unmap(), Port: int32(port)}}
	if ms, ok := floatAttr(sp, AttrPrecision); ok && ms >= 0 && ms < 3.6e6 {
		c.Precision = time.Duration(ms * float64(time.Millisecond))
	}
	return Report{Change: c}, nil
}

func intAttr(sp *phases.ComponentSpan, key string) (int64, bool) {
	for _, a := range sp.Attrs {
		if a.Key != key {
			continue
		}
		switch v := a.Value.(type) {
		case int64:
			return v, true
		case string: // a Collector's transform may have stringified it
			n, err := strconv.ParseInt(v, 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

func floatAttr(sp *phases.ComponentSpan, key string) (float64, bool) {
	for _, a := range sp.Attrs {
		if a.Key != key {
			continue
		}
		switch v := a.Value.(type) {
		case float64:
			return v, true
		case int64:
			return float64(v), true
		}
	}
	return 0, false
}
