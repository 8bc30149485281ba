package otlp

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/readyspan/readyspan/phases"
)

// backend is a fake OTLP backend that can be down, slow or erroring, and records every trace
// it accepted and every attempt it saw.
type backend struct {
	mu       sync.Mutex
	down     bool          // refuse every request
	failNext int           // refuse the next n requests
	delay    time.Duration // per request
	attempts []time.Time
	got      map[string]int // trace ID → root spans accepted
	order    []string       // trace IDs in the order accepted
}

func (b *backend) Start(context.Context) error { return nil }
func (b *backend) Stop(context.Context) error  { return nil }

func (b *backend) setDown(down bool) { b.mu.Lock(); b.down = down; b.mu.Unlock() }

func (b *backend) UploadTraces(ctx context.Context, rs []*tracepb.ResourceSpans) error {
	b.mu.Lock()
	b.attempts = append(b.attempts, time.Now())
	delay := b.delay
	b.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.down {
		return errors.New("rpc error: code = Unavailable desc = connection refused")
	}
	if b.failNext > 0 {
		b.failNext--
		return errors.New("rpc error: code = ResourceExhausted desc = try later")
	}
	if b.got == nil {
		b.got = map[string]int{}
	}
	for _, s := range flatten(rs) {
		if len(s.ParentSpanId) == 0 {
			id := hex.EncodeToString(s.TraceId)
			b.got[id]++
			b.order = append(b.order, id)
		}
	}
	return nil
}

func (b *backend) accepted() (map[string]int, []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	got := map[string]int{}
	for k, v := range b.got {
		got[k] = v
	}
	return got, append([]string(nil), b.order...)
}

// uidN is the n-th test Pod's UID; its trace ID is the UID without dashes.
func uidN(n int) string   { return fmt.Sprintf("00000000-0000-0000-0000-%012d", n+1) }
func traceN(n int) string { return fmt.Sprintf("00000000000000000000%012d", n+1) }

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Within the bound, a backend that is down for a while loses nothing: every trace arrives once
// when it is back, the export errors are counted, and Status shows the trouble meanwhile.
func TestBackendDownWithinBound(t *testing.T) {
	b := &backend{down: true}
	st := &counts{}
	e := NewWithClient(b, Config{QueueTraces: 100, InitialBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond}, st, nil)
	e.Start(context.Background())
	for i := range 100 {
		e.Export(testTrace(uidN(i)))
	}
	waitFor(t, "the export to fail a few times", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.attempts) >= 5
	})
	s := e.Status()
	if s.FailingSince.IsZero() || s.Traces != 100 || s.Bytes <= 0 || s.LastError == "" {
		t.Fatalf("status while down: %+v, want failing with 100 traces queued", s)
	}
	b.setDown(false)
	if err := e.Shutdown(ctxTimeout(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	got, _ := b.accepted()
	for i := range 100 {
		if got[traceN(i)] != 1 {
			t.Errorf("trace %d arrived %d times, want 1", i, got[traceN(i)])
		}
	}
	if st.exported != 100 || len(st.dropped) != 0 || st.errors < 5 {
		t.Fatalf("exported %d, dropped %v, errors %d: want 100, none, ≥5", st.exported, st.dropped, st.errors)
	}
	if s := e.Status(); !s.FailingSince.IsZero() || s.Traces != 0 || s.Bytes != 0 {
		t.Fatalf("status after recovery: %+v", s)
	}
}

// Beyond the bound, by count or by bytes, the oldest traces are dropped first and each is
// counted once as export_failed; the newest arrive when the backend is back.
func TestBackendDownBeyondBound(t *testing.T) {
	oneTrace := queueBytes(testTrace(uidN(0)).Spans)
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"by count", Config{QueueTraces: 5}},
		{"by bytes", Config{QueueBytes: 5*oneTrace + oneTrace/2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &backend{down: true}
			st := &counts{}
			// A long backoff: after the first failure the queue sits still, so which traces
			// are dropped is exact.
			tc.cfg.InitialBackoff, tc.cfg.MaxBackoff = time.Hour, time.Hour
			e := NewWithClient(b, tc.cfg, st, nil)
			e.Start(context.Background())
			e.Export(testTrace(uidN(0)))
			waitFor(t, "the first failure", func() bool { return !e.Status().FailingSince.IsZero() })
			for i := 1; i < 12; i++ {
				e.Export(testTrace(uidN(i)))
			}
			if s := e.Status(); s.Traces != 5 || s.Bytes != 5*oneTrace {
				t.Fatalf("queued %d traces, %d bytes; want 5 and %d", s.Traces, s.Bytes, 5*oneTrace)
			}
			b.setDown(false)
			if err := e.Shutdown(ctxTimeout(t, 10*time.Second)); err != nil { // Shutdown flushes at once
				t.Fatal(err)
			}
			_, order := b.accepted()
			want := []string{traceN(7), traceN(8), traceN(9), traceN(10), traceN(11)}
			if fmt.Sprint(order) != fmt.Sprint(want) {
				t.Fatalf("backend got %v, want the newest five %v", order, want)
			}
			if st.exported != 5 || st.dropped[DropExportFailed] != 7 || len(st.dropped) != 1 {
				t.Fatalf("exported %d, dropped %v: want 5 and export_failed 7", st.exported, st.dropped)
			}
		})
	}
}

