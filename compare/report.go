package compare

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/readyspan/readyspan/safetext"
)

// Schema names the layout of WriteJSON's output; it changes only when a field changes meaning
// or goes.
const Schema = "readyspan.compare/v1"

// WriteJSON writes the result as one indented JSON document (docs/compare.md lists the fields).
func WriteJSON(w io.Writer, r *Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Schema string `json:"schema"`
		*Result
	}{Schema, r})
}

// maxSentence bounds the sentence printed (bytes): it quotes a few values of maxValue bytes.
const maxSentence = 4096

// shownValues bounds the values of a dimension the text and the page list.
const shownValues = 8

// WriteText writes the result for a terminal: the sentence, a table of the rows and the
// attribution. Every string from the sets passes through safetext.
func WriteText(w io.Writer, r *Result) error {
	fmt.Fprintf(w, "A: %s\nB: %s\n\n%s\n\n", sideText(r.A), sideText(r.B), safetext.Cut(r.Sentence, maxSentence))
	fmt.Fprintf(w, "Shift B − A; %s%% intervals: %s (%d resamples, seed %d). * significant, ~ too few Pods or runs to say.\n\n",
		pct(r.Method.Level), r.Method.Interval, r.Method.Resamples, r.Method.Seed)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SPAN\tPODS A/B\tMEAN A\tMEAN B\tMEAN SHIFT\tINTERVAL\t\tP50\tP90\tP99")
	for _, row := range r.Rows {
		m := row.mean()
		fmt.Fprintf(tw, "%s%s\t%d/%d\t%s\t%s\t%s\t%s\t%s", strings.Repeat("  ", row.Depth), row.Span, row.WithA, row.WithB,
			seconds3(m.A), seconds3(m.B), signed(m.Shift.Est), span(m.Shift), mark(m))
		for s := StatP50; s < numStats; s++ {
			e := &row.Stats[s]
			fmt.Fprintf(tw, "\t%s %s", signed(e.Shift.Est), mark(e))
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, at := range r.Attribution {
		writeAttribution(w, &at)
	}
	return nil
}

func sideText(s SideSummary) string {
	t := fmt.Sprintf("%s, %d Pods Ready", safetext.Field(s.Label), s.Pods)
	if len(s.NotReady) > 0 {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(s.NotReady)) {
			parts = append(parts, fmt.Sprintf("%d %s", s.NotReady[k], safetext.Field(k)))
		}
		t += " (not compared: " + strings.Join(parts, ", ") + ")"
	}
	return t
}

func mark(e *Estimate) string {
	switch {
	case e.Significant:
		return "*"
	case e.TooFewPods, e.TooFewRuns:
		return "~"
	}
	return ""
}

func writeAttribution(w io.Writer, at *Attribution) {
	fmt.Fprintf(w, "\nWhat explains %s's mean shift of %s (%s):\n", at.Span, signed(at.Shift.Est), span(at.Shift))
	if len(at.Dims) == 0 {
		fmt.Fprintln(w, "  the sets differ in none of the dimensions compared")
		return
	}
	for _, d := range at.Dims {
		fmt.Fprintf(w, "  %s: mix %s (%s), rate %s (%s), explains %s", d.Words, signed(d.Mix.Est), span(d.Mix),
			signed(d.Rate.Est), span(d.Rate), shareText(d.Share))
		if d.Separates {
			fmt.Fprint(w, "; no value on both sides")
		}
		if len(d.ConfoundedWith) > 0 {
			fmt.Fprintf(w, "; confounded with %s", wordsOf(d.ConfoundedWith))
		}
		fmt.Fprintln(w)
		for i, v := range d.Values {
			if i == shownValues {
				fmt.Fprintf(w, "    … %d more values\n", len(d.Values)-shownValues)
				break
			}
			fmt.Fprintf(w, "    %s: A %d Pods, mean %s; B %d Pods, mean %s; rate part %s\n", safetext.Field(v.Value),
				v.PodsA, meanText(v.MeanA), v.PodsB, meanText(v.MeanB), signed(v.Rate))
		}
	}
}

func meanText(m *float64) string {
	if m == nil || math.IsNaN(*m) {
		return "—"
	}
	return seconds3(*m)
}
