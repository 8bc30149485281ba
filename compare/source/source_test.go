package source

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/readyspan/readyspan/compare"
	"github.com/readyspan/readyspan/exporters/terminal"
	"github.com/readyspan/readyspan/internal/captures"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/pipeline"
	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/web"
	"github.com/readyspan/readyspan/web/apiclient"
)

// replayed is the traces `readyspan replay` builds of a capture.
func replayed(t *testing.T, name string) []*phases.Trace {
	t.Helper()
	deltas, err := tracer.Kinds.LoadRecording(captures.Path(name))
	if err != nil {
		t.Fatal(err)
	}
	var traces []*phases.Trace
	pipeline.Replay(pipeline.Options{}, deltas, pipeline.Sinks{Pods: tracer.SinkFunc(func(tr *phases.Trace) { traces = append(traces, tr) })})
	return traces
}

// samePods holds two reductions of the same traces equal, lengths to the microsecond (JSON
// states milliseconds with a fraction) and image sizes to the UI's rounding (tol).
func samePods(t *testing.T, got, want compare.Set, tol float64) {
	t.Helper()
	if len(got.Pods) != len(want.Pods) || len(got.Pods) == 0 {
		t.Fatalf("%d Pods, want %d", len(got.Pods), len(want.Pods))
	}
	near := func(a, b time.Duration) bool { return (a - b).Abs() <= time.Microsecond }
	for i, g := range got.Pods {
		w := want.Pods[i]
		if g.Name != w.Name || g.Dims != w.Dims || !near(g.Startup, w.Startup) || len(g.Spans) != len(w.Spans) {
			t.Fatalf("Pod %d: %+v\nwant %+v", i, g, w)
		}
		for n, d := range w.Spans {
			if !near(g.Spans[n], d) || !near(g.Uncertain[n], w.Uncertain[n]) {
				t.Errorf("%s %s: %v ±%v, want %v ±%v", g.Name, n, g.Spans[n], g.Uncertain[n], d, w.Uncertain[n])
			}
		}
		if math.Abs(float64(g.ImageSize-w.ImageSize)) > tol*float64(w.ImageSize) {
			t.Errorf("%s: image size %d, want %d", g.Name, g.ImageSize, w.ImageSize)
		}
	}
	if fmt.Sprint(got.NotReady) != fmt.Sprint(want.NotReady) {
		t.Errorf("not ready %v, want %v", got.NotReady, want.NotReady)
	}
}

// TestJSONLinesAsRecording: the spans `replay -o json` writes reduce to the Pods the recording
// does, rollouts' lines among them skipped.
func TestJSONLinesAsRecording(t *testing.T) {
	for _, name := range []string{"run3-always-pull", "run8-slow-pull-watch", "kinds-rollout"} {
		var b bytes.Buffer
		for _, tr := range replayed(t, name) {
			if err := terminal.JSONLines(&b, tr); err != nil {
				t.Fatal(err)
			}
		}
		b.WriteString(`{"trace_id":"ffff","span_id":"01","name":"rollout","start":"2026-01-01T00:00:00Z","end":"2026-01-01T00:00:01Z"}` + "\n")
		got, err := File(&b, name)
		if err != nil {
			t.Fatal(err)
		}
		samePods(t, got, load(t, captures.Path(name)), 0)
	}
}

