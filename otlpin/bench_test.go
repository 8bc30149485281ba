package otlpin

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"runtime"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// BenchmarkReceiveCapture decodes and files every request of the real capture (40 Pods'
// startups: 14,000 or so spans from the apiserver, kubelet and containerd), as the receiver
// does once a request's message is read; ns/span is the receiver's CPU per span, held-B what
// the store holds afterwards (the Pods' spans, none taken).
func BenchmarkReceiveCapture(b *testing.B) {
	raw := readCapture(b, "testdata/capture-chain/components.otlp.gz")
	spans := 0
	for _, r := range raw {
		var req collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(r, &req); err != nil {
			b.Fatal(err)
		}
		spans += len(Decode(&req))
	}
	b.ReportAllocs()
	b.ResetTimer()
	var held int64
	for i := 0; i < b.N; i++ {
		s := NewStore(time.Hour, 0, nil)
		receive(b, s, raw)
		_, held = s.Held()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*spans), "ns/span")
	b.ReportMetric(float64(spans), "spans")
	b.ReportMetric(float64(held), "held-B")
}

// receive does what the receiver does with each request's message once read: decode it from
// the wire and file it, a chunk at a time.
func receive(tb testing.TB, s *Store, raw [][]byte) {
	for _, b := range raw {
		r := s.Request(Trusted)
		if err := DecodeMessage(b, r.Add); err != nil {
			tb.Fatal(err)
		}
		r.End()
	}
}

func readCapture(tb testing.TB, path string) [][]byte {
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		tb.Fatal(err)
	}
	br := bufio.NewReader(zr)
	var out [][]byte
	for {
		n, err := binary.ReadUvarint(br)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			tb.Fatal(err)
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(br, b); err != nil {
			tb.Fatal(err)
		}
		out = append(out, b)
	}
}

// TestSpanBytesEstimate holds the real capture's spans and compares the live heap they take
// with what the store counts (readyspan_otlp_held_bytes, bounded by --otlp-receive-max-mib):
// the bound is in MiB of memory, so the estimate must stay near what holding really costs.
// It fails when a change to what is held (a field, interning, the indexes) moves the cost.
func TestSpanBytesEstimate(t *testing.T) {
	raw := readCapture(t, "testdata/capture-chain/components.otlp.gz")
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc
	s := NewStore(time.Hour, 0, nil)
	receive(t, s, raw)
	runtime.GC()
	runtime.ReadMemStats(&ms)
	live := float64(ms.HeapAlloc) - float64(before)
	spans, est := s.Held()
	runtime.KeepAlive(s)
	runtime.KeepAlive(raw) // freed between the two readings, it would hide the store's growth
	if spans < 1000 {
		t.Fatalf("%d spans held, want the capture's thousands", spans)
	}
	ratio := live / float64(est)
	t.Logf("%d spans held: estimated %.0f B each, live heap %.0f B each (%.2f×)", spans, float64(est)/float64(spans), live/float64(spans), ratio)
	if ratio < 0.8 || ratio > 1.25 {
		t.Errorf("holding %d spans took %.0f bytes of heap, the store counts %d (%.2f×): spanBytes no longer says what a held span costs", spans, live, est, ratio)
	}
}
