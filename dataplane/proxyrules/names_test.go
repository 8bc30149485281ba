package proxyrules

import (
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

func TestNFTServiceChain(t *testing.T) {
	good := map[string]servicePort{
		"service-7VAZEB64-rules-probe/web/tcp/http":     {"rules-probe", "web", "http", "tcp"},
		"local-ZBUC4JFL-rules-probe/web-local/tcp/http": {"rules-probe", "web-local", "http", "tcp"},
		"service-7U2PX3EO-rules-probe/solo/tcp/":        {"rules-probe", "solo", "", "tcp"},
		"service-KN3DPJ2H-rules-probe/web/udp/dns":      {"rules-probe", "web", "dns", "udp"},
	}
	for name, want := range good {
		if got, ok := nftServiceChain(name); !ok || got != want {
			t.Errorf("%q: %+v %v, want %+v", name, got, ok, want)
		}
	}
	for _, name := range []string{
		"service-7VAZEB65-rules-probe/web/tcp/http",        // the hash does not match
		"service-7VAZEB64-rules-probe/web/tcp/http/x",      // a fifth part
		"service-7VAZEB64-rules-probe/web/tcp",             // a missing part
		"service-XXXXXXXX-Rules/web/tcp/http",              // upper case
		"service-XXXXXXXX-ns/web/icmp/http",                // not a Service protocol
		"service-XXXXXXXX-ns/-web/tcp/http",                // a leading dash
		"service-XXXXXXXX-ns/web\x00/tcp/http",             // a NUL
		"service-XXXXXXXX-ns/we b/tcp/http",                // a space
		"external-ZBUC4JFL-rules-probe/web-local/tcp/http", // holds no endpoints
		"endpoint-POOL5MXX-rules-probe/web-sticky/tcp/http__10.88.77.2/8080",
		"service-", "service-7VAZEB64", "service-7VAZEB64-", "",
		"service-XXXXXXXX-" + strings.Repeat("a", 64) + "/web/tcp/http",
		"service-XXXXXXXX-" + strings.Repeat("a/", 5000),
	} {
		if got, ok := nftServiceChain(name); ok {
			t.Errorf("%q accepted as %+v", name, got)
		}
	}
}

func TestIPTComment(t *testing.T) {
	sp, ap, ok := iptComment("rules-probe/web:http -> 10.88.77.3:8080")
	if !ok || sp != (servicePort{Namespace: "rules-probe", Service: "web", PortName: "http"}) || ap.String() != "10.88.77.3:8080" {
		t.Errorf("got %+v %s %v", sp, ap, ok)
	}
	if sp, ap, ok := iptComment("ns/svc -> [fd00::5]:80"); !ok || sp.PortName != "" || ap.Addr().String() != "fd00::5" {
		t.Errorf("unnamed IPv6: %+v %s %v", sp, ap, ok)
	}
	for _, c := range []string{
		"rules-probe/web:http cluster IP",
		"rules-probe/web:http -> 10.88.77.3",
		"rules-probe/web:http -> 10.88.77.3:0",
		"rules-probe/web:http -> 10.88.77.3:70000",
		"rules-probe/web:http -> [fe80::1%eth0]:80",
		"rules-probe/web:http -> host:80",
		"Rules/web:http -> 10.0.0.1:80",
		"web:http -> 10.0.0.1:80",
		"ns/web:http:x -> 10.0.0.1:80",
		"ns/web: -> 10.0.0.1:80",
		"ns/web:http -> 10.0.0.1:80 -> 10.0.0.2:80",
		"ns/1web:http -> 10.0.0.1:80", // a Service name starts with a letter
		"ns/web\x00:http -> 10.0.0.1:80",
		"ns/" + strings.Repeat("a", 300) + ":http -> 10.0.0.1:80",
		"",
	} {
		if sp, ap, ok := iptComment(c); ok {
			t.Errorf("%q accepted as %+v %s", c, sp, ap)
		}
	}
}

func TestIPTChain(t *testing.T) {
	if !iptChain("KUBE-SVC-C5YQX3ENJRFR6PGI", "SVC") || !iptChain("KUBE-SEP-2WZ75ZPOKKNX235B", "SEP") {
		t.Error("kube-proxy's chains refused")
	}
	for _, n := range []string{"KUBE-SVC-C5YQX3ENJRFR6PG", "KUBE-SVC-C5YQX3ENJRFR6PGI1", "KUBE-SVC-c5yqx3enjrfr6pgi",
		"KUBE-SVC-C5YQX3ENJRFR6PG1", "KUBE-SEP-C5YQX3ENJRFR6PGI", "KUBE-SERVICES", ""} {
		if iptChain(n, "SVC") {
			t.Errorf("%q accepted", n)
		}
	}
}

func TestUdataComment(t *testing.T) {
	u := []byte{1, 2, 'x', 0, 0, 4, 'a', '/', 'b', 0}
	if got := udataComment(u); got != "a/b" {
		t.Errorf("got %q", got)
	}
	// Truncated records, which userdata.GetString would slice past: no panic, no comment.
	for _, u := range [][]byte{{0, 200, 'a'}, {0}, {1, 1}, {1, 0, 0, 9, 'a'}, nil} {
		if got := udataComment(u); got != "" {
			t.Errorf("%v: got %q", u, got)
		}
	}
}

func TestElementChain(t *testing.T) {
	goTo := []byte{8, 0, 1, 0, 0xff, 0xff, 0xff, 0xfc, 9, 0, 2, 0, 'a', 'b', 'c', 'd', 0, 0, 0, 0}
	if got := elementChain(nftables.SetElement{Val: goTo}); got != "abcd" {
		t.Errorf("goto: %q", got)
	}
	accept := []byte{8, 0, 1, 0, 0, 0, 0, 1}
	for _, v := range [][]byte{accept, goTo[:6], {255, 255, 1, 0}, nil, {0x0a, 0x58, 0x4d, 0x02, 0x1f, 0x90, 0, 0}} {
		if got := elementChain(nftables.SetElement{Val: v}); got != "" {
			t.Errorf("%v: %q", v, got)
		}
	}
	if got := elementChain(nftables.SetElement{VerdictData: &expr.Verdict{Kind: expr.VerdictJump, Chain: "x"}}); got != "x" {
		t.Errorf("decoded verdict: %q", got)
	}
}

func TestRegisters(t *testing.T) {
	var r registers
	r.set(1, []byte{10, 0, 0, 1, 0, 80})
	nat := &expr.NAT{Type: expr.NATTypeDestNAT, RegAddrMin: 1, RegProtoMin: 9}
	if ap, ok := r.addrPort(nftables.TableFamilyIPv4, nat); !ok || ap.String() != "10.0.0.1:80" {
		t.Errorf("map data: %s %v", ap, ok)
	}
	// Registers out of range, or data past the end: ignored, never a panic.
	r.set(99, []byte{1})
	r.set(23, make([]byte, 100))
	r.set(4, make([]byte, 17))
	for _, n := range []*expr.NAT{{RegAddrMin: 0, RegProtoMin: 9}, {RegAddrMin: 1, RegProtoMin: 0},
		{RegAddrMin: 4, RegProtoMin: 23}, {RegAddrMin: 23, RegProtoMin: 9}, {RegAddrMin: 1000, RegProtoMin: 1}} {
		if ap, ok := r.addrPort(nftables.TableFamilyIPv6, n); ok {
			t.Errorf("%+v: %s", n, ap)
		}
	}
}

func FuzzIPTComment(f *testing.F) {
	for _, s := range []string{"rules-probe/web:http -> 10.88.77.3:8080", "ns/svc -> [fd00::5]:80", "a/b:c -> 1.2.3.4:5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sp, ap, ok := iptComment(s)
		if ok && (!label(sp.Namespace, false) || !label(sp.Service, false) || !label(sp.PortName, true) || ap.Port() == 0) {
			t.Fatalf("%q accepted as %+v %s", s, sp, ap)
		}
	})
}

func FuzzNFTServiceChain(f *testing.F) {
	for _, s := range []string{"service-7VAZEB64-rules-probe/web/tcp/http", "local-ZBUC4JFL-rules-probe/web-local/tcp/http", "service-7U2PX3EO-rules-probe/solo/tcp/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sp, ok := nftServiceChain(s)
		if ok && (!label(sp.Namespace, false) || !label(sp.Service, false) || !protocol(sp.Protocol)) {
			t.Fatalf("%q accepted as %+v", s, sp)
		}
	})
}
