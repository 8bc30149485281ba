package web

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/readyspan/readyspan/internal/captures"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/rollout/tracker"
	"github.com/readyspan/readyspan/tracer"
)

// realCaptures are the real captures the tracer's tests replay (a real control plane and kubelet).
func realCaptures(t *testing.T) []string {
	t.Helper()
	matches, _ := filepath.Glob(captures.Path("run*"))
	var dirs []string
	for _, m := range matches {
		if fi, err := os.Stat(m); err == nil && fi.IsDir() {
			dirs = append(dirs, m)
		}
	}
	if len(dirs) == 0 {
		t.Fatal("no captures in tracer/testdata/real-node")
	}
	return dirs
}

// replay rebuilds a capture's Pod and rollout traces as `readyspan replay` does.
func replay(t testing.TB, dir string) ([]*phases.Trace, []*rollout.Trace) {
	t.Helper()
	deltas, err := tracer.Kinds.LoadRecording(dir)
	if err != nil {
		t.Fatal(err)
	}
	var pods []*phases.Trace
	var rollouts []*rollout.Trace
	c := tracer.New(tracer.Config{Backfill: true, Rollouts: tracker.SinkFunc(func(r *rollout.Trace) { rollouts = append(rollouts, r) })},
		tracer.SinkFunc(func(tr *phases.Trace) { pods = append(pods, tr) }), nil, nil)
	tracer.Replay(c, deltas)
	return pods, rollouts
}

func get(t *testing.T, srv *httptest.Server, path string, wantStatus int, into any) {
	t.Helper()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != wantStatus {
		t.Fatalf("GET %s: %d, want %d: %s", path, resp.StatusCode, wantStatus, body)
	}
	if into != nil {
		if err := json.Unmarshal(body, into); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
	}
}

// TestAPIRealCaptures serves each capture's traces and checks the API against the traces
// themselves: every rollout listed, each with one Gantt row per step and per Pod (new and old),
// every new Pod's row coloured within its interval, and every Pod's waterfall span for span.
func TestAPIRealCaptures(t *testing.T) {
	for _, dir := range realCaptures(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			pods, rollouts := replay(t, dir)
			if len(rollouts) == 0 || len(pods) == 0 {
				t.Fatalf("%d rollouts, %d Pods: the test would prove nothing", len(rollouts), len(pods))
			}
			ring := NewRing(RingConfig{})
			for _, p := range pods {
				ring.AddPod(p)
			}
			for _, r := range rollouts {
				ring.AddRollout(r)
			}
			srv := httptest.NewServer(NewServer(ring, ServerConfig{TraceUI: "http://jaeger.example/trace/{trace_id}"}))
			defer srv.Close()

			var list []RolloutSummary
			get(t, srv, "/api/v1/rollouts", http.StatusOK, &list)
			if len(list) != len(rollouts) {
				t.Fatalf("%d rollouts listed, %d rebuilt", len(list), len(rollouts))
			}
			for _, r := range rollouts {
				var v RolloutView
				get(t, srv, "/api/v1/rollouts/"+r.Root().SpanID.String(), http.StatusOK, &v)
				if v.Sentence != r.Summary.Sentence || v.Workload != r.Rollout.Workload.Name {
					t.Errorf("rollout %s: %q %q, want %q %q", r.TraceID, v.Workload, v.Sentence, r.Rollout.Workload.Name, r.Summary.Sentence)
				}
				rows := map[string]int{}
				for _, row := range v.Rows {
					rows[row.Type]++
					if row.Type != "pod" {
						continue
					}
					if len(row.Segments) == 0 {
						t.Errorf("Pod row %s has no segments", row.Label)
					}
					for _, s := range row.Segments {
						if s.StartMs < row.StartMs-0.001 || s.EndMs > row.EndMs+0.001 || s.EndMs < s.StartMs {
							t.Errorf("Pod row %s [%.3f, %.3f]: segment %+v outside it", row.Label, row.StartMs, row.EndMs, s)
						}
					}
				}
				if rows["step"] != len(r.Rollout.Steps) || rows["pod"] != len(r.Rollout.NewPods) || rows["old"] != len(r.Rollout.OldPods) {
					t.Errorf("rollout %s: rows %v, want %d steps, %d new and %d old Pods", v.Workload, rows,
						len(r.Rollout.Steps), len(r.Rollout.NewPods), len(r.Rollout.OldPods))
				}
				filtered := ring.Rollouts(Filter{Namespace: v.Namespace, Workload: v.Workload})
				var byFilter []RolloutSummary
				get(t, srv, "/api/v1/rollouts?namespace="+v.Namespace+"&workload="+v.Workload, http.StatusOK, &byFilter)
				if len(byFilter) != len(filtered) || len(byFilter) == 0 {
					t.Errorf("filtered list: %d, want %d", len(byFilter), len(filtered))
				}
			}
			for _, p := range pods {
				var v PodView
				get(t, srv, "/api/v1/pods/"+p.Pod.UID, http.StatusOK, &v)
				if len(v.Spans) != len(p.Spans) || v.Name != p.Pod.Name || v.Outcome != string(p.Summary.Outcome) {
					t.Errorf("Pod %s: %d spans, %s, %s; want %d, %s, %s", p.Pod.Name, len(v.Spans), v.Name, v.Outcome, len(p.Spans), p.Pod.Name, p.Summary.Outcome)
				}
				for i, s := range v.Spans {
					if s.SourceStart == "" || s.PrecisionStart == "" {
						t.Errorf("Pod %s span %s: no time source or precision", p.Pod.Name, s.Name)
					}
					if len(s.Events) != len(p.Spans[i].Events()) {
						t.Errorf("Pod %s span %s: %d events, want %d", p.Pod.Name, s.Name, len(s.Events), len(p.Spans[i].Events()))
					}
					// Every other attribute is listed, the bounds' uncertainty and observed too.
					for _, a := range p.Spans[i].AllAttrs() {
						if _, ok := s.Attrs[a.Key]; !ok && !spanAttrsShown[a.Key] {
							t.Errorf("Pod %s span %s: attribute %s not shown", p.Pod.Name, s.Name, a.Key)
						}
					}
				}
			}
			get(t, srv, "/api/v1/pods/no-such-uid", http.StatusNotFound, nil)
			get(t, srv, "/api/v1/rollouts/0123", http.StatusNotFound, nil)
			get(t, srv, "/nothing-here", http.StatusNotFound, nil)

			resp, err := http.Get(srv.URL + "/")
			if err != nil {
				t.Fatal(err)
			}
			page, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
				t.Errorf("/ is %s", ct)
			}
			if !bytes.Contains(page, []byte(`"api":"api/v1/"`)) || !bytes.Contains(page, []byte("{trace_id}")) {
				t.Errorf("the page's data block does not name the API and the trace UI")
			}
		})
	}
}

