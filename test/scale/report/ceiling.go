package report

import (
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
)

// CeilingRun is one watcher fed one generated stream by test/scale/fakeapi (make ceiling).
type CeilingRun struct {
	Encoding string  `json:"encoding"` // json or protobuf: what the stream was served in
	Watcher  string  `json:"watcher"`  // readyspan or baseline
	Rate     float64 `json:"rate"`     // Pod startups per second asked of the server
	Startups int     `json:"startups"`
	Events   int     `json:"watch_events"`
	// Lag is what the rate is judged by: for readyspan the export lag from serving beyond the
	// settle time; for the baseline, which exports nothing, the delivery lag.
	Lag Summary `json:"lag"`
	// Delivery is the server's release of an event to its write on the watcher's connection
	// returning: a watcher that decodes too slowly holds its connection's buffers full.
	Delivery Summary `json:"delivery"`
	// Behind is how late the server itself released its last event (the machine, not the
	// watcher, falling behind).
	BehindMs   float64 `json:"server_behind_ms"`
	NoTrace    int     `json:"pods_without_trace"` // readyspan only
	Traces     int     `json:"traces"`
	Protobuf   int     `json:"protobuf_requests"` // list and watch requests answered in protobuf
	Process    Process `json:"process"`
	StartupsPS float64 `json:"startups_per_core_second"` // 1,000 / CPU seconds per 1,000 startups
}

// KeptUp says whether the watcher kept up with the run's rate: its lag's p99 at most limit.
func (r CeilingRun) KeptUp(limitMs float64) bool {
	return r.Lag.N > 0 && r.Lag.P99ms <= limitMs && r.NoTrace == 0
}

// Ceiling is, for one watcher in one encoding, the rates between which its lag's p99 passed the
// limit: Kept is the highest rate it kept up with (0 if none), Failed the lowest it did not
// (0 if it kept up with every rate run).
type Ceiling struct {
	Encoding string  `json:"encoding"`
	Watcher  string  `json:"watcher"`
	Kept     float64 `json:"kept_up_to"`
	Failed   float64 `json:"fell_behind_at"`
	// PerCore is the startups per second one core of CPU would carry, from the CPU per 1,000
	// startups at the highest rate kept up with: less disturbed by other work on the machine
	// than the rate at which the lag passes the limit.
	PerCore float64 `json:"startups_per_core_second"`
}

// Ceilings finds each watcher's ceiling in each encoding, from runs at several rates.
func Ceilings(runs []CeilingRun, limitMs float64) []Ceiling {
	type key struct{ enc, watcher string }
	byKey := map[key][]CeilingRun{}
	var keys []key
	for _, r := range runs {
		k := key{r.Encoding, r.Watcher}
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], r)
	}
	var out []Ceiling
	for _, k := range keys {
		rs := byKey[k]
		sort.Slice(rs, func(i, j int) bool { return rs[i].Rate < rs[j].Rate })
		c := Ceiling{Encoding: k.enc, Watcher: k.watcher}
		for _, r := range rs {
			if !r.KeptUp(limitMs) {
				c.Failed = r.Rate
				break
			}
			c.Kept, c.PerCore = r.Rate, r.StartupsPS
		}
		out = append(out, c)
	}
	return out
}

// CeilingReport is make ceiling's report.
type CeilingReport struct {
	Machine   string         `json:"machine"`
	Recording string         `json:"recording"`
	Template  string         `json:"template"` // the recorded Deployment every copy repeats
	LimitMs   float64        `json:"lag_limit_ms"`
	Settle    string         `json:"settle"`
	Runs      []CeilingRun   `json:"runs"`
	Ceilings  []Ceiling      `json:"ceilings"`
	Ratios    []CeilingRatio `json:"ratios"`
	Notes     []string       `json:"notes,omitempty"`
}

// CeilingRatio is readyspan's ceiling over the baseline's in one encoding: by the rate each kept
// up with, and by the CPU each spent per startup at the same rates.
type CeilingRatio struct {
	Encoding string  `json:"encoding"`
	Rate     float64 `json:"rate_ratio"`     // readyspan's Kept / the baseline's Kept
	PerCore  float64 `json:"per_core_ratio"` // the baseline's CPU per startup / readyspan's, runs at the same rates
}

// CeilingRatios compares readyspan with the baseline in each encoding. PerCore is the ratio of
// their summed CPU over the rates both kept up with (the same streams, back to back).
func CeilingRatios(runs []CeilingRun, ceilings []Ceiling, limitMs float64) []CeilingRatio {
	var out []CeilingRatio
	for _, rs := range ceilings {
		if rs.Watcher != "readyspan" {
			continue
		}
		r := CeilingRatio{Encoding: rs.Encoding}
		for _, bl := range ceilings {
			if bl.Watcher == "baseline" && bl.Encoding == rs.Encoding {
				r.Rate = Ratio(rs.Kept, bl.Kept)
			}
		}
		var rsCPU, blCPU float64
		for _, a := range runs {
			if a.Watcher != "readyspan" || a.Encoding != rs.Encoding || !a.KeptUp(limitMs) {
				continue
			}
			for _, b := range runs {
				if b.Watcher == "baseline" && b.Encoding == a.Encoding && b.Rate == a.Rate && b.KeptUp(limitMs) {
					rsCPU += a.Process.CPUPer1000Pods
					blCPU += b.Process.CPUPer1000Pods
				}
			}
		}
		r.PerCore = Ratio(blCPU, rsCPU)
		out = append(out, r)
	}
	return out
}

// Table writes the report for a person.
func (r *CeilingReport) Table(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "recording\t%s (Deployment %s repeated), lag limit %s beyond the settle time %s\n", r.Recording, r.Template, fmtMs(r.LimitMs), r.Settle)
	fmt.Fprintf(tw, "encoding\twatcher\tstartups/s\tstartups\tevents\tlag p50 / p99 / max\tdelivery p99\tno trace\tCPU s / 1,000\tstartups/s per core\tRSS steady / peak MiB\tserver behind\n")
	for _, x := range r.Runs {
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%d\t%d\t%s / %s / %s\t%s\t%d\t%.3f\t%.0f\t%.1f / %.1f\t%s\n", x.Encoding, x.Watcher, x.Rate, x.Startups, x.Events,
			fmtMs(x.Lag.P50ms), fmtMs(x.Lag.P99ms), fmtMs(x.Lag.MaxMs), fmtMs(x.Delivery.P99ms), x.NoTrace,
			x.Process.CPUPer1000Pods, x.StartupsPS, x.Process.RSSSteadyMiB, x.Process.RSSPeakMiB, fmtMs(x.BehindMs))
	}
	fmt.Fprintf(tw, "\t\n")
	fmt.Fprintf(tw, "encoding\twatcher\tkept up to\tfell behind at\tstartups/s per core\t\n")
	for _, c := range r.Ceilings {
		failed := "(every rate run)"
		if c.Failed > 0 {
			failed = fmt.Sprintf("%.0f/s", c.Failed)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f/s\t%s\t%.0f\t\n", c.Encoding, c.Watcher, c.Kept, failed, c.PerCore)
	}
	fmt.Fprintf(tw, "\t\n")
	for _, x := range r.Ratios {
		fmt.Fprintf(tw, "readyspan / baseline, %s\tceiling %.2f×\tper core %.2f×\n", x.Encoding, x.Rate, x.PerCore)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(tw, "note\t%s\n", n)
	}
	return tw.Flush()
}
