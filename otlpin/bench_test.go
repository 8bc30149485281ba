package otlpin

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// BenchmarkReceiveCapture decodes and files every request of the real capture (40 Pods'
// startups: 14,000 or so spans from the apiserver, kubelet and containerd), as the receiver
// does after gRPC has unmarshalled a request; ns/span is the receiver's CPU per span, held-B
// what the store holds afterwards (the Pods' spans, none taken).
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
		for _, r := range raw {
			var req collectortrace.ExportTraceServiceRequest
			if err := proto.Unmarshal(r, &req); err != nil {
				b.Fatal(err)
			}
			s.Add(Decode(&req))
		}
		_, held = s.Held()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*spans), "ns/span")
	b.ReportMetric(float64(spans), "spans")
	b.ReportMetric(float64(held), "held-B")
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
