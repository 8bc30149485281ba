package web

import (
	"encoding/json"
	"io"
	"math"
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
)

// serveCapture serves one real capture's traces as the daemon would.
func serveCapture(t *testing.T, name string) (*httptest.Server, []*phases.Trace, []*rollout.Trace) {
	t.Helper()
	pods, rollouts := replay(t, captures.Path(name))
	ring := NewRing(RingConfig{})
	for _, p := range pods {
		ring.AddPod(p)
	}
	for _, r := range rollouts {
		ring.AddRollout(r)
	}
	srv := httptest.NewServer(NewServer(ring, ServerConfig{}))
	t.Cleanup(srv.Close)
	return srv, pods, rollouts
}

// object is a JSON object as the page receives it: the tests read the wire, field by field.
type object = map[string]any

func getObject(t *testing.T, srv *httptest.Server, path string) object {
	t.Helper()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var v object
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &v) != nil {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	return v
}

func list(v object, key string) []object {
	var out []object
	xs, _ := v[key].([]any)
	for _, x := range xs {
		if o, ok := x.(object); ok {
			out = append(out, o)
		}
	}
	return out
}

func str(v object, key string) string  { s, _ := v[key].(string); return s }
func num(v object, key string) float64 { f, _ := v[key].(float64); return f }

func rolloutOf(t *testing.T, srv *httptest.Server, rollouts []*rollout.Trace, workload string) object {
	t.Helper()
	for _, r := range rollouts {
		if r.Rollout.Workload.Name == workload {
			return getObject(t, srv, "/api/v1/rollouts/"+r.Root().SpanID.String())
		}
	}
	t.Fatalf("no rollout of %s", workload)
	return nil
}

// The page colours a span by the category the server sends (the catalogue's, else its phase's):
// it matches no span name of its own. An image pull's bar is split at its transfer's start, the
// part before it the wait in the kubelet's queue.
func TestSpanCategoriesFromTheCatalogue(t *testing.T) {
	for _, dir := range realCaptures(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			srv, pods, _ := serveCapture(t, filepath.Base(dir))
			queued := 0
			for _, p := range pods {
				v := getObject(t, srv, "/api/v1/pods/"+p.Pod.UID)
				spans := list(v, "spans")
				for i, s := range spans {
					want := string(phases.CategoryOf(str(s, "name")))
					switch {
					case want != "":
					case i == 0:
						want = "root"
					default:
						want = str(s, "phase")
					}
					if got := str(s, "cat"); got != want || got == "" {
						t.Errorf("Pod %s, span %s: category %q, want %q", p.Pod.Name, str(s, "name"), got, want)
					}
					parts := list(s, "parts")
					if str(s, "name") != phases.SpanImagePull || i+1 >= len(spans) || str(spans[i+1], "name") != phases.SpanImagePullTransfer {
						if len(parts) > 0 {
							t.Errorf("Pod %s, span %s: parts %v", p.Pod.Name, str(s, "name"), parts)
						}
						continue
					}
					transfer := spans[i+1]
					if num(transfer, "startMs") <= num(s, "startMs") {
						continue // no wait before the transfer: one part
					}
					if len(parts) != 2 || str(parts[0], "cat") != "queued" || str(parts[1], "cat") != "image_pull" ||
						num(parts[0], "startMs") != num(s, "startMs") || num(parts[0], "endMs") != num(transfer, "startMs") ||
						num(parts[1], "startMs") != num(transfer, "startMs") || math.Abs(num(parts[1], "endMs")-num(s, "startMs")-num(s, "durMs")) > 0.002 {
						t.Errorf("Pod %s: the pull [%.3f +%.3f] with its transfer from %.3f has parts %v", p.Pod.Name,
							num(s, "startMs"), num(s, "durMs"), num(transfer, "startMs"), parts)
					}
					queued++
				}
			}
			if filepath.Base(dir) == "run8-slow-pull-watch" && queued == 0 {
				t.Error("run8's slow pull waited 4.4 s for its transfer: no queued part")
			}
		})
	}
}

