package dataplane

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/readyspan/readyspan/phases"
)

var t0 = time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)

func report(node, addr string, in bool, at time.Time) Report {
	return Report{Change: &Change{Node: node, In: in, At: at, Mode: ModeNFTables,
		Endpoint: Endpoint{Namespace: "prod", Service: "web", PortName: "http", Protocol: "tcp", Address: netip.MustParseAddr(addr), Port: 8080}}}
}

// The first change of each node counts, from the moment asked less the slack; an earlier one
// (another Pod's, before the address was reused) does not, nor a change the other way.
func TestTableFirst(t *testing.T) {
	tb := NewTable(0, 0)
	tb.Add(report("a", "10.0.0.5", true, t0.Add(-time.Minute)), t0)
	tb.Add(report("a", "10.0.0.5", false, t0.Add(-30*time.Second)), t0)
	tb.Add(report("a", "10.0.0.5", true, t0.Add(700*time.Millisecond)), t0)
	tb.Add(report("b", "10.0.0.5", true, t0.Add(900*time.Millisecond)), t0)
	tb.Add(report("a", "10.0.0.5", true, t0.Add(2*time.Second)), t0)
	got := tb.First("prod", []string{"10.0.0.5"}, true, t0, []string{"a", "b", "c"})
	want := []phases.NodeProgramming{{Node: "a", At: t0.Add(700 * time.Millisecond)}, {Node: "b", At: t0.Add(900 * time.Millisecond)}, {Node: "c"}}
	for i := range want {
		if got[i].Node != want[i].Node || !got[i].At.Equal(want[i].At) {
			t.Errorf("node %s at %v, want %v", got[i].Node, got[i].At, want[i].At)
		}
	}
	if other := tb.First("staging", []string{"10.0.0.5"}, true, t0, []string{"a"}); !other[0].At.IsZero() {
		t.Error("a change in another namespace counted")
	}
}

// Whatever is sent, the table keeps at most its bound; what it drops is the oldest generation.
func TestTableBounded(t *testing.T) {
	tb := NewTable(time.Hour, 1000)
	for i := range 10_000 {
		addr := netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}).String()
		tb.Add(report("a", addr, true, t0), t0)
	}
	if n := tb.Len(); n > 1000 {
		t.Errorf("table holds %d changes, bound 1000", n)
	}
	last := netip.AddrFrom4([4]byte{10, 1, byte(9999 >> 8), byte(9999 & 255)}).String()
	if got := tb.First("prod", []string{last}, true, t0, []string{"a"}); got[0].At.IsZero() {
		t.Error("the newest change was dropped")
	}
	if got := tb.First("prod", []string{"10.1.0.0"}, true, t0, []string{"a"}); !got[0].At.IsZero() {
		t.Error("the oldest change is still held")
	}
	// Time turns the generations too: a change older than the retention is gone.
	tb = NewTable(time.Minute, 0)
	tb.Add(report("a", "10.0.0.5", true, t0), t0)
	tb.Add(report("a", "10.0.0.6", true, t0), t0.Add(31*time.Second))
	tb.Add(report("a", "10.0.0.7", true, t0), t0.Add(62*time.Second))
	if got := tb.First("prod", []string{"10.0.0.5"}, true, t0, []string{"a"}); !got[0].At.IsZero() {
		t.Error("a change past the retention is still held")
	}
}

// A node reporting before the moment, and heard within three heartbeats of it, is waited for.
func TestTableReporting(t *testing.T) {
	tb := NewTable(0, 0)
	tb.Add(Report{Sync: &Sync{Node: "old", Mode: ModeIPTables}}, t0.Add(-time.Hour))
	tb.Add(Report{Sync: &Sync{Node: "a", Mode: ModeIPTables}}, t0.Add(-5*time.Second))
	tb.Add(Report{Sync: &Sync{Node: "late", Mode: ModeNFTables}}, t0.Add(5*time.Second))
	nodes, mode := tb.Reporting(t0)
	if len(nodes) != 1 || nodes[0] != "a" || mode != ModeIPTables {
		t.Errorf("reporting %v (%s), want a (iptables): old is silent, late came after", nodes, mode)
	}
}

// Every string of a report came from a sender: what is not the name it claims is refused.
func TestParseHostile(t *testing.T) {
	good := func() *phases.ComponentSpan {
		return &phases.ComponentSpan{Name: SpanProgrammed, End: t0, Attrs: []phases.Attr{
			{Key: AttrNode, Value: "node-a"}, {Key: AttrNamespace, Value: "prod"}, {Key: AttrService, Value: "web"},
			{Key: AttrPortName, Value: "http"}, {Key: AttrProtocol, Value: "tcp"}, {Key: AttrAddress, Value: "10.0.0.5"},
			{Key: AttrPort, Value: int64(8080)}, {Key: AttrMode, Value: "nftables"}, {Key: AttrPrecision, Value: 1.5}}}
	}
	if r, err := Parse(good()); err != nil || r.Change == nil || r.Change.Precision != 1500*time.Microsecond {
		t.Fatalf("a good report: %+v, %v", r.Change, err)
	}
	for key, bad := range map[string]any{
		AttrNode: "node\x1b[31m", AttrNamespace: strings.Repeat("n", 64), AttrService: "Web!",
		AttrAddress: "10.0.0.300", AttrPort: int64(70000), AttrProtocol: "icmp",
	} {
		sp := good()
		for i := range sp.Attrs {
			if sp.Attrs[i].Key == key {
				sp.Attrs[i].Value = bad
			}
		}
		if _, err := Parse(sp); err == nil {
			t.Errorf("%s = %q accepted", key, bad)
		}
	}
	sp := good()
	sp.Attrs[7].Value = "ipvs\x00"
	if r, err := Parse(sp); err != nil || r.Change.Mode != "" {
		t.Errorf("an unknown mode is kept as %q (%v), want dropped", r.Change.Mode, err)
	}
}
