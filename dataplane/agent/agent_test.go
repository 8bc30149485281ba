package agent

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/readyspan/readyspan/dataplane"
	"github.com/readyspan/readyspan/otlpin"
	"github.com/readyspan/readyspan/phases"
)

// fakeWatcher hands its callback to the test and reports the mode and count the test sets.
type fakeWatcher struct {
	mu   sync.Mutex
	mode string
	n    int
	cb   chan func([]dataplane.Change)
}

func newFakeWatcher(mode string, n int) *fakeWatcher {
	return &fakeWatcher{mode: mode, n: n, cb: make(chan func([]dataplane.Change), 1)}
}

func (f *fakeWatcher) Run(ctx context.Context, out func([]dataplane.Change)) error {
	f.cb <- out
	<-ctx.Done()
	return nil
}

func (f *fakeWatcher) Current() (string, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mode, f.n
}

func (f *fakeWatcher) set(mode string, n int) {
	f.mu.Lock()
	f.mode, f.n = mode, n
	f.mu.Unlock()
}

// receiver is an OTLP/HTTP receiver that decodes what it is sent the way readyspan's input
// does (otlpin.DecodeMessage), and also as the plain message, for the resource.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	status int // answered instead of 200 while set
	body   []byte
	spans  []phases.ComponentSpan
	reqs   []*collectortrace.ExportTraceServiceRequest
	auth   []string
	calls  int
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.calls++
		r.auth = append(r.auth, req.Header.Get("Authorization"))
		if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("request to %s as %s", req.URL.Path, req.Header.Get("Content-Type"))
		}
		if r.status != 0 {
			rw.WriteHeader(r.status)
			_, _ = rw.Write(r.body)
			return
		}
		if err := otlpin.DecodeMessage(b, func(c []phases.ComponentSpan) { r.spans = append(r.spans, c...) }); err != nil {
			t.Errorf("decode: %v", err)
		}
		var m collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &m); err != nil {
			t.Errorf("unmarshal: %v", err)
		}
		r.reqs = append(r.reqs, &m)
		_, _ = rw.Write(r.body)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) set(status int, body []byte) {
	r.mu.Lock()
	r.status, r.body = status, body
	r.mu.Unlock()
}

func (r *receiver) received() []phases.ComponentSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]phases.ComponentSpan(nil), r.spans...)
}

// eventually waits up to 5 s for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// start runs an agent against r until the test ends.
func start(t *testing.T, cfg Config, w Watcher) (*Agent, func([]dataplane.Change)) {
	t.Helper()
	a, err := New(cfg, w)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	var cb func([]dataplane.Change)
	if fw, ok := w.(*fakeWatcher); ok {
		cb = <-fw.cb
	}
	return a, cb
}

var at = time.Date(2026, 12, 5, 12, 0, 0, 123456789, time.UTC)

func change(in bool, addr string, port int32) dataplane.Change {
	return dataplane.Change{Node: "node-a", In: in, At: at, Precision: 250 * time.Millisecond, Mode: dataplane.ModeNFTables,
		Endpoint: dataplane.Endpoint{Namespace: "shop", Service: "web", PortName: "http", Protocol: "tcp",
			Address: netip.MustParseAddr(addr), Port: port}}
}

// TestSendsTheContract: changes and a heartbeat reach the receiver as the contract's spans,
// each its own trace at one instant, under the component's resource, and read back through
// readyspan's own decoder and dataplane.Parse into what was sent.
func TestSendsTheContract(t *testing.T) {
	r := newReceiver(t)
	w := newFakeWatcher(dataplane.ModeNFTables, 2)
	now := at.Add(time.Second)
	_, cb := start(t, Config{Node: "node-a", Endpoint: r.URL, Now: func() time.Time { return now }}, w)
	sent := []dataplane.Change{change(true, "10.0.0.7", 8080), change(false, "fd00::5", 443)}
	cb(sent)
	eventually(t, "3 spans", func() bool { return len(r.received()) >= 3 })

	var changes []dataplane.Change
	var syncs []dataplane.Sync
	traces := map[phases.TraceID]bool{}
	for _, sp := range r.received() {
		if !sp.Start.Equal(sp.End) {
			t.Errorf("%s: start %v, end %v: want one instant", sp.Name, sp.Start, sp.End)
		}
		if traces[sp.TraceID] {
			t.Errorf("%s shares its trace", sp.Name)
		}
		traces[sp.TraceID] = true
		rep, err := dataplane.Parse(&sp)
		if err != nil {
			t.Fatalf("Parse(%s): %v", sp.Name, err)
		}
		if rep.Change != nil {
			changes = append(changes, *rep.Change)
		} else {
			syncs = append(syncs, *rep.Sync)
		}
	}
	if len(changes) != 2 || changes[0] != sent[0] || changes[1] != sent[1] {
		t.Errorf("changes read back:\n  %+v\nwant\n  %+v", changes, sent)
	}
	if want := (dataplane.Sync{Node: "node-a", Mode: dataplane.ModeNFTables, At: now, Endpoints: 2}); len(syncs) != 1 || syncs[0] != want {
		t.Errorf("heartbeats %+v, want %+v", syncs, want)
	}
	r.mu.Lock()
	res := r.reqs[0].ResourceSpans[0].Resource.Attributes
	r.mu.Unlock()
	got := map[string]string{}
	for _, kv := range res {
		got[kv.Key] = kv.Value.GetStringValue()
	}
	if got["service.name"] != dataplane.Component || got[dataplane.AttrNode] != "node-a" {
		t.Errorf("resource %v: want service.name %s and the node", got, dataplane.Component)
	}
}

