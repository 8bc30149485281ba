// Command growth fits the scale test bed's reports (the JSON files scalerun writes, one per
// load level) with lines: resident memory against the Pods existing, CPU against the Pod
// startups, for readyspan and the baseline; and prints what those lines give at a size no run
// here reached. The result is an extrapolation, and says so.
//
//	growth -pods 150000 -rate 100 .local/scale/n50-p1000-r20.json .local/scale/n100-p2500-r20.json ...
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/readyspan/readyspan/test/scale/report"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "growth:", err)
		os.Exit(1)
	}
}

func run() error {
	pods := flag.Float64("pods", 150000, "Pods to extrapolate to")
	rate := flag.Float64("rate", 100, "Pod startups per second to extrapolate to")
	ringMiB := flag.Float64("ui-ring-mib", 64, "the UI ring's bound readyspan runs with (--ui-max-mib): added whole to the extrapolated RSS, since the ring stops growing at its bound")
	within := flag.String("within", "", "instead: fit one run's RSS against its Pods Ready so far, from PREFIX-samples.jsonl and PREFIX-pods.jsonl")
	flag.Parse()
	if *within != "" {
		return withinRun(*within)
	}
	var reports []report.Report
	for _, path := range flag.Args() {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var r report.Report
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		reports = append(reports, r)
	}
	if len(reports) < 2 {
		return fmt.Errorf("need at least two reports, got %d", len(reports))
	}
	sort.Slice(reports, func(i, j int) bool { return reports[i].Level.Pods < reports[j].Level.Pods })

	fmt.Println("| nodes | Pods | startups | Pods/s | readyspan RSS MiB | baseline RSS MiB | ratio | readyspan CPU s | baseline CPU s | ratio | readyspan CPU µs/watch event |")
	fmt.Println("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	var x, rsRSS, rsNoRing, blRSS, st, rsCPU, blCPU []float64
	for _, r := range reports {
		events := 0.0
		for _, v := range r.WatchEvents {
			events += v
		}
		perEvent := 0.0
		if events > 0 {
			perEvent = r.Readyspan.CPUSeconds / events * 1e6
		}
		fmt.Printf("| %d | %d | %d | %.1f | %.1f | %.1f | %.2f | %.2f | %.2f | %.2f | %.0f |\n",
			r.Level.Nodes, r.Level.Pods, r.Level.Startups, r.Level.Sustain,
			r.Readyspan.RSSSteadyMiB, r.Baseline.RSSSteadyMiB, r.RSSRatio,
			r.Readyspan.CPUSeconds, r.Baseline.CPUSeconds, r.CPURatio, perEvent)
		x = append(x, float64(r.Level.Pods))
		rsRSS, blRSS = append(rsRSS, r.Readyspan.RSSSteadyMiB), append(blRSS, r.Baseline.RSSSteadyMiB)
		// The UI's ring of recent traces fills up to a bound (Pods, rollouts, MiB) and then stays:
		// a line through it would extrapolate a fixed cost as if it grew with the cluster.
		rsNoRing = append(rsNoRing, r.Readyspan.RSSSteadyMiB-r.UIRingMiB)
		st = append(st, float64(r.Level.Startups))
		rsCPU, blCPU = append(rsCPU, r.Readyspan.CPUSeconds), append(blCPU, r.Baseline.CPUSeconds)
	}
	fmt.Println()
	for _, f := range []struct {
		what string
		l    report.Line
		unit string
	}{
		{"readyspan RSS MiB = a + b·Pods", report.FitLine(x, rsRSS), "MiB"},
		{"readyspan RSS less the UI ring", report.FitLine(x, rsNoRing), "MiB"},
		{"baseline RSS MiB = a + b·Pods", report.FitLine(x, blRSS), "MiB"},
		{"readyspan CPU s = a + b·startups", report.FitLine(st, rsCPU), "s"},
		{"baseline CPU s = a + b·startups", report.FitLine(st, blCPU), "s"},
	} {
		fmt.Printf("%-34s a %.3g  b %.4g  (R² %.3f, %d points)\n", f.what, f.l.Intercept, f.l.Slope, f.l.R2, f.l.N)
	}
	rs, bl := report.FitLine(x, rsNoRing), report.FitLine(x, blRSS)
	rc, bc := report.FitLine(st, rsCPU), report.FitLine(st, blCPU)
	fmt.Printf("\nEXTRAPOLATION (beyond every measured size) to %.0f Pods and %.0f Pod startups/s:\n", *pods, *rate)
	fmt.Printf("  readyspan RSS %.0f MiB (the line less the UI ring, plus the ring's bound %.0f MiB), baseline %.0f MiB\n", rs.At(*pods)+*ringMiB, *ringMiB, bl.At(*pods))
	fmt.Printf("  readyspan CPU %.2f cores, baseline %.2f cores (the slope: CPU seconds per startup, times the rate)\n", rc.Slope**rate, bc.Slope**rate)
	return nil
}

// withinRun fits, for one run, each process's RSS against the Pods Ready so far, over the
// samples from the first Ready to the last: a growth curve from one run with Pods created at a
// steady pace (no rollouts). Pods created but not Ready yet are cached too, so the slope is an
// upper bound of the memory per Pod.
func withinRun(prefix string) error {
	type sample struct {
		Process string    `json:"process"`
		At      time.Time `json:"at"`
		RSS     int64     `json:"rss_bytes"`
	}
	type pod struct {
		Ready time.Time `json:"ready"`
	}
	var samples []sample
	if err := readLines(prefix+"-samples.jsonl", func(b []byte) error {
		var s sample
		err := json.Unmarshal(b, &s)
		samples = append(samples, s)
		return err
	}); err != nil {
		return err
	}
	var ready []time.Time
	if err := readLines(prefix+"-pods.jsonl", func(b []byte) error {
		var p pod
		err := json.Unmarshal(b, &p)
		ready = append(ready, p.Ready)
		return err
	}); err != nil {
		return err
	}
	if len(ready) < 2 {
		return fmt.Errorf("%s: fewer than two Ready Pods", prefix)
	}
	sort.Slice(ready, func(i, j int) bool { return ready[i].Before(ready[j]) })
	first, last := ready[0], ready[len(ready)-1]
	xs, ys := map[string][]float64{}, map[string][]float64{}
	for _, s := range samples {
		if s.At.Before(first) || s.At.After(last) {
			continue
		}
		n := sort.Search(len(ready), func(i int) bool { return ready[i].After(s.At) })
		xs[s.Process] = append(xs[s.Process], float64(n))
		ys[s.Process] = append(ys[s.Process], float64(s.RSS)/(1<<20))
	}
	names := make([]string, 0, len(xs))
	for name := range xs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		l := report.FitLine(xs[name], ys[name])
		fmt.Printf("%-10s RSS MiB = %.1f + %.5f·(Pods Ready)  R² %.3f over %d samples: %.0f bytes per Pod\n", name, l.Intercept, l.Slope, l.R2, l.N, l.Slope*(1<<20))
	}
	return nil
}

func readLines(path string, each func([]byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		if err := each(sc.Bytes()); err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
	}
	return sc.Err()
}
