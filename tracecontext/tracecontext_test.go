package tracecontext

import (
	"regexp"
	"strings"
	"testing"
)

const valid = "00-4bf92f3577b34da6a3ce929d0e0e4737-00f067aa0ba902b7-01"

func TestParse(t *testing.T) {
	tests := []struct {
		name, in string
		reason   Reason // "" for accepted
	}{
		{"kep example", valid, ""},
		{"not sampled", "00-4bf92f3577b34da6a3ce929d0e0e4737-00f067aa0ba902b7-00", ""},
		{"future version, 55 bytes", "cc-4bf92f3577b34da6a3ce929d0e0e4737-00f067aa0ba902b7-01", ""},
		{"future version with more fields", "cc-4bf92f3577b34da6a3ce929d0e0e4737-00f067aa0ba902b7-01-what-the-future-holds", ""},
		{"future version, no dash after flags", "cc-4bf92f3577b34da6a3ce929d0e0e4737-00f067aa0ba902b7-01x", ReasonMalformed},
		{"version 00 with more", valid + "-00", ReasonMalformed},
		{"version ff", "ff-4bf92f3577b34da6a3ce929d0e0e4737-00f067aa0ba902b7-01", ReasonVersion},
		{"uppercase trace id", "00-4BF92F3577B34DA6A3CE929D0E0E4737-00f067aa0ba902b7-01", ReasonMalformed},
		{"uppercase version", "0A-4bf92f3577b34da6a3ce929d0e0e4737-00f067aa0ba902b7-01", ReasonMalformed},
		{"zero trace id", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", ReasonZeroID},
		{"zero span id", "00-4bf92f3577b34da6a3ce929d0e0e4737-0000000000000000-01", ReasonZeroID},
		{"short", valid[:54], ReasonMalformed},
		{"empty", "", ReasonMalformed},
		{"spaces", " " + valid[1:], ReasonMalformed},
		{"dash moved", "00-4bf92f3577b34da6a3ce929d0e0e473-700f067aa0ba902b7-01", ReasonMalformed},
		{"non-hex flags", "00-4bf92f3577b34da6a3ce929d0e0e4737-00f067aa0ba902b7-0g", ReasonMalformed},
		{"trailing newline", valid + "\n", ReasonMalformed},
		{"huge", valid + strings.Repeat("-x", 200), ReasonTooLong},
		{"terminal escape", "00-4bf92f3577b34da6a3ce929d0e0e4737-00f067aa0ba902b7-\x1b[", ReasonMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, reason, ok := Parse(tt.in)
			if ok != (tt.reason == "") || reason != tt.reason {
				t.Fatalf("Parse(%q) = ok %v reason %q, want reason %q", tt.in, ok, reason, tt.reason)
			}
			if ok && c.String()[3:] != tt.in[3:55] {
				t.Fatalf("Parse(%q) read %s", tt.in, c)
			}
		})
	}
}

func TestParseReadsTheFields(t *testing.T) {
	c, _, ok := Parse(valid)
	if !ok {
		t.Fatal("refused")
	}
	if c.TraceID[0] != 0x4b || c.TraceID[15] != 0x37 || c.SpanID[0] != 0x00 || c.SpanID[7] != 0xb7 || c.Flags != 1 {
		t.Fatalf("read %+v", c)
	}
}

func TestBound(t *testing.T) {
	long := valid + strings.Repeat("x", 1<<20)
	b := Bound(long)
	if len(b) != MaxLen+1 {
		t.Fatalf("kept %d bytes", len(b))
	}
	if _, r, _ := Parse(b); r != ReasonTooLong {
		t.Fatalf("bounded value refused for %q, want too_long", r)
	}
	if Bound(valid) != valid {
		t.Fatal("a valid value changed")
	}
}

// shape is the spec's grammar of the first 55 bytes (W3C Trace Context level 1, §3.2), written
// apart from Parse as the oracle the fuzz target checks it against.
var shape = regexp.MustCompile(`^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$`)

func FuzzParse(f *testing.F) {
	for _, s := range []string{valid, "cc-4bf92f3577b34da6a3ce929d0e0e4737-00f067aa0ba902b7-01-x",
		"ff-4bf92f3577b34da6a3ce929d0e0e4737-00f067aa0ba902b7-01", "", "00-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, reason, ok := Parse(s)
		want := len(s) >= 55 && len(s) <= MaxLen && shape.MatchString(s[:55])
		if want {
			m := shape.FindStringSubmatch(s[:55])
			switch {
			case m[1] == "ff", m[1] == "00" && len(s) != 55, len(s) > 55 && s[55] != '-':
				want = false
			case m[2] == strings.Repeat("0", 32), m[3] == strings.Repeat("0", 16):
				want = false
			}
		}
		if ok != want {
			t.Fatalf("Parse(%q) ok = %v, the spec says %v", s, ok, want)
		}
		if ok != (reason == "") {
			t.Fatalf("Parse(%q) ok %v with reason %q", s, ok, reason)
		}
		if ok && c.String()[3:] != s[3:55] {
			t.Fatalf("Parse(%q) read %s", s, c)
		}
	})
}