// TestTokenReadAgain: the token is read from its file for each request, so a rotated
// projected token (the kubelet swaps the file) is what the next request carries.
func TestTokenReadAgain(t *testing.T) {
	r := newReceiver(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	write := func(tok string) { // as the kubelet does: a new file renamed over the old
		tmp := filepath.Join(dir, ".tmp")
		if err := os.WriteFile(tmp, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
	}
	write("first-token")
	_, cb := start(t, Config{Node: "node-a", Endpoint: r.URL, TokenFile: file}, newFakeWatcher("", 0))
	cb([]dataplane.Change{change(true, "10.0.0.7", 80)})
	eventually(t, "the first request", func() bool { return len(r.received()) == 1 })
	write("second-token")
	cb([]dataplane.Change{change(false, "10.0.0.7", 80)})
	eventually(t, "the second request", func() bool { return len(r.received()) == 2 })
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.auth[0] != "Bearer first-token" || r.auth[1] != "Bearer second-token" {
		t.Errorf("Authorization headers %q: want each request with the token of the moment", r.auth)
	}
}

func dropped(a *Agent, reason string) int {
	return int(testutil.ToFloat64(a.m.dropped.WithLabelValues(reason)))
}

// TestQueueBoundWhileDown: while the receiver is down the watcher is never held up, at most
// Queue spans wait, the oldest are dropped and counted as export_failed, and what is left goes
// out once the receiver is back.
func TestQueueBoundWhileDown(t *testing.T) {
	r := newReceiver(t)
	r.set(http.StatusServiceUnavailable, nil)
	a, cb := start(t, Config{Node: "node-a", Endpoint: r.URL, Queue: 10, Batch: 4,
		InitialBackoff: time.Second, MaxBackoff: time.Second}, newFakeWatcher("", 0))
	cb([]dataplane.Change{change(true, "10.0.0.1", 80)})
	eventually(t, "a failed attempt, its batch back in the queue", func() bool {
		return testutil.ToFloat64(a.m.errors) == 1 && a.queue.len() == 1
	})
	var burst []dataplane.Change
	for i := range 25 {
		burst = append(burst, change(true, netip.AddrFrom4([4]byte{10, 0, 1, byte(i)}).String(), 80))
	}
	begin := time.Now()
	cb(burst)
	if d := time.Since(begin); d > 100*time.Millisecond {
		t.Errorf("the watcher's callback took %v with the receiver down", d)
	}
	if n := a.queue.len(); n != 10 {
		t.Errorf("%d spans queued, want the bound, 10", n)
	}
	if n := dropped(a, DropExportFailed); n != 16 {
		t.Errorf("dropped export_failed %d, want 16 (26 queued, 10 kept)", n)
	}
	if v := testutil.ToFloat64(a.m.failing); v != 1 {
		t.Errorf("readyspan_node_export_failing %v, want 1", v)
	}
	r.set(0, nil)
	eventually(t, "the queue delivered", func() bool { return len(r.received()) == 10 })
	got := r.received()
	if last := got[9].Attr(dataplane.AttrAddress); last != "10.0.1.24" {
		t.Errorf("the last span delivered is %s: want the newest kept", last)
	}
	eventually(t, "recovery, 10 exported", func() bool {
		return testutil.ToFloat64(a.m.failing) == 0 && testutil.ToFloat64(a.m.exported) == 10
	})
	if n := testutil.ToFloat64(a.m.changes.WithLabelValues(dataplane.SpanProgrammed)); n != 26 {
		t.Errorf("changes_total{kind=programmed} %v, want 26", n)
	}
}

// TestRefusedForGood: a request the receiver refuses as malformed is not retried; its spans
// are counted as rejected, as are the spans a partial success names.
func TestRefusedForGood(t *testing.T) {
	r := newReceiver(t)
	r.set(http.StatusBadRequest, []byte("bad"))
	a, cb := start(t, Config{Node: "node-a", Endpoint: r.URL, InitialBackoff: time.Millisecond}, newFakeWatcher("", 0))
	cb([]dataplane.Change{change(true, "10.0.0.1", 80), change(true, "10.0.0.2", 80)})
	eventually(t, "the refusal counted", func() bool { return dropped(a, DropRejected) == 2 })
	partial, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{PartialSuccess: &collectortrace.ExportTracePartialSuccess{RejectedSpans: 1}})
	r.set(0, partial)
	cb([]dataplane.Change{change(true, "10.0.0.3", 80), change(true, "10.0.0.4", 80)})
	eventually(t, "the partial success counted", func() bool {
		return dropped(a, DropRejected) == 3 && testutil.ToFloat64(a.m.exported) == 1
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.calls != 2 {
		t.Errorf("%d requests: a refusal for good was retried", r.calls)
	}
}

// fakeClock is the heartbeat's clock: the test moves the time and fires each wait.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	waits chan time.Duration
	fire  chan chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: at, waits: make(chan time.Duration, 8), fire: make(chan chan time.Time, 8)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.waits <- d
	c.fire <- ch
	return ch
}

// expect waits for the heartbeat's next wait and checks its length.
func (c *fakeClock) expect(t *testing.T, want time.Duration) chan time.Time {
	t.Helper()
	select {
	case d := <-c.waits:
		if d != want {
			t.Fatalf("the heartbeat waits %v, want %v", d, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the heartbeat does not wait")
	}
	return <-c.fire
}

// pass moves the clock by d and ends the wait.
func (c *fakeClock) pass(ch chan time.Time, d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	now := c.now
	c.mu.Unlock()
	ch <- now
}

// TestHeartbeat: no heartbeat until the watcher has read the rules (a node without kube-proxy
// would otherwise be waited for), then one at once and every SyncEvery, with the count of
// the moment.
func TestHeartbeat(t *testing.T) {
	r := newReceiver(t)
	clock := newFakeClock()
	w := newFakeWatcher("", 0)
	start(t, Config{Node: "node-a", Endpoint: r.URL, Now: clock.Now, After: clock.After}, w)
	wait := clock.expect(t, firstSyncPoll) // the rules are not read yet
	clock.pass(wait, firstSyncPoll)
	wait = clock.expect(t, firstSyncPoll)
	if n := len(r.received()); n != 0 {
		t.Fatalf("%d heartbeats before the rules were read", n)
	}
	w.set(dataplane.ModeIPTables, 3)
	clock.pass(wait, firstSyncPoll) // read now: a heartbeat at once
	wait = clock.expect(t, dataplane.SyncEvery)
	eventually(t, "the first heartbeat", func() bool { return len(r.received()) == 1 })
	w.set(dataplane.ModeIPTables, 5)
	clock.pass(wait, dataplane.SyncEvery)
	clock.expect(t, dataplane.SyncEvery)
	eventually(t, "the second heartbeat", func() bool { return len(r.received()) == 2 })

	first := at.Add(2 * firstSyncPoll)
	want := []dataplane.Sync{
		{Node: "node-a", Mode: dataplane.ModeIPTables, At: first, Endpoints: 3},
		{Node: "node-a", Mode: dataplane.ModeIPTables, At: first.Add(dataplane.SyncEvery), Endpoints: 5},
	}
	for i, sp := range r.received() {
		rep, err := dataplane.Parse(&sp)
		if err != nil || rep.Sync == nil {
			t.Fatalf("span %s: %v", sp.Name, err)
		}
		if *rep.Sync != want[i] {
			t.Errorf("heartbeat %d: %+v, want %+v", i, *rep.Sync, want[i])
		}
	}
}

// TestShutdown: at shutdown what is queued is sent while the receiver answers; with the
// receiver down it is counted as dropped once the grace runs out.
func TestShutdown(t *testing.T) {
	r := newReceiver(t)
	r.set(http.StatusServiceUnavailable, nil)
	a, err := New(Config{Node: "node-a", Endpoint: r.URL, ShutdownGrace: 300 * time.Millisecond,
		InitialBackoff: 50 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}, newFakeWatcher("", 0))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	cb := <-a.watcher.(*fakeWatcher).cb
	cb([]dataplane.Change{change(true, "10.0.0.1", 80), change(true, "10.0.0.2", 80)})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its grace")
	}
	if n := dropped(a, DropShutdown); n != 2 {
		t.Errorf("dropped at shutdown %d, want 2", n)
	}
}

// TestHealthz: /healthz answers ok, and says so when exports fail; /metrics has the agent's own.
func TestHealthz(t *testing.T) {
	r := newReceiver(t)
	r.set(http.StatusServiceUnavailable, nil)
	a, cb := start(t, Config{Node: "node-a", Endpoint: r.URL, Registry: prometheus.NewRegistry()}, newFakeWatcher("", 0))
	h := httptest.NewServer(a.Handler())
	defer h.Close()
	get := func(path string) string {
		resp, err := http.Get(h.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Errorf("%s: %s", path, resp.Status)
		}
		return string(b)
	}
	if b := get("/healthz"); b != "ok\n" {
		t.Errorf("/healthz %q", b)
	}
	cb([]dataplane.Change{change(true, "10.0.0.1", 80)})
	eventually(t, "a failure", func() bool { return testutil.ToFloat64(a.m.failing) == 1 })
	if b := get("/healthz"); !strings.Contains(b, "export failing") || !strings.Contains(b, "503") {
		t.Errorf("/healthz while failing: %q", b)
	}
	m := get("/metrics")
	for _, want := range []string{`readyspan_node_changes_total{kind="endpoint.programmed"} 1`, `readyspan_node_export_dropped_total{reason="queue_full"} 0`, "readyspan_node_export_failing 1"} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestTarget: the endpoint's flags are checked: no token in plain text off loopback, no plain
// text off loopback without --otlp-insecure, /v1/traces by default.
func TestTarget(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	if err := os.WriteFile(tok, []byte("t"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cfg           Config
		wantURL, fail string
	}{
		{Config{Endpoint: "readyspan.readyspan.svc:4321", TokenFile: tok}, "https://readyspan.readyspan.svc:4321/v1/traces", ""},
		{Config{Endpoint: "127.0.0.1:4321", Insecure: true}, "http://127.0.0.1:4321/v1/traces", ""},
		{Config{Endpoint: "http://localhost:4321"}, "http://localhost:4321/v1/traces", ""},
		{Config{Endpoint: "https://r:4321/custom/traces"}, "https://r:4321/custom/traces", ""},
		{Config{Endpoint: "http://10.0.0.1:4321"}, "", "--otlp-insecure"},
		{Config{Endpoint: "10.0.0.1:4321", Insecure: true, TokenFile: tok}, "", "plain text"},
		{Config{Endpoint: "127.0.0.1:4321", Insecure: true, CAFile: tok}, "", "--otlp-ca-file"},
		{Config{Endpoint: "https://r:4321", CAFile: tok}, "", "no PEM"},
		{Config{Endpoint: "https://r:4321", TokenFile: filepath.Join(dir, "none")}, "", "read the token"},
		{Config{Endpoint: "ftp://r:21"}, "", "want host:port"},
		{Config{}, "", "no OTLP endpoint"},
	} {
		got, err := resolveTarget(tc.cfg)
		switch {
		case tc.fail == "" && err != nil:
			t.Errorf("%+v: %v", tc.cfg, err)
		case tc.fail == "" && got.url != tc.wantURL:
			t.Errorf("%+v: URL %s, want %s", tc.cfg, got.url, tc.wantURL)
		case tc.fail != "" && (err == nil || !strings.Contains(err.Error(), tc.fail)):
			t.Errorf("%+v: error %v, want one with %q", tc.cfg, err, tc.fail)
		}
	}
	if _, err := New(Config{Endpoint: "127.0.0.1:1"}, newFakeWatcher("", 0)); err == nil || !strings.Contains(err.Error(), "node name") {
		t.Errorf("no node name: %v", err)
	}
}

type failingWatcher struct{}

func (failingWatcher) Run(context.Context, func([]dataplane.Change)) error {
	return errors.New("netlink: operation not permitted")
}
func (failingWatcher) Current() (string, int) { return "", 0 }

// TestWatcherFails: a watcher that fails ends Run with its error, within the send grace even
// while the receiver is down (the DaemonSet restarts the container).
func TestWatcherFails(t *testing.T) {
	r := newReceiver(t)
	r.set(http.StatusServiceUnavailable, nil)
	a, err := New(Config{Node: "node-a", Endpoint: r.URL, ShutdownGrace: 200 * time.Millisecond}, failingWatcher{})
	if err != nil {
		t.Fatal(err)
	}
	a.changes([]dataplane.Change{change(true, "10.0.0.1", 80)})
	done := make(chan error, 1)
	go func() { done <- a.Run(context.Background()) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "operation not permitted") {
			t.Errorf("Run: %v, want the watcher's error", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after the watcher failed")
	}
}
