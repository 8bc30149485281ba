//go:build e2e

package e2e

// The web UI and the HTML report in a real browser: Debian's headless Chromium, driven over the
// DevTools protocol (chromedp). TestUIReportOffline and TestUIReplayListen need no cluster (they
// replay the real captures in tracer/testdata/real-node); TestUILiveRollout watches the local
// readyspan's UI during a rollout. Screenshots go to .local/artifacts/ui/.
//
//	go test -tags e2e -count=1 -run 'TestUIReport|TestUIReplay' -v ./test/e2e/

import (
	"bufio"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The local readyspan's UI (READYSPAN_METRICS in deploy/local/scripts/lib.sh).
var uiURL = getenv("READYSPAN_E2E_UI_URL", "http://127.0.0.1:8080/")

// browser is one headless Chromium tab that records what would make a page wrong: console
// errors, uncaught exceptions, failed loads, and every URL it requested.
type browser struct {
	ctx       context.Context
	artifacts string
	mu        sync.Mutex
	problems  []string
	requests  []string
}

// newBrowser starts Chromium; a missing Chromium fails the test (see Missing).
func newBrowser(t *testing.T, width, height int) *browser {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		Missing(t, "Chromium for the browser tests (apt-get install chromium; make e2e installs it)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // as root, in a container
		chromedp.DisableGPU,
		chromedp.WindowSize(width, height),
	)
	b := &browser{artifacts: filepath.Join(repoRoot(t), ".local", "artifacts", "ui")}
	if err := os.MkdirAll(b.artifacts, 0o755); err != nil {
		t.Fatal(err)
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithListener(b.listen))
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b.ctx = ctx
	err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tg, network.Enable, network.EnableParams{}); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, tg, cdplog.Enable, cdp.Empty{})
		return err
	}))
	if err != nil {
		Missing(t, "a working Chromium at %s: %v", path, err)
	}
	return b
}

// listen records the events that say a page went wrong, and every request.
func (b *browser) listen(ev any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch ev := ev.(type) {
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		msg := d.Text
		if d.Exception != nil {
			msg += " " + d.Exception.Description
		}
		b.problems = append(b.problems, fmt.Sprintf("exception at %s:%d: %s", d.URL, d.LineNumber, msg))
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
			var args []string
			for _, a := range ev.Args {
				args = append(args, strings.TrimSpace(string(a.Value)+" "+a.Description))
			}
			b.problems = append(b.problems, "console."+string(ev.Type)+": "+strings.Join(args, " "))
		}
	case *cdplog.EventEntryAdded:
		if ev.Entry.Level == cdplog.EntryLevelError {
			b.problems = append(b.problems, "log: "+ev.Entry.Text+" "+ev.Entry.URL)
		}
	case *network.EventRequestWillBeSent:
		b.requests = append(b.requests, ev.Request.URL)
	}
}

// do runs steps in the tab, with a deadline; on failure it keeps a screenshot.
func (b *browser) do(t *testing.T, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.screenshot(t, "failed-"+slug(what))
		t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, b *browser, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

func (b *browser) screenshot(t *testing.T, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return
	}
	file := filepath.Join(b.artifacts, name+".png")
	if err := os.WriteFile(file, png, 0o644); err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return
	}
	t.Logf("screenshot: %s", file)
}

// noProblems fails on any console error, exception or failed load seen so far.
func (b *browser) noProblems(t *testing.T) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.problems {
		t.Errorf("in the browser: %s", p)
	}
}

func slug(s string) string {
	return strings.Trim(regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(strings.ToLower(s), "-"), "-")
}

// buildReadyspan builds the readyspan of this tree for the tests that need no cluster.
func buildReadyspan(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "readyspan")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/readyspan")
	cmd.Dir = repoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/readyspan: %v\n%s", err, out)
	}
	return bin
}

func capture(t *testing.T, name string) string {
	return filepath.Join(repoRoot(t), "tracer", "testdata", "real-node", name)
}

