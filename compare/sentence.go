package compare

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// sentence says what the comparison found, in three parts: how the startup moved and whether
// that is significant, where the shift lands, and what explains it. Its values come from the
// sets (hostile strings): the reports escape it for their destination.
func sentence(r *Result) string {
	var b strings.Builder
	root := &r.Rows[0]
	e := headline(root)
	fmt.Fprintf(&b, "%s startup %s (%s at %s%%): %s.", e.Stat, signed(e.Shift.Est), span(e.Shift), pct(r.Method.Level), verdict(e, r))
	if len(r.Lead) > 0 {
		b.WriteString(" " + leadText(r))
	}
	at := r.Attribution[len(r.Attribution)-1]
	if len(at.Dims) == 0 {
		b.WriteString(" The sets differ in none of the dimensions compared.")
		return b.String()
	}
	d := at.Dims[0]
	fmt.Fprintf(&b, " %s (%s) explains %s of %s's mean shift", capital(d.Words), valuesText(d), shareText(d.Share), at.Span)
	if len(d.ConfoundedWith) > 0 {
		fmt.Fprintf(&b, ", confounded with %s: the data cannot tell them apart", wordsOf(d.ConfoundedWith))
	}
	if s := sizeText(r, d); s != "" {
		b.WriteString("; " + s)
	}
	b.WriteString(".")
	return b.String()
}

// headline is the statistic the sentence leads with: the highest percentile whose shift is
// significant, else the mean.
func headline(root *Row) *Estimate {
	for s := StatP99; s > StatMean; s-- {
		if root.Stats[s].Significant {
			return &root.Stats[s]
		}
	}
	return root.mean()
}

// runsText says why a side of one run cannot be judged.
func runsText(r *Result) string {
	return fmt.Sprintf("%d and %d runs; with so few runs a side a shift cannot be told from the variation between runs of one setup, %d a side needed",
		r.A.Runs, r.B.Runs, MinRuns)
}

func verdict(e *Estimate, r *Result) string {
	switch {
	case e.Significant:
		return "significant"
	case e.TooFewPods:
		return fmt.Sprintf("too few Pods to call it significant (%d and %d; %d a side needed)", r.A.Pods, r.B.Pods, e.MinPods)
	case e.TooFewRuns && e.Shift.excludesZero():
		return fmt.Sprintf("beyond the Pods' spread, but not called significant: %s", runsText(r))
	case e.TooFewRuns:
		return "no significant shift (" + runsText(r) + ")"
	}
	return "no significant shift"
}

func leadText(r *Result) string {
	rows := map[string]*Row{}
	for i := range r.Rows {
		rows[r.Rows[i].Span] = &r.Rows[i]
	}
	ph := rows[r.Lead[0]]
	var b strings.Builder
	if ph != nil && ph.mean().Shift.excludesZero() {
		fmt.Fprintf(&b, "It lands in %s, mean %s (%s)", ph.Span, signed(ph.mean().Shift.Est), span(ph.mean().Shift))
		if len(r.Lead) > 1 {
			sub := rows[r.Lead[1]]
			fmt.Fprintf(&b, ", of which %s %s (%s)", sub.Span, signed(sub.mean().Shift.Est), span(sub.mean().Shift))
		}
	} else {
		sub := rows[r.Lead[len(r.Lead)-1]]
		fmt.Fprintf(&b, "The largest shift measured beyond the stamps' uncertainty is %s (in %s), mean %s (%s)",
			sub.Span, sub.Phase, signed(sub.mean().Shift.Est), span(sub.mean().Shift))
	}
	switch last := rows[r.Lead[len(r.Lead)-1]].mean(); {
	case last.Significant:
		b.WriteString(", significant")
	case last.TooFewPods:
		b.WriteString(", too few Pods to call it significant")
	case last.TooFewRuns:
		b.WriteString(", not called significant with so few runs a side")
	default:
		b.WriteString(", not significant with every row tested together")
	}
	b.WriteString(".")
	return b.String()
}

