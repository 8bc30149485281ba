package events

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParsePulledMessage(t *testing.T) {
	tests := []struct {
		name string
		msg  string
		want PulledMessage
		err  bool
	}{
		{
			name: "cold pull from run8",
			msg:  `Successfully pulled image "127.0.0.1:5000/test/big2:1" in 4.778s (4.779s including waiting). Image size: 34704198 bytes.`,
			want: PulledMessage{Image: "127.0.0.1:5000/test/big2:1", Transfer: 4778 * time.Millisecond, Total: 4779 * time.Millisecond, Size: 34704198},
		},
		{
			name: "queued behind another pull",
			msg:  `Successfully pulled image "127.0.0.1:5000/test/big2:1" in 26ms (4.471s including waiting). Image size: 34704198 bytes.`,
			want: PulledMessage{Image: "127.0.0.1:5000/test/big2:1", Transfer: 26 * time.Millisecond, Total: 4471 * time.Millisecond, Size: 34704198},
		},
		{
			name: "minutes",
			msg:  `Successfully pulled image "nginx" in 1m2.5s (1m3s including waiting). Image size: 1 bytes.`,
			want: PulledMessage{Image: "nginx", Transfer: 62500 * time.Millisecond, Total: 63 * time.Second, Size: 1},
		},
		{
			name: "already present, ensure-secret-pulled-images on",
			msg:  `Container image "127.0.0.1:5000/test/busybox:1.35" already present on machine and can be accessed by the pod`,
			want: PulledMessage{Image: "127.0.0.1:5000/test/busybox:1.35", Present: true},
		},
		{
			name: "already present, gate off",
			msg:  `Container image "busybox" already present on machine`,
			want: PulledMessage{Image: "busybox", Present: true},
		},
		{name: "older format", msg: `Successfully pulled image "nginx" in 1.2s`, err: true},
		{name: "negative", msg: `Successfully pulled image "nginx" in -1s (1s including waiting). Image size: 1 bytes.`, err: true},
		{name: "bad size", msg: `Successfully pulled image "nginx" in 1s (1s including waiting). Image size: many bytes.`, err: true},
		{name: "unterminated quote", msg: `Successfully pulled image "nginx in 1s`, err: true},
		{name: "other", msg: `Pulling image "nginx"`, err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParsePulledMessage(tt.msg)
			if tt.err {
				if !errors.Is(err, ErrUnknownMessage) {
					t.Fatalf("want ErrUnknownMessage, got %v (%+v)", err, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseEventName(t *testing.T) {
	tests := []struct {
		name string
		want string
		err  bool
	}{
		{"sleeper-6b9c87548b-swlx4.18ecc609adb8e83a", "2026-11-30T08:41:36.285567034Z", false},
		{"web-7d9f8c6b5-abcde.18c4465277242435", "2026-07-21T10:11:12.345678901Z", false},
		{"no-suffix", "", true},
		{"dot-at-end.", "", true},
		{"uuid-fallback.3f1e2d4c-1111-2222-3333-444455556666", "", true},
		{"tiny.1", "", true},
		{"far-future.7fffffffffffffff", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseEventName(tt.name)
			if tt.err {
				if err == nil {
					t.Fatalf("want error, got %v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s := got.Format(time.RFC3339Nano); s != tt.want {
				t.Fatalf("got %s, want %s", s, tt.want)
			}
		})
	}
}

func FuzzParsePulledMessage(f *testing.F) {
	f.Add(`Successfully pulled image "127.0.0.1:5000/test/big2:1" in 26ms (4.471s including waiting). Image size: 34704198 bytes.`)
	f.Add(`Container image "busybox" already present on machine and can be accessed by the pod`)
	f.Add(`Successfully pulled image "a\"b" in 1s (2s including waiting).`)
	f.Fuzz(func(t *testing.T, msg string) {
		got, err := ParsePulledMessage(msg)
		if err != nil {
			if !errors.Is(err, ErrUnknownMessage) {
				t.Fatalf("error does not wrap ErrUnknownMessage: %v", err)
			}
			return
		}
		if got.Transfer < 0 || got.Total < 0 || got.Size < 0 {
			t.Fatalf("negative values from %q: %+v", msg, got)
		}
		if got.Present && (got.Transfer != 0 || got.Total != 0) {
			t.Fatalf("present image with durations from %q: %+v", msg, got)
		}
	})
}

// FuzzParseHex holds parseHex to strconv.ParseUint(s, 16, 64), which it replaces for Event
// names: the same value for every string ParseUint reads (up to 16 digits), and a refusal for
// everything it refuses (signs, prefixes, underscores, other bytes, too many digits).
func FuzzParseHex(f *testing.F) {
	for _, s := range []string{"18ecc609adb8e83a", "18ECC609ADB8E83A", "0", "", "0x18ecc609adb8e83", "+1", "-1",
		"1_0", "g", "ffffffffffffffff", "1ffffffffffffffff", " 1", "1\x00", "AbCdEf", "FF", "DEADBEEF", "@", "`", "G"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := parseHex(s)
		want, err := strconv.ParseUint(s, 16, 64)
		if len(s) > 16 {
			if ok {
				t.Fatalf("parseHex(%q) = %d: more than 16 digits", s, got)
			}
			return
		}
		if ok != (err == nil) || ok && got != want {
			t.Fatalf("parseHex(%q) = %d, %v; strconv.ParseUint: %d, %v", s, got, ok, want, err)
		}
	})
}

func FuzzParseEventName(f *testing.F) {
	f.Add("sleeper-6b9c87548b-swlx4.18ecc609adb8e83a")
	f.Add("x.ffffffffffffffff")
	f.Add("a.b.c")
	f.Fuzz(func(t *testing.T, name string) {
		got, err := ParseEventName(name)
		if err != nil {
			return
		}
		if got.Before(minEventNameTime) || got.After(maxEventNameTime) {
			t.Fatalf("time out of range for %q: %v", name, got)
		}
	})
}

func TestMessageShape(t *testing.T) {
	for msg, want := range map[string]string{
		`Fetched image "a:1" in 3.2s`:             `Fetched image "…" in #`,
		`Fetched image "b \"x\" 2" in 12ms`:       `Fetched image "…" in #`,
		`Image "c:3" came from the cache, really`: `Image "…" came from the`,
		``:              ``,
		`"unterminated`: `"unterminated`,
	} {
		if got := MessageShape(msg); got != want {
			t.Errorf("MessageShape(%q) = %q, want %q", msg, got, want)
		}
	}
}

// TestParseDisruption: Karpenter's and cluster-autoscaler's Events about a Pod they evicted to
// take its node away, as their code writes them (Karpenter v1.15 terminator/events; the messages
// of a real capture), and what is not one.
func TestParseDisruption(t *testing.T) {
	for _, tc := range []struct {
		reason, msg string
		want        Disruption
		ok          bool
	}{
		{"Evicted", "Evicted pod: Underutilized", Disruption{"karpenter", "Underutilized"}, true},
		{"Evicted", "Evicted pod: Forceful Termination", Disruption{"karpenter", "Forceful Termination"}, true},
		{"ScaleDown", "deleting pod for node scale down", Disruption{"cluster-autoscaler", "ScaleDown"}, true},
		// The kubelet's node-pressure eviction: the node stays.
		{"Evicted", "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi.", Disruption{}, false},
		{"Evicted", "Evicted pod: ", Disruption{}, false},
		{"Evicted", "Evicted pod: " + strings.Repeat("x", 65), Disruption{}, false},
		{"Evicted", "Evicted pod: a\nb", Disruption{}, false},
		{"ScaleDown", "marked the node as toBeDeleted/unschedulable", Disruption{}, false},
	} {
		got, ok := ParseDisruption(tc.reason, tc.msg)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseDisruption(%q, %q) = %+v, %v; want %+v, %v", tc.reason, tc.msg, got, ok, tc.want, tc.ok)
		}
	}
}
