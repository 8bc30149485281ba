package gate

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/readyspan/readyspan/safetext"
)

// Counts are how many objectives ended in each status.
func (v Verdict) Counts() (met, broken, notJudged, notObserved int) {
	for _, r := range v.Results {
		switch r.Status {
		case StatusMet:
			met++
		case StatusBroken:
			broken++
		case StatusNotJudged:
			notJudged++
		case StatusNotObserved:
			notObserved++
		}
	}
	return
}

// Word is the verdict in a word: pass, fail or no-verdict.
func (v Verdict) Word() string {
	return map[int]string{ExitPass: "pass", ExitBroken: "fail", ExitNoJudge: "no-verdict"}[v.Exit]
}

// Headline is the verdict in one line: PASS, FAIL or NO VERDICT, and the counts.
func (v Verdict) Headline() string {
	met, broken, notJudged, notObserved := v.Counts()
	word := map[int]string{ExitPass: "PASS", ExitBroken: "FAIL", ExitNoJudge: "NO VERDICT"}[v.Exit]
	s := fmt.Sprintf("%s: %d objectives met, %d broken", word, met, broken)
	if notObserved > 0 {
		s += fmt.Sprintf(", %d not observed", notObserved)
	}
	if notJudged > 0 {
		s += fmt.Sprintf(", %d not judged", notJudged)
	}
	return s + fmt.Sprintf(" (%d Pods, %d rollouts)", v.Pods, v.Rollouts)
}

// statusWords is how the text and the report write a status.
var statusWords = map[Status]string{StatusMet: "met", StatusBroken: "BROKEN", StatusNotJudged: "not judged", StatusNotObserved: "NOT OBSERVED"}

// StatusWords is how a person reads a status.
func (s Status) Words() string { return statusWords[s] }

// WriteText writes the verdict for a terminal: the headline, then each objective, broken first,
// each broken one followed by its culprits. Every string from the cluster passes through
// safetext.
func WriteText(out io.Writer, title string, v Verdict) error {
	w := safetext.NewWriter(out)
	fmt.Fprintf(w, "gate %s\n%s\n", safetext.Field(title), v.Headline())
	for _, r := range v.Ordered() {
		fmt.Fprintf(w, "  %-12s %-34s %s\n", r.Status.Words(), r.Objective, r.Message)
		for _, c := range r.Culprits {
			fmt.Fprintf(w, "               %s\n", c.Line())
		}
	}
	for _, n := range v.Notes {
		fmt.Fprintf(w, "note: %s\n", safetext.Field(n))
	}
	return w.Flush()
}

// Line is one culprit on one line, its strings escaped for a terminal (and plain text).
func (c Culprit) Line() string {
	var b strings.Builder
	b.WriteString(safetext.Field(c.Namespace) + "/" + safetext.Field(c.Name))
	if c.Container != "" {
		b.WriteString(" container " + safetext.Field(c.Container))
	}
	if c.Seconds > 0 {
		fmt.Fprintf(&b, " %.3fs", c.Seconds)
	}
	if c.Reason != "" {
		b.WriteString(" " + safetext.Field(c.Reason))
	}
	b.WriteString(" trace " + c.TraceID)
	return b.String()
}

// Ordered is the results broken first, then not observed, not judged, met; the file's order
// within each.
func (v Verdict) Ordered() []Result {
	var out []Result
	for _, s := range []Status{StatusBroken, StatusNotObserved, StatusNotJudged, StatusMet} {
		for _, r := range v.Results {
			if r.Status == s {
				out = append(out, r)
			}
		}
	}
	return out
}

// WriteJSON writes the verdict as one JSON object, for machines.
func WriteJSON(w io.Writer, title string, v Verdict) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Gate     string `json:"gate"`
		Outcome  string `json:"verdict"` // pass, fail or no-verdict
		Headline string `json:"headline"`
		Verdict         // its fields inline
	}{title, v.Word(), v.Headline(), v})
}
