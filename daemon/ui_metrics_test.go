package daemon

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/web"
)

// The ring's gauges follow what it holds.
func TestRingMetrics(t *testing.T) {
	ring := web.NewRing(web.RingConfig{MaxRollouts: 10, MaxPods: 10, MaxBytes: 1 << 20})
	reg := prometheus.NewRegistry()
	registerRingMetrics(reg, ring)
	p := &phases.Pod{UID: "9cade20b-81ea-4be9-bdc9-d3f2d8d8b69f", Name: "web-1", Namespace: "default", Root: phases.RootBarePod}
	p.Created.Add(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC), phases.SourceWatch)
	p.Ready.Add(time.Date(2026, 11, 30, 8, 0, 3, 0, time.UTC), phases.SourceWatch)
	ring.AddPod(phases.Build(p, phases.Options{}))
	if n, err := testutil.GatherAndCount(reg, "readyspan_ui_ring_pods"); err != nil || n != 1 {
		t.Fatalf("%d series, %v", n, err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		got[mf.GetName()] = mf.GetMetric()[0].GetGauge().GetValue()
	}
	if got["readyspan_ui_ring_pods"] != 1 || got["readyspan_ui_ring_rollouts"] != 0 || got["readyspan_ui_ring_bytes"] != float64(ring.Bytes()) || ring.Bytes() == 0 {
		t.Errorf("gauges %v, ring holds %d bytes", got, ring.Bytes())
	}
}
