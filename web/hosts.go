package web

import (
	"fmt"
	"net"
	"regexp"
	"strings"
)

// Hosts are the names a UI server answers to: the Host header of every request must carry one
// (any port). A browser tricked by DNS rebinding (a page of attacker.example whose name now
// resolves to 127.0.0.1) sends the attacker's name, so checking the name keeps other sites from
// reading the traces even where they can reach the port.
type Hosts struct {
	names map[string]bool // lower case, without port, brackets or final dot
	// anyIP accepts every IP literal: the server listens on every address (":8080"), and no
	// page can make a browser send an IP literal its own DNS answers for.
	anyIP bool
}

// loopbackNames are the names of the loopback interface a browser sends.
var loopbackNames = []string{"localhost", "127.0.0.1", "::1"}

func loopbackHosts() *Hosts {
	h := &Hosts{names: map[string]bool{}}
	h.add(loopbackNames...)
	return h
}

// ListenHosts are the names of a server listening on addr (host:port) plus extra: the host it
// listens on as given; with a loopback address, also localhost, 127.0.0.1 and ::1; with every
// address (no host, 0.0.0.0 or ::), the loopback names and any IP literal (a Pod's IP, a port
// forward's localhost). Other names, such as a Service's DNS name or an Ingress's, must be in
// extra.
func ListenHosts(addr string, extra []string) (*Hosts, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("listen address %q: %w", addr, err)
	}
	h := &Hosts{names: map[string]bool{}}
	ip := net.ParseIP(host)
	switch {
	case host == "" || ip != nil && ip.IsUnspecified():
		h.anyIP = true
		h.add(loopbackNames...)
	case ip != nil && ip.IsLoopback() || strings.EqualFold(host, "localhost"):
		h.add(host)
		h.add(loopbackNames...)
	default:
		h.add(host)
	}
	for _, e := range extra {
		n := canonicalHost(e)
		if strings.ContainsAny(e, "/@") || n == "" || net.ParseIP(n) == nil && !hostName.MatchString(n) {
			return nil, fmt.Errorf("--ui-allowed-hosts %q: want a host name or IP address, without scheme or path", e)
		}
		h.add(n)
	}
	return h, nil
}

func (h *Hosts) add(names ...string) {
	for _, n := range names {
		h.names[canonicalHost(n)] = true
	}
}

// Allow says whether a request's Host header names this server.
func (h *Hosts) Allow(hostHeader string) bool {
	n := canonicalHost(hostHeader)
	if n == "" {
		return false
	}
	if h.names[n] {
		return true
	}
	return h.anyIP && net.ParseIP(n) != nil
}

// canonicalHost is a Host header's or a flag's host: without the port, IPv6 brackets or final
// dot, in lower case.
func canonicalHost(s string) string {
	s = strings.TrimSpace(s)
	if host, _, err := net.SplitHostPort(s); err == nil {
		s = host
	} else if strings.HasPrefix(s, "[") {
		if !strings.HasSuffix(s, "]") {
			return "" // neither [v6] nor [v6]:port
		}
		s = s[1 : len(s)-1]
	}
	return strings.ToLower(strings.TrimSuffix(s, "."))
}

// hostName is a DNS name as a browser sends it (lower case; _ for the odd internal name).
var hostName = regexp.MustCompile(`^[a-z0-9]([a-z0-9_.-]*[a-z0-9])?$`)