// A length between whole-second stamps comes with the precision it has ("10 s ±1 s", the
// terminal's rule), never as "10.000 s"; a precise one is left to the page's millisecond format.
// The critical path's figures take the rollout's precision.
func TestLengthsWithTheirPrecision(t *testing.T) {
	srv, pods, rollouts := serveCapture(t, "run8-slow-pull-watch")
	for _, p := range pods {
		v := getObject(t, srv, "/api/v1/pods/"+p.Pod.UID)
		if got := str(v, "durText"); got != "10 s ±1 s" {
			t.Errorf("Pod %s: length %q, want 10 s ±1 s (the terminal's 10s ±1s)", p.Pod.Name, got)
		}
		for i, s := range list(v, "spans") {
			want, _ := phases.CoarseLength(p.Spans[i].Duration(), phases.LengthUncertainty(&p.Spans[i]), " ")
			if got := str(s, "durText"); got != want {
				t.Errorf("Pod %s, span %s: length %q, want %q", p.Pod.Name, str(s, "name"), got, want)
			}
			if str(s, "name") == phases.SpanImagePullTransfer && str(s, "durText") != "" {
				t.Errorf("Pod %s: the transfer, stamped to the millisecond, is %q", p.Pod.Name, str(s, "durText"))
			}
		}
	}
	g := rolloutOf(t, srv, rollouts, "sleeper")
	if got := str(g, "durText"); got != "10 s ±1 s" {
		t.Errorf("rollout: length %q, want 10 s ±1 s", got)
	}
	var pct float64
	for _, c := range list(g, "critical") {
		pct += num(c, "pct")
		if num(c, "ms") > 0 && !regexp.MustCompile(`^<?\d+ s$`).MatchString(str(c, "text")) {
			t.Errorf("critical %s: %q for %.3f ms, want whole seconds like the rollout's", str(c, "name"), str(c, "text"), num(c, "ms"))
		}
		if str(c, "name") == "image_pull" && num(c, "pct") != 48 {
			t.Errorf("critical image_pull: %v%%, the sentence says 48%%", c["pct"])
		}
	}
	if math.Abs(pct-100) > float64(len(rollout.Categories))/2 {
		t.Errorf("the critical path's shares add up to %v%%", pct)
	}
}

// A failing Pod's row carries its reason as an error the page writes on the row, and the Pod
// list names it: run4's crash loop and bad image, in progress when the capture ended.
func TestFailingRowsSayWhy(t *testing.T) {
	srv, pods, rollouts := serveCapture(t, "run4-failures")
	for workload, reason := range map[string]string{"crasher": "CrashLoopBackOff", "badimage": "ImagePullBackOff"} {
		g := rolloutOf(t, srv, rollouts, workload)
		found := false
		for _, r := range list(g, "rows") {
			if str(r, "type") != "pod" {
				continue
			}
			found = true
			if r["error"] != true || str(r, "message") != reason {
				t.Errorf("%s: the Pod row %s says error %v, %q; want the reason %s", workload, str(r, "label"), r["error"], str(r, "message"), reason)
			}
			failing := false
			for _, sg := range list(r, "segments") {
				failing = failing || str(sg, "cat") == "failing"
			}
			if !failing {
				t.Errorf("%s: the Pod row %s has no failing segment: %v", workload, str(r, "label"), r["segments"])
			}
		}
		if !found {
			t.Errorf("%s: no Pod row", workload)
		}
	}
	resp, err := http.Get(srv.URL + "/api/v1/pods")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ps []object
	if err := json.NewDecoder(resp.Body).Decode(&ps); err != nil {
		t.Fatal(err)
	}
	if len(ps) != len(pods) {
		t.Fatalf("%d Pods listed, %d traced", len(ps), len(pods))
	}
	for _, p := range ps {
		want := map[string]string{"crasher": "CrashLoopBackOff", "badimage": "ImagePullBackOff"}[strings.SplitN(str(p, "name"), "-", 2)[0]]
		if got := str(p, "error"); got != want {
			t.Errorf("Pod list: %s says %q, want %q", str(p, "name"), got, want)
		}
	}
}

// An image's size is sent as people read it, not as a count of bytes.
func TestImageSizeInMB(t *testing.T) {
	srv, pods, _ := serveCapture(t, "run8-slow-pull-watch")
	n := 0
	for _, p := range pods {
		for _, s := range list(getObject(t, srv, "/api/v1/pods/"+p.Pod.UID), "spans") {
			attrs, _ := s["attrs"].(object)
			if v, ok := attrs[phases.AttrImageSize]; ok {
				n++
				if v != "34.7 MB" {
					t.Errorf("Pod %s, span %s: image size %v, want 34.7 MB (34704198 bytes)", p.Pod.Name, str(s, "name"), v)
				}
			}
		}
	}
	if n == 0 {
		t.Error("no span states the image's size")
	}
}

// TestEveryClassHasAFill: every category the server can send for a span (a Pod's or a node's), a
// segment or a row (c-CLASS on the page) has its fill in app.css, so that no bar is drawn
// without a colour.
func TestEveryClassHasAFill(t *testing.T) {
	css, err := os.ReadFile(filepath.Join("assets", "app.css"))
	if err != nil {
		t.Fatal(err)
	}
	classes := []string{"root", CatQueued, CatImagePull, "blocked", "step"}
	classes = append(classes, phases.Phases...)
	for _, s := range phases.Catalogue {
		if s.Category != phases.CategoryNone {
			classes = append(classes, string(s.Category))
		}
	}
	for _, c := range rollout.Categories {
		classes = append(classes, c.Page)
	}
	classes = append(classes, NodeCategories...)
	for _, c := range classes {
		if !regexp.MustCompile(`\.c-` + regexp.QuoteMeta(c) + `\b[^{]*\{[^}]*\b(fill|background):`).Match(css) {
			t.Errorf("no fill for .c-%s in app.css", c)
		}
	}
}