// TestUIViewsAsRecording: the UI API's views of the same traces, saved to a file or read live
// from a daemon's ring in a window, reduce to the same Pods (the view rounds image sizes to a
// tenth of a MB); the window leaves out the Pods that started outside it; a token is sent.
func TestUIViewsAsRecording(t *testing.T) {
	name := "run8-slow-pull-watch"
	traces := replayed(t, name)
	ring := web.NewRing(web.RingConfig{})
	var file bytes.Buffer
	file.WriteString("[")
	for i, tr := range traces {
		ring.AddPod(tr)
		if i > 0 {
			file.WriteString(",")
		}
		file.Write(ring.Pod(tr.Pod.UID))
	}
	file.WriteString("]")
	want := load(t, captures.Path(name))
	got, err := File(&file, name)
	if err != nil {
		t.Fatal(err)
	}
	samePods(t, got, want, 0.001)

	var tokens []string
	ui := web.NewServer(ring, web.ServerConfig{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tokens = append(tokens, r.Header.Get("Authorization"))
		ui.ServeHTTP(w, r)
	}))
	defer srv.Close()
	base, err := apiclient.CheckBase(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	live := &Live{API: &apiclient.Client{Base: base, Token: "t0k"}}
	var first, last time.Time
	for i, tr := range traces {
		if s := tr.Root().Start; i == 0 || s.Before(first) {
			first = s
		}
		if s := tr.Root().Start; s.After(last) {
			last = s
		}
	}
	all, err := live.Window(context.Background(), name, first, last.Add(time.Nanosecond))
	if err != nil {
		t.Fatal(err)
	}
	samePods(t, all, want, 0.001)
	if tokens[0] != "Bearer t0k" {
		t.Errorf("sent %q", tokens[0])
	}
	some, err := live.Window(context.Background(), name, first.Add(time.Nanosecond), last.Add(time.Nanosecond))
	if err != nil {
		t.Fatal(err)
	}
	if n, m := len(some.Pods)+total(some.NotReady), len(all.Pods)+total(all.NotReady); n >= m {
		t.Errorf("the window without the first start holds %d Pods of %d", n, m)
	}
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// TestFileHostile: each malformed input is an error naming where it is; nothing is skipped.
func TestFileHostile(t *testing.T) {
	root := `{"trace_id":"t1","span_id":"a","name":"pod.startup","start":"2026-01-01T00:00:00Z","end":"2026-01-01T00:00:01Z","duration_ms":1000,"attributes":{"readyspan.outcome":"ready"}}`
	for _, tc := range []struct{ name, in, want string }{
		{"not json", "{nope", "value 1"},
		{"neither shape", `{"x":1}`, "neither a span line"},
		{"two roots", root + "\n" + root, "two pod.startup roots"},
		{"negative", strings.Replace(root, `"duration_ms":1000`, `"duration_ms":-5`, 1), "negative"},
		{"bad view", `{"uid":"u","outcome":"ready","spans":[{"name":"pod.startup"}]}`, "no durMs"},
		{"view without root", `[{"uid":"u","outcome":"ready","spans":[{"name":"kubelet","durMs":1}]}]`, "starts with its pod.startup"},
		{"long trace id", strings.Replace(root, `"t1"`, `"`+strings.Repeat("a", 100)+`"`, 1), "trace_id of 100 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := File(strings.NewReader(tc.in), "f")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	if s, err := File(strings.NewReader(root), "f"); err != nil || len(s.Pods) != 1 {
		t.Fatalf("a good line: %v %v", s, err)
	}
}

// TestLiveRefuses: a daemon's error is reported with its status, an answer too large is refused.
func TestLiveRefuses(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "Unauthorized: a bearer token is required", http.StatusUnauthorized)
	}))
	defer srv.Close()
	base, _ := apiclient.CheckBase(srv.URL)
	_, err := (&Live{API: &apiclient.Client{Base: base}}).Window(context.Background(), "x", time.Unix(0, 0), time.Now())
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("%v", err)
	}
	for _, bad := range []string{"ftp://x", "http://", "http://u:p@x", "http://x?a=b"} {
		if _, err := apiclient.CheckBase(bad); err == nil {
			t.Errorf("--url %s accepted", bad)
		}
	}
}

func TestParseWindow(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	since, until, ok, err := ParseWindow("now-2h..now", now)
	if err != nil || !ok || !since.Equal(now.Add(-2*time.Hour)) || !until.Equal(now) {
		t.Fatalf("%v %v %v %v", since, until, ok, err)
	}
	if _, _, ok, _ := ParseWindow("some/dir", now); ok {
		t.Error("a path read as a window")
	}
	for _, bad := range []string{"now..now-1h", "yesterday..now", "now-1x..now", "now--1h..now"} {
		if _, _, _, err := ParseWindow(bad, now); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}