// externalRef finds what would make a browser reach out: a URL with a scheme or a
// protocol-relative one in an attribute, CSS url() and @import, and script imports. A url() of a
// fragment alone (url(#hatch-failing), a pattern in the page's own SVG) names the page itself.
var externalRef = regexp.MustCompile(`(?i)(https?:|wss?:|ftp:|(src|href|action|poster)\s*=\s*["']?//|url\(\s*["']?[^#"'\s]|@import|import\()`)

// TestReportSelfContained writes the report of each capture and checks it loads nothing:
// outside its data block (inert JSON) no URL at all, and a Content-Security-Policy that forbids
// every fetch; and that it holds every rollout and Pod.
func TestReportSelfContained(t *testing.T) {
	for _, dir := range realCaptures(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			pods, rollouts := replay(t, dir)
			var b bytes.Buffer
			if err := WriteReport(&b, "replay "+filepath.Base(dir), "", pods, rollouts, nil); err != nil {
				t.Fatal(err)
			}
			page := b.String()
			start := strings.Index(page, `<script type="application/json" id="rs-data">`)
			end := strings.Index(page[max(start, 0):], "</script>")
			if start < 0 || end < 0 {
				t.Fatal("no data block")
			}
			data := page[start+len(`<script type="application/json" id="rs-data">`) : start+end]
			rest := page[:start] + page[start+end:]
			if m := externalRef.FindAllString(rest, -1); len(m) > 0 {
				t.Errorf("the report refers outside itself: %q", m)
			}
			if !strings.Contains(rest, `http-equiv="Content-Security-Policy" content="default-src 'none';`) {
				t.Error("the report has no Content-Security-Policy forbidding network access")
			}
			var d pageData
			if err := json.Unmarshal([]byte(data), &d); err != nil || d.Report == nil {
				t.Fatalf("data block: %v", err)
			}
			if d.API != "" || d.TraceUI != "" {
				t.Errorf("the report names an API (%q) or a trace UI (%q)", d.API, d.TraceUI)
			}
			if len(d.Report.Gantts) != len(rollouts) || len(d.Report.Views) != len(pods) {
				t.Errorf("report: %d Gantts, %d waterfalls; want %d, %d", len(d.Report.Gantts), len(d.Report.Views), len(rollouts), len(pods))
			}
			for _, p := range pods {
				if d.Report.Views[p.Pod.UID] == nil {
					t.Errorf("no waterfall of %s", p.Pod.Name)
				}
			}
			t.Logf("%d bytes for %d rollouts and %d Pods", b.Len(), len(rollouts), len(pods))
		})
	}
}
