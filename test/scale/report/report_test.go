package report

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/readyspan/readyspan/test/scale/procstat"
	"github.com/readyspan/readyspan/test/scale/scrape"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func TestSummarize(t *testing.T) {
	tests := []struct {
		name string
		in   []time.Duration
		want Summary
	}{
		{name: "none", want: Summary{}},
		{name: "one", in: []time.Duration{5 * time.Millisecond}, want: Summary{N: 1, P50ms: 5, P99ms: 5, MaxMs: 5, MinMs: 5}},
		{
			// Nearest rank: p50 of 1..100 ms is the 50th value, p99 the 99th; input unsorted.
			name: "hundred",
			in: func() []time.Duration {
				var ds []time.Duration
				for i := 100; i >= 1; i-- {
					ds = append(ds, time.Duration(i)*time.Millisecond)
				}
				return ds
			}(),
			want: Summary{N: 100, P50ms: 50, P99ms: 99, MaxMs: 100, MinMs: 1},
		},
		{name: "negative and sub-millisecond", in: []time.Duration{-1500 * time.Microsecond, 250 * time.Microsecond, 3 * time.Millisecond}, want: Summary{N: 3, P50ms: 0.25, P99ms: 3, MaxMs: 3, MinMs: -1.5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Summarize(tt.in); got != tt.want {
				t.Errorf("Summarize = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestLag(t *testing.T) {
	pods := []PodTimes{
		{UID: "0b1c2d3e-0000-4000-8000-00000000000a", Ready: at(1000), Serving: at(1200)},
		{UID: "0b1c2d3e-0000-4000-8000-00000000000b", Ready: at(2000)},                    // no Service
		{UID: "0b1c2d3e-0000-4000-8000-00000000000c", Ready: at(3000)},                    // no trace
		{UID: "0b1c2d3e-0000-4000-8000-00000000000d"},                                     // never Ready: not counted
		{UID: "0B1C2D3E-0000-4000-8000-00000000000E", Ready: at(4000), Serving: at(3900)}, // serving first
	}
	received := map[string]time.Time{
		"0b1c2d3e000040008000000000000000a": {}, // a wrong ID must not match
		"0b1c2d3e00004000800000000000000a":  at(3500),
		"0b1c2d3e00004000800000000000000b":  at(4100),
		"0b1c2d3e00004000800000000000000e":  at(6050),
	}
	settle := 2 * time.Second
	lags, missing := Lag(pods, received, settle, false)
	want := []time.Duration{500 * time.Millisecond, 100 * time.Millisecond, 50 * time.Millisecond}
	if len(lags) != len(want) {
		t.Fatalf("lags = %v, want %v", lags, want)
	}
	for i := range want {
		if lags[i] != want[i] {
			t.Errorf("lag[%d] = %v, want %v", i, lags[i], want[i])
		}
	}
	if len(missing) != 1 || missing[0] != "0b1c2d3e-0000-4000-8000-00000000000c" {
		t.Errorf("missing = %v", missing)
	}
	served, _ := Lag(pods, received, settle, true)
	if served[0] != 300*time.Millisecond || served[2] != 50*time.Millisecond {
		t.Errorf("lags from serving = %v, want 300ms first (serving after Ready) and 50ms last (serving before Ready)", served)
	}
}

func TestSustained(t *testing.T) {
	pods := []PodTimes{{Ready: at(0)}, {Ready: at(500)}, {}, {Ready: at(2000)}, {Ready: at(1000)}, {Ready: at(1500)}}
	if got := Sustained(pods); got != 2 {
		t.Errorf("Sustained = %v, want 2 (4 Pods after the first in 2s)", got)
	}
	if got := Sustained(pods[:1]); got != 0 {
		t.Errorf("Sustained of one Pod = %v, want 0", got)
	}
}

func TestCost(t *testing.T) {
	mib := int64(1 << 20)
	sample := func(ms int, cpu time.Duration, rss, peak int64) procstat.Sample {
		return procstat.Sample{At: at(ms), CPU: cpu, RSS: rss * mib, PeakRSS: peak * mib}
	}
	samples := []procstat.Sample{
		sample(0, 1*time.Second, 40, 45),
		sample(1000, 1*time.Second, 42, 45), // idle: last before the load
		sample(3000, 3*time.Second, 80, 95),
		sample(11000, 9*time.Second, 90, 120), // last of the load window
	}
	samples[1].ReadBytes, samples[3].ReadBytes = 5*mib, 15*mib+mib/2 // read over the CPU's window
	samples = append(samples, []procstat.Sample{
		{At: at(11500), Finished: true},
		sample(12000, 9*time.Second, 60, 120), // steady
		sample(13000, 9*time.Second, 62, 120),
		sample(14000, 9*time.Second, 64, 120),
	}...)
	w := Window{LoadStart: at(2000), LoadEnd: at(11000), End: at(14000)}
	got := Cost(samples, w, 4000, 2000)
	want := Process{
		CPUSeconds: 8, CPUPer1000Pods: 2, CPUCores: 0.8, ReadMiB: 10.5,
		RSSIdleMiB: 41, RSSSteadyMiB: 62, RSSPeakMiB: 120,
		BytesPerPod: float64(21*mib) / 2000,
	}
	want.BytesPerPod = float64(int64(want.BytesPerPod + 0.5))
	if got != want {
		t.Errorf("Cost =\n %+v\nwant\n %+v", got, want)
	}
}

// The RSS trend is the slope over the load's second half only: a rise while the cluster fills
// up does not count, a rise once it is full does.
func TestCostTrend(t *testing.T) {
	for _, tc := range []struct {
		name      string
		perMinute float64 // the second half's rise
		want      float64
	}{
		{"flat", 0, 0},
		{"growing", 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var samples []procstat.Sample
			for sec := 0; sec <= 600; sec += 10 { // a 10-minute load
				rss := 100.0 + float64(min(sec, 300))/6 // filling up: +50 MiB in the first half
				if sec > 300 {
					rss += tc.perMinute * float64(sec-300) / 60
				}
				samples = append(samples, procstat.Sample{At: at(sec * 1000), RSS: int64(rss * (1 << 20))})
			}
			got := Cost(samples, Window{LoadStart: at(0), LoadEnd: at(600000), End: at(600000)}, 1000, 100)
			if math.Abs(got.RSSTrendMiBPerMin-tc.want) > 0.01 {
				t.Errorf("trend %v MiB/min, want %v", got.RSSTrendMiBPerMin, tc.want)
			}
		})
	}
}

func TestRatio(t *testing.T) {
	if got := Ratio(3, 2); got != 1.5 {
		t.Errorf("Ratio(3, 2) = %v", got)
	}
	if got := Ratio(3, 0); got != 0 {
		t.Errorf("Ratio(3, 0) = %v, want 0", got)
	}
}

func TestTable(t *testing.T) {
	r := Report{
		Level:     Level{Nodes: 20, Pods: 100, Startups: 200, Rolls: 1, Rate: 10, Settle: "2s", Duration: "20s", Sustain: 9.5, Complete: true},
		ExportLag: Summary{N: 200, P50ms: 120, P99ms: 880.4, MaxMs: 1203},
		Readyspan: Process{CPUSeconds: 3, RSSSteadyMiB: 60},
		Baseline:  Process{CPUSeconds: 2, RSSSteadyMiB: 50},
		RSSRatio:  1.2, CPURatio: 1.5,
		Dropped: map[string]float64{"max_in_flight": 0, "b": 2},
		Watchers: []Watcher{
			{Name: "readyspan", Encoding: "protobuf", Process: Process{CPUSeconds: 3, ReadMiB: 41.26}, Requests: 30, RequestSeconds: 0.412},
			{Name: "baseline", Encoding: "json", Process: Process{CPUSeconds: 4.5, ReadMiB: 97.5}, Requests: 27, RequestSeconds: 0.9},
		},
		APIServer:     &Process{CPUSeconds: 61.5},
		APIServerSent: map[string]float64{"watch events": 120000, "watch event MiB": 310.44, "LIST response MiB": 2.5},
	}
	var buf bytes.Buffer
	if err := r.Table(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"p50 120ms  p99 880ms  max 1.203s", "9.5 Pods/s sustained", "b=2 / none / 0", "RSS steady MiB", "1.20",
		"readyspan (protobuf) 3.00", "41.3 30, 0.412", "baseline (json) 4.50", "97.5 27, 0.900",
		"kube-apiserver (every client) 61.50", "sent 120000 watch events, 310.4 MiB; LIST responses 2.5 MiB"} {
		if !strings.Contains(out, want) && !strings.Contains(strings.Join(strings.Fields(out), " "), want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// A restart's catch-up: CPU and RSS as they were when /readyz first answered, the RSS at the
// end, the highest peak; a sample taken after the process ended counts for nothing.
func TestCatchupOf(t *testing.T) {
	mib := int64(1 << 20)
	sample := func(ms int, cpu time.Duration, rss, peak int64) procstat.Sample {
		return procstat.Sample{At: at(ms), CPU: cpu, RSS: rss * mib, PeakRSS: peak * mib}
	}
	for _, tc := range []struct {
		name    string
		samples []procstat.Sample
		synced  int // ms
		want    Catchup
	}{
		{"synced between samples", []procstat.Sample{
			sample(0, 0, 10, 10), sample(200, 400*time.Millisecond, 80, 150), sample(400, 700*time.Millisecond, 90, 160),
			sample(600, 800*time.Millisecond, 70, 160), sample(5000, 900*time.Millisecond, 60, 160),
		}, 500, Catchup{SyncSeconds: 0.5, CPUSeconds: 0.7, RSSSyncMiB: 90, RSSAfterMiB: 60, RSSPeakMiB: 160}},
		{"synced at a sample", []procstat.Sample{
			sample(0, 0, 10, 10), sample(200, 300*time.Millisecond, 40, 40), sample(400, 350*time.Millisecond, 45, 50),
		}, 200, Catchup{SyncSeconds: 0.2, CPUSeconds: 0.3, RSSSyncMiB: 40, RSSAfterMiB: 45, RSSPeakMiB: 50}},
		{"a sample after the end", []procstat.Sample{
			sample(0, 0, 10, 10), sample(200, 300*time.Millisecond, 40, 40), {At: at(400), Finished: true},
		}, 100, Catchup{SyncSeconds: 0.1, CPUSeconds: 0, RSSSyncMiB: 10, RSSAfterMiB: 40, RSSPeakMiB: 40}},
	} {
		if got := CatchupOf(tc.samples, at(0), at(tc.synced)); got != tc.want {
			t.Errorf("%s: CatchupOf =\n %+v\nwant\n %+v", tc.name, got, tc.want)
		}
	}
}

func TestHeapOf(t *testing.T) {
	fams, err := scrape.Families(scrape.Text(`# TYPE go_memstats_heap_alloc_bytes gauge
go_memstats_heap_alloc_bytes 1.048576e+08
# TYPE go_memstats_heap_inuse_bytes gauge
go_memstats_heap_inuse_bytes 1.2582912e+08
# TYPE go_memstats_heap_idle_bytes gauge
go_memstats_heap_idle_bytes 8.388608e+07
# TYPE go_memstats_heap_released_bytes gauge
go_memstats_heap_released_bytes 3.145728e+07
# TYPE go_memstats_next_gc_bytes gauge
go_memstats_next_gc_bytes 2.097152e+08
`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := HeapOf(fams), (Heap{AllocMiB: 100, InUseMiB: 120, KeptMiB: 50, NextGCMiB: 200}); got != want {
		t.Errorf("HeapOf = %+v, want %+v", got, want)
	}
}
