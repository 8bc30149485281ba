package otlpin

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/readyspan/readyspan/dataplane"
	"github.com/readyspan/readyspan/phases"
)

// nodeSpan is a span of readyspan's node component as the decoder hands it on.
func nodeSpan(id byte, name string, attrs ...phases.Attr) phases.ComponentSpan {
	at := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	return phases.ComponentSpan{Service: dataplane.Component, TraceID: phases.TraceID{id}, SpanID: phases.SpanID{id},
		Name: name, Start: at, End: at, Attrs: attrs}
}

func programmedOn(id byte, node string) phases.ComponentSpan {
	return nodeSpan(id, dataplane.SpanProgrammed,
		phases.Attr{Key: dataplane.AttrNode, Value: node}, phases.Attr{Key: dataplane.AttrNamespace, Value: "web"},
		phases.Attr{Key: dataplane.AttrService, Value: "front"}, phases.Attr{Key: dataplane.AttrPortName, Value: "http"},
		phases.Attr{Key: dataplane.AttrProtocol, Value: "tcp"}, phases.Attr{Key: dataplane.AttrAddress, Value: "10.88.77.5"},
		phases.Attr{Key: dataplane.AttrPort, Value: int64(8080)}, phases.Attr{Key: dataplane.AttrMode, Value: dataplane.ModeNFTables})
}

// A node-bound sender reports only its own node's rules; a forged node, a malformed report or
// a store without a table drops the span and counts why. Nothing of it is held for Pod traces.
func TestNodeReports(t *testing.T) {
	s := NewStore(time.Minute, 1<<20, prometheus.NewRegistry())
	table := dataplane.NewTable(0, 0)
	s.SetDataplane(table)

	own := s.Request(Sender{Name: "system:serviceaccount:readyspan:node", Node: "node-a"})
	own.Add([]phases.ComponentSpan{programmedOn(1, "node-a"), programmedOn(2, "node-b"),
		nodeSpan(3, dataplane.SpanProgrammed, phases.Attr{Key: dataplane.AttrNode, Value: "node-a"}), // no address
		nodeSpan(4, dataplane.SpanSynced, phases.Attr{Key: dataplane.AttrNode, Value: "node-a"})})
	own.End()
	gateway := s.Request(Sender{Name: "gateway", AnyNode: true})
	gateway.Add([]phases.ComponentSpan{programmedOn(5, "node-b")})
	gateway.End()
	unbound := s.Request(Sender{Name: "somebody"})
	unbound.Add([]phases.ComponentSpan{programmedOn(6, "node-c")})
	unbound.End()

	if n := table.Len(); n != 2 {
		t.Errorf("table holds %d changes, want 2 (node-a's own, node-b's through the gateway)", n)
	}
	c := dataplane.Component
	for reason, want := range map[string]float64{ReasonForbidden: 2, ReasonMalformed: 1} {
		if got := testutil.ToFloat64(s.m.drop.WithLabelValues(c, reason)); got != want {
			t.Errorf("dropped %s = %v, want %v", reason, got, want)
		}
	}
	if got := testutil.ToFloat64(s.m.join.WithLabelValues(c)); got != 3 {
		t.Errorf("joined = %v, want 3 (two changes and a heartbeat)", got)
	}
	if len(s.traces) != 0 {
		t.Errorf("%d traces held: the node component's spans are not held for Pod traces", len(s.traces))
	}
	nodes, mode := table.Reporting(s.now())
	if len(nodes) != 2 || mode != dataplane.ModeNFTables {
		t.Errorf("reporting %v in %q, want node-a and node-b in nftables", nodes, mode)
	}

	bare := NewStore(time.Minute, 1<<20, prometheus.NewRegistry())
	bare.Add([]phases.ComponentSpan{programmedOn(7, "node-a")})
	if got := testutil.ToFloat64(bare.m.drop.WithLabelValues(c, ReasonComponent)); got != 1 {
		t.Errorf("without a table: dropped component = %v, want 1", got)
	}
}
