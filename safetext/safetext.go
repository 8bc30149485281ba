// Package safetext makes strings that come from the cluster safe to show on a terminal.
//
// Anyone who may create an Event, a Pod or an annotation in a namespace controls bytes that
// readyspan prints: a reason of "\x1b]0;TITLE\x07" would retitle the operator's terminal, "\r"
// would overwrite the line before it, U+202E would draw the rest of the line backwards (the
// class of CVE-2021-25743, where kubectl printed Event data raw). Field neutralises such a string
// for one cell of a table, showing every control visibly (`\x1b`, `\r`, `\u202e`) rather than
// dropping it, so the operator sees that something was there; Writer is the last guard on a
// stream of lines: it lets only '\n' through among the controls. C0 controls are written `\x1b`,
// the rest (DEL, C1, bidi) `\u202e`: in a JSON line, where encoding/json has already escaped
// every C0 control, what is left for Writer to escape becomes JSON's own escape of the same rune.
package safetext

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// MaxField is how many bytes of one cluster string a terminal line shows: an Event message can
// be up to 1 MiB (and a hostile one has no spaces to wrap on).
const MaxField = 512

// Field returns s for one field of a terminal line: cut to MaxField bytes (on a rune boundary,
// saying how much was left out), with every control character, DEL, C1 control, bidirectional
// override, line or paragraph separator and byte that is not UTF-8 written as an escape.
// Tabs and newlines are escaped too, so one message cannot break a table's row.
func Field(s string) string { return Cut(s, MaxField) }

// Cut is Field with a limit of max bytes of the original string (0: no limit).
func Cut(s string, max int) string {
	more := 0
	if max > 0 && len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		more = len(s) - cut
		s = s[:cut]
	}
	out := escape(s, false)
	if more > 0 {
		out += fmt.Sprintf("…(%d more bytes)", more)
	}
	return out
}

// Safe reports whether s would be shown unchanged by Field (length aside).
func Safe(s string) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || unsafeRune(r) {
			return false
		}
		i += size
	}
	return true
}

// unsafeRune reports whether r changes what a terminal shows beyond drawing a glyph: C0 and C1
// controls and DEL (cursor movement, escape sequences, bells, carriage returns; a UTF-8 terminal
// may act on U+009B as CSI), the bidirectional marks, embeddings, overrides and isolates, and the
// Unicode line and paragraph separators.
func unsafeRune(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	case r == 0x2028, r == 0x2029:
		return true
	}
	return false
}

// escape writes s with its unsafe runes escaped; keepNewline lets '\n' through (Writer's case).
func escape(s string, keepNewline bool) string {
	if Safe(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n' && keepNewline:
			b.WriteByte('\n')
		case !unsafeRune(r):
			b.WriteString(s[i : i+size])
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += size
	}
	return b.String()
}

// Writer passes text to w with every unsafe rune but '\n' escaped as Field escapes it. readyspan
// writes no escape sequences of its own, so on a stream of text lines this changes nothing but
// what a string from the cluster smuggled past its Field. A rune split across two writes is held
// until the next write completes it.
type Writer struct {
	w       io.Writer
	pending []byte // the start of a UTF-8 sequence that the last write ended in
}

// NewWriter returns a Writer over w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write escapes p and writes it; it reports len(p) written when the escaped text was.
func (sw *Writer) Write(p []byte) (int, error) {
	buf := p
	if len(sw.pending) > 0 {
		buf = append(sw.pending, p...)
		sw.pending = nil
	}
	// Hold back an incomplete rune at the end: at most 3 bytes that start a multi-byte sequence.
	for k := 1; k <= 3 && k <= len(buf); k++ {
		c := buf[len(buf)-k]
		if c < utf8.RuneSelf {
			break
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(buf[len(buf)-k:]) {
				sw.pending = append([]byte(nil), buf[len(buf)-k:]...)
				buf = buf[:len(buf)-k]
			}
			break
		}
	}
	if _, err := io.WriteString(sw.w, escape(string(buf), true)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes what is held of an incomplete rune (escaped, since nothing will complete it).
func (sw *Writer) Flush() error {
	if len(sw.pending) == 0 {
		return nil
	}
	_, err := io.WriteString(sw.w, escape(string(sw.pending), true))
	sw.pending = nil
	return err
}

// OneLine is an error's text for one line of a log or a terminal: every run of white space
// (the newlines of an apiserver's or a library's multi-line message among them) one space.
func OneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }
