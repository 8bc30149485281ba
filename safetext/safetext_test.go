package safetext

import (
	"bytes"
	"strings"
	"testing"
)

func TestField(t *testing.T) {
	tests := []struct{ in, want string }{
		{"web-7d4b9c-x2x", "web-7d4b9c-x2x"},
		{"pull: 1.2 s — ok ✓", "pull: 1.2 s — ok ✓"},
		{"Evil\x1b[31mREASON", `Evil\x1b[31mREASON`},
		{"\x1b]0;TITLE\x07\x1b[2J\x1b[H…\rOVER", `\x1b]0;TITLE\x07\x1b[2J\x1b[H…\rOVER`},
		{"a\tb\nc", `a\tb\nc`},
		{"del\x7f", `del\u007f`},
		{"csi\u009b31m nel\u0085", `csi\u009b31m nel\u0085`},
		{"rlo\u202eevil\u2066iso\u2069 lrm\u200e alm\u061c", `rlo\u202eevil\u2066iso\u2069 lrm\u200e alm\u061c`},
		{"ls\u2028ps\u2029", `ls\u2028ps\u2029`},
		{"bad\xff\x9butf8", `bad\xff\x9butf8`},
	}
	for _, tt := range tests {
		if got := Field(tt.in); got != tt.want {
			t.Errorf("Field(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if Safe(tt.in) != (tt.in == tt.want) {
			t.Errorf("Safe(%q) = %v", tt.in, Safe(tt.in))
		}
	}
}

// A long string is cut on a rune boundary and says how much it left out.
func TestCut(t *testing.T) {
	if got := Cut(strings.Repeat("é", 10), 5); got != "éé…(16 more bytes)" {
		t.Errorf("Cut = %q", got)
	}
	if got := Field(strings.Repeat("x", 1<<20)); len(got) > MaxField+40 {
		t.Errorf("Field of 1 MiB is %d bytes", len(got))
	}
	if got := Cut("short", 0); got != "short" {
		t.Errorf("Cut(…, 0) = %q", got)
	}
}

// The Writer lets newlines through and escapes the rest, also when a write splits a rune or an
// escape sequence in two.
func TestWriter(t *testing.T) {
	in := "line one ✓\n\x1b[2Jtwo\u202e\r\nthree\xff\n"
	want := "line one ✓\n\\x1b[2Jtwo\\u202e\\r\nthree\\xff\n"
	for _, chunk := range []int{1, 2, 3, 7, len(in)} {
		var out bytes.Buffer
		w := NewWriter(&out)
		for i := 0; i < len(in); i += chunk {
			if _, err := w.Write([]byte(in[i:min(i+chunk, len(in))])); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if out.String() != want {
			t.Errorf("chunks of %d: %q, want %q", chunk, out.String(), want)
		}
	}
	// A rune cut off at the end is written, escaped, by Flush.
	var out bytes.Buffer
	w := NewWriter(&out)
	w.Write([]byte("end\xe2\x80"))
	if out.String() != "end" {
		t.Errorf("before Flush: %q", out.String())
	}
	w.Flush()
	if out.String() != `end\xe2\x80` {
		t.Errorf("after Flush: %q", out.String())
	}
}
