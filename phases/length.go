package phases

import (
	"strconv"
	"time"
)

// LengthUncertainty is how far a span's length may be off: the wider of the windows its bounds
// state (a whole-second stamp narrowed by the precise ones around it, see narrow.go) or, for a
// span without bounds (a rollout's), what its readyspan.time.precision.* attributes say.
func LengthUncertainty(s *Span) time.Duration {
	if s.StartBound.Source == 0 {
		return max(precisionWindow(s.Attr(AttrPrecisionStart)), precisionWindow(s.Attr(AttrPrecisionEnd)))
	}
	return max(s.StartBound.Uncertainty(), s.EndBound.Uncertainty())
}

// precisionWindow is the window a readyspan.time.precision.* value leaves.
func precisionWindow(v any) time.Duration {
	if v == "1s" {
		return time.Second
	}
	return 0
}

// LengthDecimals is how many decimals of a second a length whose ends leave a window u can
// state: none for a window of a second or more, one for a tenth or more. ok is false for a
// narrower window: the length is precise, and a view prints it in its own precise format.
func LengthDecimals(u time.Duration) (decimals int, ok bool) {
	switch {
	case u >= time.Second:
		return 0, true
	case u >= 100*time.Millisecond:
		return 1, true
	}
	return 0, false
}

// CoarseLength is a length d whose ends leave a window u, written with the precision the window
// allows: "10s ±1s" (sep "") or "10 s ±1 s" (sep " ") for a window of a second, "1.7s ±0.7s"
// for one of a tenth or more. A whole-second stamp (a creationTimestamp, a condition's time)
// leaves up to a second, so "10.000s" would claim a precision the trace does not have. ok is
// false for a precise length (see LengthDecimals). Every view (the terminal's waterfall and
// Gantt, the web UI) writes lengths by this rule.
func CoarseLength(d, u time.Duration, sep string) (text string, ok bool) {
	dec, ok := LengthDecimals(u)
	if !ok {
		return "", false
	}
	return strconv.FormatFloat(d.Seconds(), 'f', dec, 64) + sep + "s ±" + strconv.FormatFloat(u.Seconds(), 'f', dec, 64) + sep + "s", true
}