// clickThrough walks the UI from the rollout list: the rollout, its Gantt (every row drawn,
// new Pods coloured), a click on a Pod row, its waterfall; then the keyboard back and forth and
// a narrow window. It returns the number of Gantt rows.
func clickThrough(t *testing.T, b *browser, base, shots string) int {
	t.Helper()
	b.do(t, "open the rollout list", chromedp.Navigate(base), chromedp.WaitVisible(chromedp.CSS(`#rollouts tbody tr`)))
	if n := eval[int](t, b, `document.querySelectorAll('#rollouts tbody tr').length`); n == 0 {
		t.Fatal("the list shows no rollout")
	}
	b.screenshot(t, shots+"-list")
	b.do(t, "open the first rollout's Gantt",
		chromedp.Click(chromedp.CSS(`#rollouts tbody tr:first-child a`)),
		chromedp.WaitVisible(chromedp.CSS(`#gantt g.row`)))
	rows := eval[int](t, b, `+document.getElementById('gantt').dataset.rows`)
	drawn := eval[int](t, b, `document.querySelectorAll('#gantt g.row').length`)
	segs := eval[int](t, b, `document.querySelectorAll('#gantt g.type-pod rect.seg').length`)
	uids := eval[[]string](t, b, `Array.from(document.querySelectorAll('#gantt g.type-pod')).map(g => g.dataset.uid)`)
	if rows == 0 || drawn != rows {
		t.Errorf("the Gantt has %d rows, %d drawn", rows, drawn)
	}
	if len(uids) == 0 || segs < len(uids) {
		t.Fatalf("%d Pod rows with %d segments: every new Pod's row should be coloured", len(uids), segs)
	}
	b.screenshot(t, shots+"-gantt")
	b.do(t, "click a Pod row for its waterfall",
		chromedp.Click(chromedp.CSS(`#gantt g.type-pod rect.seg`)),
		chromedp.WaitVisible(chromedp.CSS(`#waterfall g.row`)))
	if spans := eval[int](t, b, `document.querySelectorAll('#waterfall g.row').length`); spans < 7 { // the root and six phases
		t.Errorf("the waterfall has %d spans", spans)
	}
	if loc := eval[string](t, b, `location.hash`); !strings.Contains(loc, uids[0]) {
		t.Errorf("the click opened %s, not the first Pod row's %s", loc, uids[0])
	}
	b.screenshot(t, shots+"-waterfall")
	b.do(t, "select a span with the keyboard",
		chromedp.Focus(chromedp.CSS(`#waterfall`)),
		chromedp.KeyEvent(kb.ArrowDown))
	if detail := eval[string](t, b, `document.getElementById('detail').innerText`); !strings.Contains(detail, "precision") {
		t.Errorf("the selected span's details do not state its precision: %q", detail)
	}
	b.do(t, "go back to the Gantt with Esc",
		chromedp.KeyEvent(kb.Escape),
		chromedp.WaitVisible(chromedp.CSS(`#gantt g.row`)))
	b.do(t, "open a Pod from the Gantt with the keyboard",
		chromedp.Focus(chromedp.CSS(`#gantt`)),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			// ↓ to the first new Pod's row, then Enter.
			first := eval[int](t, b, `Array.from(document.querySelectorAll('#gantt g.row')).findIndex(g => g.classList.contains('type-pod'))`)
			for i := 0; i <= first; i++ {
				if _, err := chromedp.KeyEvent(kb.ArrowDown)(ctx, tg); err != nil {
					return err
				}
			}
			return nil
		}),
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(chromedp.CSS(`#waterfall g.row`)))
	b.do(t, "a narrow window", chromedp.EmulateViewport(420, 800), chromedp.Sleep(300*time.Millisecond))
	if w := eval[int](t, b, `document.documentElement.scrollWidth`); w > 440 {
		t.Errorf("at 420 px wide the page is %d px wide", w)
	}
	b.screenshot(t, shots+"-narrow-waterfall")
	b.do(t, "the Gantt in a narrow window", chromedp.KeyEvent(kb.Escape), chromedp.WaitVisible(chromedp.CSS(`#gantt g.row`)))
	if w := eval[int](t, b, `document.documentElement.scrollWidth`); w > 440 {
		t.Errorf("at 420 px wide the Gantt is %d px wide", w)
	}
	b.screenshot(t, shots+"-narrow-gantt")
	b.do(t, "back to a wide window", chromedp.EmulateViewport(1280, 800))
	return rows
}

