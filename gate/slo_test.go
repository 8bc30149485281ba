package gate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestExampleLoads holds the documented example (deploy/gate/slo.yaml, docs/gate.md) valid.
func TestExampleLoads(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "deploy", "gate", "slo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	slo, err := Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := slo.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := time.Duration(*slo.Spans["container.readiness"].Max); got != 15*time.Second {
		t.Errorf("container.readiness max %s, want 15s", got)
	}
	if slo.Failures["Unschedulable"] != 1 || slo.Rotation == nil || !slo.Rotation.notObservedPasses() {
		t.Errorf("failures %v, rotation %+v: not as the example writes them", slo.Failures, slo.Rotation)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		want       []string // substrings of the error, all of them
	}{
		{"unknown top-level field", "version: 1\nspans:\n  pod.startup: {max: 1s}\nfailure:\n  other: 1\n",
			[]string{"line 4", "field failure not found"}},
		{"unknown threshold", "version: 1\nspans:\n  pod.startup:\n    p999: 1s\n", []string{"line 4", "field p999 not found"}},
		{"unknown rotation field", "version: 1\nrotation:\n  max_pod: 1\n", []string{"line 3", "field max_pod not found"}},
		{"bare number", "version: 1\nspans:\n  pod.startup: {max: 5}\n", []string{"line 3", "with its unit", `"5"`}},
		{"bad duration", "version: 1\nspans:\n  pod.startup: {max: 5 seconds}\n", []string{"line 3", "5 seconds"}},
		{"negative duration", "version: 1\nspans:\n  pod.startup: {max: -1s}\n", []string{"line 3", "negative"}},
		{"two documents", "version: 1\nspans: {pod.startup: {max: 1s}}\n---\nversion: 1\n", []string{"more than one YAML document"}},
		{"empty", "", []string{"empty"}},
		{"not YAML", "version: [1\n", []string{"line"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.file))
			if err == nil {
				t.Fatal("parsed")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestValidateErrors(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		want       []string
	}{
		{"unknown span names the closest", "version: 1\nspans:\n  pod.startup: {max: 1m}\n  container.image_pul: {p99: 1s}\n",
			[]string{"line 4", `unknown span name "container.image_pul"`, `did you mean "container.image_pull"?`}},
		{"a phase misspelt", "version: 1\nspans:\n  schedulng: {p99: 1s}\n", []string{"line 3", `did you mean "scheduling"?`}},
		{"nothing close", "version: 1\nspans:\n  frobnicate.everything.now: {p99: 1s}\n", []string{"line 3", `unknown span name "frobnicate.everything.now"`}},
		{"no version", "spans:\n  pod.startup: {max: 1s}\n", []string{"version is missing"}},
		{"wrong version", "version: 2\nspans:\n  pod.startup: {max: 1s}\n", []string{"line 1", "version 2"}},
		{"no threshold", "version: 1\nspans:\n  pod.startup: {min_pods: 3}\n", []string{"line 3", "no threshold"}},
		{"percentiles contradict", "version: 1\nspans:\n  pod.startup: {p50: 10s, p99: 5s}\n", []string{"line 3", "p99 5s is below p50 10s"}},
		{"max below p90", "version: 1\nspans:\n  pod.startup: {p90: 10s, max: 5s}\n", []string{"max 5s is below p90 10s"}},
		{"rollout percentiles", "version: 1\nspans:\n  workload.rollout: {p99: 5m}\n", []string{"max only"}},
		{"unknown reason", "version: 1\nfailures:\n  CrashLoopBackof: 1\n", []string{"line 3", `did you mean "CrashLoopBackOff"?`}},
		{"negative count", "version: 1\nfailures:\n  other: -1\n", []string{"line 3", "negative"}},
		{"rotation without bound", "version: 1\nrotation:\n  when_not_observed: pass\n", []string{"line 2", "max_pods, max_after_stop"}},
		{"rotation fallback", "version: 1\nrotation:\n  max_pods: 0\n  when_not_observed: maybe\n", []string{`"maybe"`, "fail or pass"}},
		{"no objectives", "version: 1\n", []string{"no objectives"}},
		{"every problem at once", "version: 1\nspans:\n  a.b: {max: 1s}\n  c.d: {max: 1s}\n", []string{"line 3", "line 4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse(strings.NewReader(tc.file))
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			err = f.Validate()
			if err == nil {
				t.Fatal("valid")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestHostileFile: a huge or hostile key is refused, quoted back cut, with no near miss
// computed over megabytes.
func TestHostileFile(t *testing.T) {
	long := strings.Repeat("x", 1000) // YAML caps an implicit key at 1,024 characters
	f, err := Parse(strings.NewReader("version: 1\nspans:\n  \"" + long + "\\x1b]0;pwn\\x07\": {max: 1s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	err = f.Validate()
	if err == nil || len(err.Error()) > 400 || strings.ContainsRune(err.Error(), 0x1b) {
		t.Fatalf("error %d bytes, want a short one with no raw escape: %.200q", len(err.Error()), err)
	}
	if _, err := Parse(strings.NewReader("version: 1\n#" + strings.Repeat("y", MaxFileBytes))); err == nil {
		t.Fatal("a file over MaxFileBytes parsed")
	}
}