// valuesText names a dimension's values on each side: "v1.34.4 → v1.37.2", the most common first.
func valuesText(d DimShare) string {
	side := func(pods func(ValueShare) int) string {
		var vs []string
		for _, v := range d.Values {
			if pods(v) > 0 {
				vs = append(vs, v.Value)
			}
		}
		if len(vs) > 2 {
			vs = append(vs[:2], fmt.Sprintf("%d more", len(vs)-2))
		}
		return strings.Join(vs, ", ")
	}
	return side(func(v ValueShare) int { return v.PodsA }) + " → " + side(func(v ValueShare) int { return v.PodsB })
}

// sizeText compares the sides' images' sizes when the dimension is about images.
func sizeText(r *Result, d DimShare) string {
	if d.Dim != DimImage.Key() && d.Dim != DimImageCache.Key() && !containsStr(d.ConfoundedWith, DimImage.Key()) {
		return ""
	}
	a, b := r.A.ImageBytes, r.B.ImageBytes
	switch {
	case a > 0 && b > 0:
		return fmt.Sprintf("images pulled of %s against %s (%.1f×)", bytesText(b), bytesText(a), b/a)
	case a > 0:
		return fmt.Sprintf("images pulled of %s in %s, none stated in %s", bytesText(a), r.A.Label, r.B.Label)
	case b > 0:
		return fmt.Sprintf("images pulled of %s in %s, none stated in %s", bytesText(b), r.B.Label, r.A.Label)
	}
	return ""
}

func wordsOf(keys []string) string {
	var ws []string
	for _, k := range keys {
		for d := range numDims {
			if d.Key() == k {
				ws = append(ws, d.Words())
			}
		}
	}
	if len(ws) < 2 {
		return strings.Join(ws, "")
	}
	return strings.Join(ws[:len(ws)-1], ", ") + " and " + ws[len(ws)-1]
}

func capital(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// signed is a length in seconds with its sign and a unit that suits it: "+2.10 s", "−35 ms".
func signed(x float64) string {
	sign := "+"
	if x < 0 {
		sign = "−"
	}
	return sign + seconds3(math.Abs(x))
}

func seconds3(x float64) string {
	switch {
	case math.IsNaN(x):
		return "n/a"
	case x >= 1:
		return strconv.FormatFloat(x, 'f', 2, 64) + " s"
	case x >= 0.001:
		return strconv.FormatFloat(x*1000, 'f', 0, 64) + " ms"
	case x == 0:
		return "0 s"
	}
	return strconv.FormatFloat(x*1e6, 'f', 0, 64) + " µs"
}

// span is an interval's ends: "−2.61 s to −220 ms".
func span(i Interval) string { return signed(i.Low) + " to " + signed(i.High) }

func pct(level float64) string { return strconv.FormatFloat(level*100, 'f', -1, 64) }

// shareText is an explained share and its interval: "100% (95% to 100%)", or why there is none.
func shareText(i Interval) string {
	if math.IsNaN(i.Est) {
		return "no share (the mean did not move)"
	}
	pc := func(x float64) string { return strconv.FormatFloat(x*100, 'f', 0, 64) + "%" }
	if math.IsNaN(i.Low) || math.IsNaN(i.High) {
		return pc(i.Est)
	}
	return pc(i.Est) + " (" + pc(i.Low) + " to " + pc(i.High) + ")"
}

// bytesText is a size as the kubelet's messages round it.
func bytesText(n float64) string {
	switch {
	case n >= 1e9:
		return strconv.FormatFloat(n/1e9, 'f', 2, 64) + " GB"
	case n >= 1e5:
		return strconv.FormatFloat(n/1e6, 'f', 1, 64) + " MB"
	}
	return strconv.FormatFloat(n/1e3, 'f', 1, 64) + " kB"
}
