package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
)

// podRow is one new Pod of a rollout as one view shows it, in ms from the rollout's start.
type podRow struct {
	name            string
	startMs, durMs  float64
	firstCell, last int // the text Gantt's bar: its first and last drawn cell
}

// Every view of the same capture tells the same story: for every rollout and every new Pod in
// it, the JSON lines, the text Gantt (its offset and duration columns and its bar), the HTML
// report's data and explain (from an apiserver serving the capture's lists) give the same start
// and length, and the report's segments tile each row exactly.
func TestEveryViewTellsTheSameStory(t *testing.T) {
	captures, err := filepath.Glob(filepath.Join("..", "..", "tracer", "testdata", "real-node", "run*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range captures {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			continue
		}
		t.Run(filepath.Base(dir), func(t *testing.T) {
			jsonRows, rolloutNames := rolloutRowsFromJSON(t, runOut(t, "replay", "-o", "json", dir))
			if len(jsonRows) == 0 {
				t.Fatal("the replay has no rollout")
			}
			textRows := rolloutRowsFromText(t, runOut(t, "replay", dir))
			htmlRows := rolloutRowsFromReport(t, runOut(t, "replay", "-o", "html", dir))
			for id, rows := range jsonRows {
				for name, want := range rows {
					if name == "" {
						continue // the rollout itself
					}
					got, ok := textRows[id][name]
					if !ok {
						t.Errorf("rollout %s: Pod %s is in the JSON lines but not in the Gantt chart", id, name)
						continue
					}
					if math.Abs(got.startMs-want.startMs) > 0.051 || math.Abs(got.durMs-want.durMs) > textTolerance(want.durMs) {
						t.Errorf("rollout %s, Pod %s: the Gantt chart says +%.1f ms for %.1f ms, the JSON lines +%.1f ms for %.1f ms",
							id, name, got.startMs, got.durMs, want.startMs, want.durMs)
					}
					total := jsonRows[id][""].durMs
					if c := ganttCell(want.startMs, total); got.firstCell != c {
						t.Errorf("rollout %s, Pod %s: the bar begins at cell %d, its start is in cell %d", id, name, got.firstCell, c)
					}
					if c := ganttCell(want.startMs+want.durMs, total); got.last != c {
						t.Errorf("rollout %s, Pod %s: the bar ends at cell %d, its end is in cell %d", id, name, got.last, c)
					}
					h, ok := htmlRows[id][name]
					if !ok {
						t.Errorf("rollout %s: Pod %s is not in the report", id, name)
						continue
					}
					if math.Abs(h.startMs-want.startMs) > 0.001 || math.Abs(h.durMs-want.durMs) > 0.001 {
						t.Errorf("rollout %s, Pod %s: the report says +%.3f ms for %.3f ms, the JSON lines +%.3f ms for %.3f ms",
							id, name, h.startMs, h.durMs, want.startMs, want.durMs)
					}
				}
			}
			// explain rebuilds each rollout from the same objects through the apiserver.
			srv := serveCapture(t, dir, filepath.Base(dir))
			kubeconfig := writeKubeconfig(t, srv.URL)
			for id, workload := range rolloutNames {
				out := runOut(t, "explain", "deployment/"+workload, "-o", "json", "-n", filepath.Base(dir), "--kubeconfig", kubeconfig)
				explained, _ := rolloutRowsFromJSON(t, out)
				for name, want := range jsonRows[id] {
					if name == "" {
						continue
					}
					got, ok := explained[id][name]
					if !ok {
						t.Errorf("explain deployment/%s: no row %q (rollouts %v)", workload, name, keys(explained))
						continue
					}
					if got.startMs != want.startMs || got.durMs != want.durMs {
						t.Errorf("explain deployment/%s, %q: +%.3f ms for %.3f ms; replay: +%.3f ms for %.3f ms",
							workload, name, got.startMs, got.durMs, want.startMs, want.durMs)
					}
				}
			}
		})
	}
}

func runOut(t *testing.T, args ...string) []byte {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, stderr.String())
	}
	return stdout.Bytes()
}

// textTolerance is how far the Gantt's duration column may be from the exact length: it rounds
// to 0.1 ms under a second and to 1 ms above.
func textTolerance(ms float64) float64 {
	if ms >= 1000 {
		return 0.51
	}
	return 0.051
}

// ganttCell is the text Gantt's column for an offset (exporters/terminal's cell).
func ganttCell(offsetMs, totalMs float64) int {
	if totalMs <= 0 {
		return 0
	}
	c := int(offsetMs / totalMs * 60)
	return min(max(c, 0), 59)
}