// TestUIReportOffline renders the HTML report of real-capture replays from a file, with no
// server: it must show the same views and request nothing but itself.
func TestUIReportOffline(t *testing.T) {
	bin := buildReadyspan(t)
	for _, name := range []string{"run8-slow-pull-watch", "run4-failures"} {
		t.Run(name, func(t *testing.T) {
			b := newBrowser(t, 1280, 800)
			report := filepath.Join(b.artifacts, "report-"+name+".html")
			out, err := os.Create(report)
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(bin, "replay", capture(t, name), "-o", "html")
			cmd.Stdout = out
			errOut, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(errOut)
			for sc.Scan() {
				t.Log(sc.Text())
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("replay -o html: %v", err)
			}
			out.Close()
			fi, _ := os.Stat(report)
			t.Logf("report: %s, %d bytes", report, fi.Size())
			clickThrough(t, b, "file://"+report, "report-"+name)
			b.noProblems(t)
			b.mu.Lock()
			for _, u := range b.requests {
				if !strings.HasPrefix(u, "file://") && !strings.HasPrefix(u, "data:") {
					t.Errorf("the report requested %s", u)
				}
			}
			b.mu.Unlock()
		})
	}
}

// TestUIReplayListen serves the UI over a real capture with `replay --listen` and clicks
// through it.
func TestUIReplayListen(t *testing.T) {
	bin := buildReadyspan(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "replay", capture(t, "run10-containerd2-failures"), "--listen", "127.0.0.1:0",
		"--trace-ui-url", "http://127.0.0.1:16686/trace/{trace_id}")
	errOut, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(errOut)
		re := regexp.MustCompile(`on (http://\S+/)`)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	var base string
	select {
	case base = <-addr:
	case <-time.After(time.Minute):
		t.Fatal("replay --listen did not say where it serves")
	}
	b := newBrowser(t, 1280, 800)
	clickThrough(t, b, base, "replay-listen")
	if links := eval[int](t, b, `document.querySelectorAll('a[href^="http://127.0.0.1:16686/trace/"]').length`); links != 1 {
		t.Errorf("%d links to the trace UI, want 1", links)
	}
	b.noProblems(t)
}

// uiRollout is what the UI's API says of a rollout (only what the test checks).
type uiRollout struct {
	ID       string `json:"id"`
	Kind     string `json:"kind"`
	Outcome  string `json:"outcome"`
	Workload string `json:"workload"`
	Rows     []struct {
		Type     string `json:"type"`
		UID      string `json:"uid"`
		Segments []struct {
			Cat string `json:"cat"`
		} `json:"segments"`
	} `json:"rows"`
}