// A backend that answers errors is retried with exponential backoff until it accepts, and
// each error is counted.
func TestBackendErrorsBackoff(t *testing.T) {
	b := &backend{failNext: 5}
	st := &counts{}
	e := NewWithClient(b, Config{InitialBackoff: 10 * time.Millisecond, MaxBackoff: 80 * time.Millisecond}, st, nil)
	e.Start(context.Background())
	e.Export(testTrace(uidN(1)))
	waitFor(t, "the trace to arrive", func() bool { got, _ := b.accepted(); return got[traceN(1)] == 1 })
	if err := e.Shutdown(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if st.errors != 5 || st.exported != 1 || len(st.dropped) != 0 {
		t.Fatalf("errors %d, exported %d, dropped %v: want 5, 1, none", st.errors, st.exported, st.dropped)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	wantGap := []time.Duration{10, 20, 40, 80, 80}
	for i := 1; i < len(b.attempts); i++ {
		if gap := b.attempts[i].Sub(b.attempts[i-1]); gap < wantGap[i-1]*time.Millisecond {
			t.Errorf("retry %d after %v, want at least %v", i, gap, wantGap[i-1]*time.Millisecond)
		}
	}
}

// A backend that takes 5 s per request: the watch never waits (Export returns at once), traces
// queue meanwhile and all arrive, in batches, once each.
func TestBackendSlow(t *testing.T) {
	if testing.Short() {
		t.Skip("takes 10 s")
	}
	t.Parallel()
	b := &backend{delay: 5 * time.Second}
	st := &counts{}
	e := NewWithClient(b, Config{}, st, nil)
	e.Start(context.Background())
	start := time.Now()
	for i := range 100 {
		e.Export(testTrace(uidN(i)))
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Export blocked for %v", d)
	}
	if err := e.Shutdown(ctxTimeout(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	got, _ := b.accepted()
	if len(got) != 100 || st.exported != 100 || len(st.dropped) != 0 || st.errors != 0 {
		t.Fatalf("backend got %d traces, exported %d, dropped %v, errors %d", len(got), st.exported, st.dropped, st.errors)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.attempts) > 3 {
		t.Fatalf("%d requests for 100 traces: batches not used", len(b.attempts))
	}
}

// Shutdown's deadline counts what is still queued as dropped (shutdown): never a silent loss.
func TestShutdownCountsWhatIsLeft(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start bool
	}{{"started", true}, {"never started", false}} {
		t.Run(tc.name, func(t *testing.T) {
			b := &backend{down: true}
			st := &counts{}
			e := NewWithClient(b, Config{InitialBackoff: time.Hour}, st, nil)
			if tc.start {
				e.Start(context.Background())
			}
			for i := range 3 {
				e.Export(testTrace(uidN(i)))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			err := e.Shutdown(ctx)
			if tc.start && err == nil {
				t.Fatal("Shutdown did not report the unflushed traces")
			}
			e.Export(testTrace(uidN(9)))
			if st.dropped[DropShutdown] != 4 || st.exported != 0 {
				t.Fatalf("dropped %v, exported %d: want shutdown 4", st.dropped, st.exported)
			}
			if err := e.Shutdown(context.Background()); err != nil {
				t.Fatal("second Shutdown:", err)
			}
		})
	}
}

// A burst faster than a healthy backend takes it is dropped oldest first as queue_full.
func TestQueueFullWhileHealthy(t *testing.T) {
	st := &counts{}
	e := NewWithClient(&backend{}, Config{QueueTraces: 2}, st, nil)
	for i := range 5 { // not started: nothing drains the queue
		e.Export(testTrace(uidN(i)))
	}
	if st.dropped[DropQueueFull] != 3 || e.Status().Traces != 2 {
		t.Fatalf("dropped %v, queued %d: want queue_full 3, 2 queued", st.dropped, e.Status().Traces)
	}
}

// TestQueueCostMeasured states what one queued trace costs, the basis of the default bounds:
// the byte estimate the bound counts and the heap a queued trace holds (the Pod trace of
// testTrace, a bare Pod; a Deployment Pod with one container has ~1.5× its spans).
func TestQueueCostMeasured(t *testing.T) {
	const n = 2000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	traces := make([]*phases.Trace, n)
	for i := range traces {
		traces[i] = testTrace(uidN(i))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap := float64(after.HeapAlloc-before.HeapAlloc) / n
	est := queueBytes(traces[0].Spans)
	t.Logf("one trace: %d spans, %d estimated OTLP bytes, %.0f heap bytes", len(traces[0].Spans), est, heap)
	// The default bounds hold if heap per estimated byte stays under 3: 40 MB of estimate, ≤120 MiB.
	if ratio := heap / float64(est); ratio > 3 {
		t.Errorf("heap per estimated byte %.1f: DefaultQueueBytes no longer bounds memory as documented", ratio)
	}
	runtime.KeepAlive(traces)
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Traces that come within linger of each other share a request, and a trace alone goes out
// once it has lingered, without waiting for company.
func TestTracesLingerForABatch(t *testing.T) {
	b := &backend{}
	e := NewWithClient(b, Config{}, &counts{}, nil)
	e.Start(context.Background())
	start := time.Now()
	for i := 0; i < 5; i++ {
		e.Export(testTrace(fmt.Sprintf("9cade20b-81ea-4be9-bdc9-d3f2d8d8b6%02d", i)))
	}
	waitFor(t, "the first request", func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.attempts) >= 1 })
	alone := time.Now()
	e.Export(testTrace("9cade20b-81ea-4be9-bdc9-d3f2d8d8b699"))
	waitFor(t, "the lone trace's request", func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.attempts) >= 2 })
	if err := e.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.attempts) != 2 {
		t.Fatalf("%d requests for 5 traces queued together and one after, want 2", len(b.attempts))
	}
	if waited := b.attempts[0].Sub(start); waited < linger {
		t.Errorf("the first request went out after %s, before the %s linger", waited, linger)
	}
	if waited := b.attempts[1].Sub(alone); waited < linger {
		t.Errorf("the lone trace went out after %s, before the %s linger", waited, linger)
	}
}