// rolloutRowsFromJSON reads the rollouts in JSON lines: by trace ID, each new Pod's row by name
// (the root under ""), and each rollout's workload name.
func rolloutRowsFromJSON(t *testing.T, out []byte) (map[string]map[string]podRow, map[string]string) {
	t.Helper()
	type line struct {
		TraceID          string `json:"trace_id"`
		Name, Start, End string
		Attributes       map[string]any
	}
	roots := map[string]time.Time{}
	var lines []line
	names := map[string]string{}
	for _, l := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		var s line
		if err := json.Unmarshal(l, &s); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		lines = append(lines, s)
		if s.Name == rollout.RootSpanName {
			roots[s.TraceID] = parseTime(t, s.Start)
			names[s.TraceID], _ = s.Attributes["k8s.deployment.name"].(string)
		}
	}
	rows := map[string]map[string]podRow{}
	for _, s := range lines {
		t0, ok := roots[s.TraceID]
		if !ok || (s.Name != rollout.PodSpanName && s.Name != rollout.RootSpanName) {
			continue
		}
		start, end := parseTime(t, s.Start), parseTime(t, s.End)
		name, _ := s.Attributes[phases.AttrPodName].(string)
		if rows[s.TraceID] == nil {
			rows[s.TraceID] = map[string]podRow{}
		}
		rows[s.TraceID][name] = podRow{name: name, startMs: ms(start.Sub(t0)), durMs: ms(end.Sub(start))}
	}
	return rows, names
}

var (
	ganttHeader = regexp.MustCompile(`^\S+ \S+  rollout .*  trace ([0-9a-f]{32})$`)
	ganttPodRow = regexp.MustCompile(`^  [* ]   \+ (\S+)\s+(\S+)\s+(\S+)\s+\|(.*)\|( .*)?$`)
)

// rolloutRowsFromText reads the text Gantt charts' new-Pod rows.
func rolloutRowsFromText(t *testing.T, out []byte) map[string]map[string]podRow {
	t.Helper()
	rows := map[string]map[string]podRow{}
	id := ""
	for _, l := range strings.Split(string(out), "\n") {
		if m := ganttHeader.FindStringSubmatch(l); m != nil {
			id = m[1]
			rows[id] = map[string]podRow{}
			continue
		}
		m := ganttPodRow.FindStringSubmatch(l)
		if m == nil || id == "" {
			continue
		}
		bar := []rune(m[4])
		first, last := -1, -1
		for i, r := range bar {
			if r != ' ' {
				if first < 0 {
					first = i
				}
				last = i
			}
		}
		rows[id][m[1]] = podRow{name: m[1], startMs: parseMs(t, m[2]), durMs: parseMs(t, m[3]), firstCell: first, last: last}
	}
	return rows
}

// parseMs reads the terminal's "436.2ms" and "9.564s".
func parseMs(t *testing.T, s string) float64 {
	t.Helper()
	if v, ok := strings.CutSuffix(s, "ms"); ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("duration %q: %v", s, err)
	}
	return ms(d)
}

var reportData = regexp.MustCompile(`(?s)<script type="application/json" id="rs-data">(.*?)</script>`)

// rolloutRowsFromReport reads the report's data block: each Gantt's Pod rows, after checking
// that each row's segments tile it.
func rolloutRowsFromReport(t *testing.T, page []byte) map[string]map[string]podRow {
	t.Helper()
	m := reportData.FindSubmatch(page)
	if m == nil {
		t.Fatal("the report has no data block")
	}
	var d struct {
		Report struct {
			Gantts map[string]struct {
				TraceID string // keyed by the rollout's ID, its root span's: the JSON lines name its trace
				Rows    []struct {
					Type, Label    string
					StartMs, EndMs float64
					Segments       []struct{ StartMs, EndMs float64 }
				}
			}
		}
	}
	if err := json.Unmarshal(m[1], &d); err != nil {
		t.Fatal(err)
	}
	rows := map[string]map[string]podRow{}
	for _, g := range d.Report.Gantts {
		id := g.TraceID
		rows[id] = map[string]podRow{}
		for _, r := range g.Rows {
			if r.Type != "pod" {
				continue
			}
			rows[id][r.Label] = podRow{name: r.Label, startMs: r.StartMs, durMs: r.EndMs - r.StartMs}
			at := r.StartMs
			for _, sg := range r.Segments {
				if math.Abs(sg.StartMs-at) > 0.001 || sg.EndMs < sg.StartMs {
					t.Errorf("rollout %s, Pod %s: a segment at %.3f–%.3f ms where the one before ended at %.3f", id, r.Label, sg.StartMs, sg.EndMs, at)
				}
				at = sg.EndMs
			}
			if math.Abs(at-r.EndMs) > 0.001 {
				t.Errorf("rollout %s, Pod %s: the segments end at %.3f ms, the row at %.3f", id, r.Label, at, r.EndMs)
			}
		}
	}
	return rows
}

func parseTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// A length between whole-second stamps is printed with its window, not as milliseconds; one
// between precise stamps keeps its milliseconds.
func TestLengthsSayTheirPrecision(t *testing.T) {
	out := string(runOut(t, "replay", filepath.Join("..", "..", "tracer", "testdata", "real-node", "run8-slow-pull-watch")))
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^run8-slow-pull-watch/sleeper-6b9c87548b-swlx4  trace \S+  ready  10s ±1s$`),
		regexp.MustCompile(`(?m)^        container\.image_pull +2\.286s +4\.779s \|`),
		regexp.MustCompile(`(?m)^deployment run8-slow-pull-watch/sleeper  rollout create \(generation 1, revision 1\)  complete  10s ±1s  trace`),
	} {
		if !want.MatchString(out) {
			t.Errorf("no line matches %s in:\n%s", want, out)
		}
	}
	if regexp.MustCompile(`(?m)  (ready|complete)  10\.000s`).MatchString(out) {
		t.Errorf("a whole-second length is printed to the millisecond:\n%s", out)
	}
}

// A failing Pod's reason is in every view without a click: the waterfall's header, the Gantt
// row, the rollout's sentence and the report's list. The capture's own Events are the evidence
// of what failed: the kubelet's "Back-off restarting failed container" for crasher and "Back-off
// pulling image" for badimage.
func TestFailuresAreNamedInEveryView(t *testing.T) {
	dir := filepath.Join("..", "..", "tracer", "testdata", "real-node", "run4-failures")
	events, err := os.ReadFile(filepath.Join(dir, "events.core.v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, evidence := range []string{`"message": "Back-off restarting failed container sleep in pod crasher-79699b899c-nzpp2`, `"message": "Back-off pulling image`} {
		if !strings.Contains(string(events), evidence) {
			t.Fatalf("the capture has no event %s", evidence)
		}
	}
	text := string(runOut(t, "replay", dir))
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^run4-failures/crasher-79699b899c-nzpp2  trace \S+  in-progress  .*\n  failing: CrashLoopBackOff$`),
		regexp.MustCompile(`(?m)^run4-failures/badimage-79777f469f-xq4tf  trace \S+  in-progress  .*\n  failing: ImagePullBackOff$`),
		// The crash loop's time is failing, not a wait for readiness (the largest share first).
		regexp.MustCompile(`(?m)^  .*, in-progress, 1 Pod failing \(CrashLoopBackOff\); [^;]*; \d+% failing containers`),
		regexp.MustCompile(`(?m)^  \*   \+ crasher-79699b899c-nzpp2 .*\|[^|]*f+\| CrashLoopBackOff$`),
	} {
		if !want.MatchString(text) {
			t.Errorf("no match for %s in:\n%s", want, text)
		}
	}
	page := runOut(t, "replay", "-o", "html", dir)
	m := reportData.FindSubmatch(page)
	if m == nil {
		t.Fatal("the report has no data block")
	}
	var d struct {
		Report struct {
			Pods []struct{ Name, Error string }
		}
	}
	if err := json.Unmarshal(m[1], &d); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, p := range d.Report.Pods {
		got[p.Name] = p.Error
	}
	if got["crasher-79699b899c-nzpp2"] != "CrashLoopBackOff" || got["badimage-79777f469f-xq4tf"] != "ImagePullBackOff" {
		t.Errorf("the report's list gives the errors %v", got)
	}
}

// A blocked rollout says so, with the same class, count and reason, in every view of the real
// quota capture: the JSON lines (OTLP's attributes), the text Gantt, and the HTML report's data
// (the web UI's JSON).
func TestBlockedInEveryView(t *testing.T) {
	dir := filepath.Join("..", "..", "tracer", "testdata", "real-node", "rejections-quota")
	const reason = `quota: pods \"web-7d6c4d58c8-8wskn\" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=1, limited: pods=1`
	js := string(runOut(t, "replay", "-o", "json", dir))
	for _, want := range []string{
		`"readyspan.rollout.outcome":"blocked"`, `"readyspan.rollout.reason":"` + reason + `"`,
		`"name":"rollout.blocked"`, `"readyspan.rollout.rejection.class":"quota","readyspan.rollout.rejection.count":12`,
		`"readyspan.rollout.rejection.count":13`, `"readyspan.link":"resumes_blocked"`,
	} {
		if !strings.Contains(js, want) {
			t.Errorf("JSON lines lack %s", want)
		}
	}
	text := string(runOut(t, "replay", dir))
	for _, want := range []string{
		"rollout create (generation 1, revision 1)  blocked", ", blocked (" + strings.ReplaceAll(reason, `\"`, `"`) + ")",
		"⊘ quota ×12", "⊘ quota ×13", "blocked 65.3 s by quota",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the text Gantt lacks %q", want)
		}
	}
	html := string(runOut(t, "replay", "-o", "html", dir))
	for _, want := range []string{`"outcome":"blocked"`, `"reason":"` + reason + `"`, `"type":"blocked","label":"quota ×12"`, `"cat":"blocked"`} {
		if !strings.Contains(html, want) {
			t.Errorf("the HTML report's data lacks %s", want)
		}
	}
}
