package proxyrules

import (
	"crypto/sha256"
	"encoding/base32"
	"net/netip"
	"strings"

	"github.com/readyspan/readyspan/dataplane"
)

// The names kube-proxy gives its chains and comments carry the Service's namespace, name and port
// name, which come from the cluster: a name that does not have exactly kube-proxy's shape is
// refused, never guessed at, and nothing longer than these bounds is parsed.
const (
	maxName    = 63  // a namespace, Service or port name (DNS label)
	maxComment = 256 // an xt comment's size; a longer UserData comment is not kube-proxy's
)

// servicePort is one Service port as a chain or comment names it.
type servicePort struct {
	Namespace, Service, PortName, Protocol string
}

func (p servicePort) endpoint(a netip.AddrPort) dataplane.Endpoint {
	return dataplane.Endpoint{Namespace: p.Namespace, Service: p.Service, PortName: p.PortName,
		Protocol: p.Protocol, Address: a.Addr().Unmap(), Port: int32(a.Port())}
}

// label reports whether s is a DNS label as the apiserver allows in namespace, Service and port
// names: lower-case letters, digits and inner dashes. empty allows "" (an unnamed port).
func label(s string, empty bool) bool {
	if s == "" {
		return empty
	}
	if len(s) > maxName || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// serviceName reports whether s is a Service name: a DNS-1035 label, which starts with a letter
// (dataplane.Parse refuses any other on the receiving side).
func serviceName(s string) bool { return label(s, false) && s[0] >= 'a' && s[0] <= 'z' }

func protocol(s string) bool { return s == "tcp" || s == "udp" || s == "sctp" }

// nftServiceChain parses an nftables-mode service chain name, "service-HASH-ns/svc/proto/port" (or
// "local-…"; kube-proxy's servicePortChainNameBase). HASH is the first 8 characters of the
// base32 SHA-256 of "ns/svc/proto/port", checked, so a chain that only looks like kube-proxy's
// is not taken for it.
func nftServiceChain(name string) (servicePort, bool) {
	var rest string
	switch {
	case strings.HasPrefix(name, "service-"):
		rest = name[len("service-"):]
	case strings.HasPrefix(name, "local-"):
		rest = name[len("local-"):]
	default:
		return servicePort{}, false
	}
	if len(rest) < 10 || rest[8] != '-' || len(rest) > 9+4*maxName+3+4 {
		return servicePort{}, false
	}
	hash, base := rest[:8], rest[9:]
	parts := strings.Split(base, "/")
	if len(parts) != 4 || !label(parts[0], false) || !serviceName(parts[1]) ||
		!protocol(parts[2]) || !label(parts[3], true) {
		return servicePort{}, false
	}
	sum := sha256.Sum256([]byte(base))
	if base32.StdEncoding.EncodeToString(sum[:])[:8] != hash {
		return servicePort{}, false
	}
	return servicePort{Namespace: parts[0], Service: parts[1], Protocol: parts[2], PortName: parts[3]}, true
}

// iptComment parses the comment kube-proxy's iptables mode puts on each endpoint's rule in a
// KUBE-SVC or KUBE-SVL chain: "ns/svc:port -> 10.88.77.5:80" ("ns/svc -> …" for an unnamed
// port; an IPv6 endpoint is bracketed). The protocol is not in it (see sepProtocol).
func iptComment(c string) (servicePort, netip.AddrPort, bool) {
	if len(c) > maxComment {
		return servicePort{}, netip.AddrPort{}, false
	}
	svc, ep, ok := strings.Cut(c, " -> ")
	if !ok {
		return servicePort{}, netip.AddrPort{}, false
	}
	ap, err := netip.ParseAddrPort(ep)
	if err != nil || ap.Port() == 0 || ap.Addr().Zone() != "" {
		return servicePort{}, netip.AddrPort{}, false
	}
	ns, rest, ok := strings.Cut(svc, "/")
	if !ok {
		return servicePort{}, netip.AddrPort{}, false
	}
	name, port, named := strings.Cut(rest, ":")
	if !label(ns, false) || !serviceName(name) || (named && !label(port, false)) {
		return servicePort{}, netip.AddrPort{}, false
	}
	return servicePort{Namespace: ns, Service: name, PortName: port}, ap, true
}

// iptChain reports whether name is one of kube-proxy's iptables chains of the given kind
// ("SVC", "SVL", "SEP"): KUBE-<kind>- and 16 base32 characters of a hash.
func iptChain(name, kind string) bool {
	p := "KUBE-" + kind + "-"
	if len(name) != len(p)+16 || !strings.HasPrefix(name, p) {
		return false
	}
	for _, c := range name[len(p):] {
		if (c < 'A' || c > 'Z') && (c < '2' || c > '7') {
			return false
		}
	}
	return true
}
