package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/readyspan/readyspan/internal/captures"
)

// TestCompareCommand runs `readyspan compare` on two real captures: its JSON names the image
// cache first, and the page it writes is the same comparison.
func TestCompareCommand(t *testing.T) {
	report := filepath.Join(t.TempDir(), "compare.html")
	var stdout, stderr bytes.Buffer
	args := []string{"compare", captures.Path("run3-always-pull"), captures.Path("run2-ifnotpresent"), "-o", "json", "--report", report, "--resamples", "500"}
	if err := run(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("%v: %s", err, stderr.String())
	}
	var res struct {
		Schema      string `json:"schema"`
		Method      struct{ Resamples int }
		Attribution []struct {
			Span       string
			Dimensions []struct{ Dimension string }
		}
		Sentence string
	}
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	last := res.Attribution[len(res.Attribution)-1]
	if res.Schema != "readyspan.compare/v1" || res.Method.Resamples != 500 || last.Span != "container.image_pull" || last.Dimensions[0].Dimension != "image_cache" {
		t.Fatalf("%s", stdout.String())
	}
	page, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), "container.image_pull") || !strings.HasPrefix(string(page), "<!DOCTYPE html>") {
		t.Errorf("the page:\n%.400s", page)
	}
}

// TestCompareCommandRefuses: each wrong use is one clear error.
func TestCompareCommandRefuses(t *testing.T) {
	dir := captures.Path("run2-ifnotpresent")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{dir}, "two arguments"},
		{[]string{dir, "now-1h..now"}, "give the daemon's --url"},
		{[]string{dir, dir, "-o", "yaml"}, "unknown output"},
		{[]string{dir, dir, "--level", "1.5"}, "--level"},
		{[]string{dir, dir, "--token-file", "x"}, "give its --url"},
		{[]string{dir, "now-1h..now", "--url", "ftp://x"}, "--url"},
		{[]string{dir, filepath.Join(dir, "missing")}, "no such file"},
		{[]string{dir, filepath.Join(dir, "pods.json")}, "neither a span line"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), append([]string{"compare"}, tc.args...), &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
}