// TestUILiveRollout rolls a Deployment out on the local cluster and checks the local readyspan's
// UI: the rollout listed with one row per new and per old Pod, coloured, and a click on a Pod
// opening its waterfall.
func TestUILiveRollout(t *testing.T) {
	e := Setup(t)
	ctx := Ctx(t)
	if _, err := getJSON(ctx, uiURL+"api/v1/rollouts", &[]uiRollout{}); err != nil {
		Missing(t, "the local readyspan's UI at %s: %v", uiURL, err)
	}
	ns := e.Namespace(t, "e2e-ui")
	d := webDeployment("web", 3)
	e.createService(t, ns, service("web"))
	e.createDeployment(t, ns, d)
	old := e.WaitPodsReady(t, ns, "app=web", 3, 3*time.Minute)
	patch := []byte(`{"spec":{"template":{"metadata":{"annotations":{"readyspan.dev/e2e-change":"ui"}}}}}`)
	if _, err := e.Kube.AppsV1().Deployments(ns).Patch(ctx, "web", types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("patch the template: %v", err)
	}
	Eventually(t, 4*time.Minute, "the Deployment's rollout to complete", func() (bool, error) {
		dep, err := e.Kube.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && deploymentComplete(dep), err
	})
	current := e.WaitPodsReady(t, ns, "app=web", 3, time.Minute)

	var ro uiRollout
	Eventually(t, 2*time.Minute, "the update rollout in the UI", func() (bool, error) {
		var list []uiRollout
		if _, err := getJSON(ctx, uiURL+"api/v1/rollouts?namespace="+ns+"&workload=web", &list); err != nil {
			return false, err
		}
		for _, r := range list {
			if r.Kind == "update" {
				_, err := getJSON(ctx, uiURL+"api/v1/rollouts/"+r.ID, &ro)
				return err == nil, err
			}
		}
		return false, fmt.Errorf("%d rollouts listed, none an update", len(list))
	})
	if ro.Outcome != "complete" {
		t.Errorf("outcome %q, want complete", ro.Outcome)
	}
	var gotNew, gotOld, wantNew, wantOld []string
	for _, r := range ro.Rows {
		switch r.Type {
		case "pod":
			gotNew = append(gotNew, r.UID)
			if len(r.Segments) == 0 {
				t.Errorf("Pod row %s has no segments", r.UID)
			}
		case "old":
			gotOld = append(gotOld, r.UID)
		}
	}
	for _, p := range current {
		wantNew = append(wantNew, string(p.UID))
	}
	for _, p := range old {
		wantOld = append(wantOld, string(p.UID))
	}
	for _, l := range [][]string{gotNew, gotOld, wantNew, wantOld} {
		sort.Strings(l)
	}
	if fmt.Sprint(gotNew) != fmt.Sprint(wantNew) || fmt.Sprint(gotOld) != fmt.Sprint(wantOld) {
		t.Errorf("Gantt rows: new %v, old %v; the cluster's Pods: new %v, old %v", gotNew, gotOld, wantNew, wantOld)
	}

	b := newBrowser(t, 1280, 900)
	b.do(t, "the rollout in the list",
		chromedp.Navigate(uiURL+"#/?namespace="+url.QueryEscape(ns)),
		chromedp.WaitVisible(chromedp.CSS(`#rollouts tbody tr`)))
	if listed := eval[int](t, b, fmt.Sprintf(`document.querySelectorAll('#rollouts tr[data-id=%q]').length`, ro.ID)); listed != 1 {
		t.Errorf("the rollout %s is listed %d times", ro.ID, listed)
	}
	b.do(t, "its Gantt",
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`#rollouts tr[data-id=%q] a`, ro.ID))),
		chromedp.WaitVisible(chromedp.CSS(`#gantt g.type-pod`)))
	drawnNew := eval[[]string](t, b, `Array.from(document.querySelectorAll('#gantt g.type-pod')).map(g => g.dataset.uid).sort()`)
	drawnOld := eval[[]string](t, b, `Array.from(document.querySelectorAll('#gantt g.type-old')).map(g => g.dataset.uid).sort()`)
	if fmt.Sprint(drawnNew) != fmt.Sprint(wantNew) || fmt.Sprint(drawnOld) != fmt.Sprint(wantOld) {
		t.Errorf("drawn rows: new %v, old %v; want %v, %v", drawnNew, drawnOld, wantNew, wantOld)
	}
	b.screenshot(t, "live-gantt")
	b.do(t, "a Pod's waterfall",
		chromedp.Click(chromedp.CSS(`#gantt g.type-pod rect.seg`)),
		chromedp.WaitVisible(chromedp.CSS(`#waterfall g.row`)))
	if spans := eval[int](t, b, `document.querySelectorAll('#waterfall g.row').length`); spans < 7 {
		t.Errorf("the waterfall has %d spans", spans)
	}
	b.screenshot(t, "live-waterfall")
	b.noProblems(t)
}
