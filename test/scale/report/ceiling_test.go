package report

import (
	"strings"
	"testing"
)

func ceilingRun(enc, watcher string, rate, p99, cpu float64, noTrace int) CeilingRun {
	return CeilingRun{Encoding: enc, Watcher: watcher, Rate: rate, Lag: Summary{N: 100, P99ms: p99}, NoTrace: noTrace,
		Process: Process{CPUPer1000Pods: cpu}, StartupsPS: 1000 / cpu}
}

func TestCeilings(t *testing.T) {
	runs := []CeilingRun{
		ceilingRun("json", "readyspan", 300, 2500, 5, 0), // out of rate order on purpose
		ceilingRun("json", "readyspan", 100, 40, 4, 0),
		ceilingRun("json", "baseline", 100, 3, 3, 0),
		ceilingRun("json", "baseline", 300, 20, 3.2, 0),
		ceilingRun("json", "readyspan", 1000, 9000, 6, 0),
		ceilingRun("json", "baseline", 1000, 4000, 3.5, 0),
		ceilingRun("protobuf", "readyspan", 100, 30, 2, 0),
		ceilingRun("protobuf", "readyspan", 300, 900, 2.5, 3), // traces missing: not kept up
		ceilingRun("protobuf", "baseline", 100, 2, 1, 0),
		ceilingRun("protobuf", "baseline", 300, 2, 1.25, 0),
	}
	got := Ceilings(runs, 1000)
	want := []Ceiling{
		{Encoding: "json", Watcher: "readyspan", Kept: 100, Failed: 300, PerCore: 250},
		{Encoding: "json", Watcher: "baseline", Kept: 300, Failed: 1000, PerCore: 312.5},
		{Encoding: "protobuf", Watcher: "readyspan", Kept: 100, Failed: 300, PerCore: 500},
		{Encoding: "protobuf", Watcher: "baseline", Kept: 300, Failed: 0, PerCore: 800},
	}
	if len(got) != len(want) {
		t.Fatalf("Ceilings = %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("ceiling %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	ratios := CeilingRatios(runs, got, 1000)
	// json: 100/300 by rate; per core over the rates both kept up with (100): 3 / 4.
	if len(ratios) != 2 || ratios[0] != (CeilingRatio{"json", 0.33, 0.75}) || ratios[1] != (CeilingRatio{"protobuf", 0.33, 0.5}) {
		t.Errorf("CeilingRatios = %+v", ratios)
	}
	var b strings.Builder
	if err := (&CeilingReport{Runs: runs, Ceilings: got, Ratios: ratios}).Table(&b); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"readyspan / baseline, json", "ceiling 0.33×", "(every rate run)", "300/s"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, b.String())
		}
	}
}
