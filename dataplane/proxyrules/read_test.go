package proxyrules

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"

	"github.com/readyspan/readyspan/dataplane"
)

// The captures in testdata/ are this package's Capture of a real host (kube-proxy 1.37.2,
// iptables v1.8.9 (nf_tables), kernel 6.18) in each mode, with, in namespace rules-probe: a
// Deployment "web" of 3 Pods behind Service web (ports http 80→8080/TCP, dns 53→8053/UDP),
// web-sticky (ClientIP affinity), web-local (NodePort, externalTrafficPolicy Local), solo (one
// Pod, an unnamed port) and empty (no Pods).

// replay loads a capture as a source.
func replay(t *testing.T, name string) *recording {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var r recording
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

// list is a snapshot's endpoints as sorted "ns/svc:port -> addr:port proto" strings.
func list(s Snapshot) []string {
	var out []string
	for e := range s.Endpoints {
		out = append(out, e.String()+" "+e.Protocol)
	}
	sort.Strings(out)
	return out
}

func readReplay(t *testing.T, r *recording) Snapshot {
	t.Helper()
	s, err := newReader(r).read()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func check(t *testing.T, s Snapshot, mode string, want []string) {
	t.Helper()
	if s.Mode != mode {
		t.Errorf("mode %q, want %q", s.Mode, mode)
	}
	if got := list(s); !slices.Equal(got, want) {
		t.Errorf("endpoints:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// web is the endpoints of Services web, web-sticky and web-local on the given Pod addresses.
func web(addrs ...string) []string {
	var out []string
	for _, a := range addrs {
		out = append(out, "rules-probe/web-local:http -> "+a+":8080 tcp",
			"rules-probe/web-sticky:http -> "+a+":8080 tcp",
			"rules-probe/web:dns -> "+a+":8053 udp",
			"rules-probe/web:http -> "+a+":8080 tcp")
	}
	out = append(out, "default/kubernetes:https -> 10.88.77.1:16443 tcp",
		"rules-probe/solo: -> 10.88.77.5:8080 tcp")
	sort.Strings(out)
	return out
}

func TestReadIPTablesCapture(t *testing.T) {
	check(t, readReplay(t, replay(t, "iptables.json")), dataplane.ModeIPTables,
		web("10.88.77.3", "10.88.77.4", "10.88.77.6"))
}

func TestReadNFTablesCapture(t *testing.T) {
	// Covers the three shapes: one endpoint (solo, kubernetes), a numgen map of addr . port (web,
	// web-local's local- chain) and a verdict map to endpoint chains (web-sticky).
	check(t, readReplay(t, replay(t, "nftables.json")), dataplane.ModeNFTables,
		web("10.88.77.2", "10.88.77.3", "10.88.77.4"))
}

// TestSEPMemory: the protocol of KUBE-SEP chains is read once, and forgotten with the chain.
func TestSEPMemory(t *testing.T) {
	r := replay(t, "iptables.json")
	rd := newReader(r)
	if _, err := rd.read(); err != nil {
		t.Fatal(err)
	}
	if len(rd.sepProto) != 14 {
		t.Fatalf("%d SEP chains remembered, want 14", len(rd.sepProto))
	}
	counting := &countingSource{source: r}
	rd.src = counting
	if _, err := rd.read(); err != nil {
		t.Fatal(err)
	}
	for _, c := range counting.chains {
		if strings.HasPrefix(c, "KUBE-SEP-") {
			t.Fatalf("re-read dumped %s again", c)
		}
	}
	// Service web:http's chain without its rules: its 3 endpoints leave, and their SEP chains
	// are forgotten.
	for k := range r.Rules {
		if strings.HasSuffix(k, "/KUBE-SVC-C5YQX3ENJRFR6PGI") {
			delete(r.Rules, k)
		}
	}
	s, err := rd.read()
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Endpoints) != 11 || len(rd.sepProto) != 11 {
		t.Fatalf("%d endpoints, %d SEP chains remembered; want 11, 11", len(s.Endpoints), len(rd.sepProto))
	}
}

type countingSource struct {
	source
	chains []string
}

func (c *countingSource) GetRules(t *nftables.Table, ch *nftables.Chain) ([]*nftables.Rule, error) {
	c.chains = append(c.chains, ch.Name)
	return c.source.GetRules(t, ch)
}

func TestMergeModes(t *testing.T) {
	a := dataplane.Endpoint{Namespace: "n", Service: "s", Protocol: "tcp", Port: 80}
	b := a
	b.Port = 81
	one := map[dataplane.Endpoint]struct{}{a: {}}
	two := map[dataplane.Endpoint]struct{}{a: {}, b: {}}
	for _, c := range []struct {
		name           string
		ipt, nft       map[dataplane.Endpoint]struct{}
		sawIPT, sawNFT bool
		wantMode       string
		wantN          int
	}{
		{"none", nil, map[dataplane.Endpoint]struct{}{}, false, false, "", 0},
		{"iptables", two, map[dataplane.Endpoint]struct{}{}, true, false, dataplane.ModeIPTables, 2},
		{"nftables empty", nil, map[dataplane.Endpoint]struct{}{}, false, true, dataplane.ModeNFTables, 0},
		{"switch, iptables ahead", two, map[dataplane.Endpoint]struct{}{a: {}}, true, true, dataplane.ModeIPTables, 2},
		{"switch, nftables ahead", one, map[dataplane.Endpoint]struct{}{a: {}, b: {}}, true, true, dataplane.ModeNFTables, 2},
	} {
		s := merge(c.ipt, c.nft, c.sawIPT, c.sawNFT)
		if s.Mode != c.wantMode || len(s.Endpoints) != c.wantN {
			t.Errorf("%s: mode %q, %d endpoints; want %q, %d", c.name, s.Mode, len(s.Endpoints), c.wantMode, c.wantN)
		}
	}
}

// TestHostileCapture: chains, comments and map elements changed into what kube-proxy never
// writes (as a hostile name or another program's rules could make them) are skipped, only they
// are, and nothing panics.
func TestHostileCapture(t *testing.T) {
	r := replay(t, "nftables.json")
	rename := func(from, to string) {
		for fam, cs := range r.Chains {
			for i := range cs {
				if cs[i].Name == from {
					cs[i].Name = to
				}
			}
			r.Chains[fam] = cs
		}
		r.Rules["2/kube-proxy/"+to] = r.Rules["2/kube-proxy/"+from]
		delete(r.Rules, "2/kube-proxy/"+from)
	}
	rename("service-7VAZEB64-rules-probe/web/tcp/http", "service-AAAAAAAA-rules-probe/web/tcp/http")
	rename("endpoint-POOL5MXX-rules-probe/web-sticky/tcp/http__10.88.77.2/8080", "gone")
	long := "service-XXXXXXXX-" + strings.Repeat("a/", 20000)
	r.Chains["2"] = append(r.Chains["2"], capChain{Table: "kube-proxy", Name: long})
	for i := range r.Elements["2/kube-proxy/__map1"] {
		if i == 0 {
			r.Elements["2/kube-proxy/__map1"][i].Val = []byte{10}
		}
	}
	got := list(readReplay(t, r))
	var want []string
	for _, e := range web("10.88.77.2", "10.88.77.3", "10.88.77.4") {
		switch {
		case strings.HasPrefix(e, "rules-probe/web:http"),
			e == "rules-probe/web-sticky:http -> 10.88.77.2:8080 tcp",
			e == "rules-probe/web:dns -> 10.88.77.4:8053 udp": // __map1's first element
		default:
			want = append(want, e)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("endpoints:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	ri := replay(t, "iptables.json")
	rules := ri.Rules["2/nat/KUBE-SVC-C5YQX3ENJRFR6PGI"]
	hostile := []string{"Rules-Probe/web:http -> 10.88.77.3:8080", "rules-probe/web:http -> [fd00::3]:8080",
		strings.Repeat("x", 5000)}
	n := 0
	for _, rule := range rules {
		for j, e := range rule.Exprs {
			if e.Comment != nil && strings.Contains(*e.Comment, " -> ") && n < len(hostile) {
				rule.Exprs[j].Comment = &hostile[n]
				n++
			}
		}
	}
	if n != 3 {
		t.Fatalf("%d comments replaced, want 3", n)
	}
	for _, e := range list(readReplay(t, ri)) {
		if strings.HasPrefix(e, "rules-probe/web:http") {
			t.Errorf("%s read from a hostile comment", e)
		}
	}
}

func TestDiff(t *testing.T) {
	a := dataplane.Endpoint{Namespace: "n", Service: "s", Protocol: "tcp", Port: 80}
	b := a
	b.Port = 81
	at := time.Unix(100, 0)
	old := Snapshot{Mode: dataplane.ModeIPTables, Endpoints: map[dataplane.Endpoint]struct{}{a: {}}}
	cur := Snapshot{Mode: dataplane.ModeIPTables, Endpoints: map[dataplane.Endpoint]struct{}{b: {}}}
	cs := diff("node", old, cur, at, time.Millisecond)
	sort.Slice(cs, func(i, j int) bool { return cs[i].In })
	if len(cs) != 2 || !cs[0].In || cs[0].Endpoint != b || cs[1].In || cs[1].Endpoint != a ||
		!cs[0].At.Equal(at) || cs[1].Precision != time.Millisecond || cs[0].Node != "node" {
		t.Errorf("changes %+v", cs)
	}
	// All rules gone (kube-proxy's table deleted): the removals keep the mode they were in.
	cs = diff("node", old, Snapshot{}, at, 0)
	if len(cs) != 1 || cs[0].In || cs[0].Mode != dataplane.ModeIPTables {
		t.Errorf("changes %+v", cs)
	}
	if cs := diff("node", old, old, at, 0); len(cs) != 0 {
		t.Errorf("no change reported as %+v", cs)
	}
}
