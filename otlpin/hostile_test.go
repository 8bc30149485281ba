package otlpin

// Each test here is one of the probes an attacker, or a broken sender, ran against the input:
// what it sends, and the bound that must hold.

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	rtmetrics "runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	gzipcodec "google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/readyspan/readyspan/access"
	"github.com/readyspan/readyspan/phases"
)

// peakHeap samples the heap's objects (live and not yet collected) while f runs and returns
// the most it saw above what it was before.
func peakHeap(t *testing.T, f func()) uint64 {
	t.Helper()
	runtime.GC()
	sample := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { rtmetrics.Read(sample); return sample[0].Value.Uint64() }
	base := read()
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			if v := read(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	f()
	close(done)
	wg.Wait()
	if p := peak.Load(); p > base {
		return p - base
	}
	return 0
}

// liveHeap is the heap's live objects after a full collection.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// bomb is a gzip body of a few KB that expands to n bytes.
func bomb(t *testing.T, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if _, err := zw.Write(make([]byte, n)); err != nil {
		t.Fatal(err)
	}
	zw.Close()
	return buf.Bytes()
}

// Gzip bombs, 50 at a time: each is refused, and what they cost together stays near the
// in-flight bound instead of 16 MiB each.
func TestGzipBombsBounded(t *testing.T) {
	s := NewStore(time.Minute, 0, nil)
	r, err := Listen(Config{Addr: "127.0.0.1:0"}, s, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Shutdown(context.Background())
	body := bomb(t, 20<<20)
	t.Logf("a %d-byte body expanding to 20 MiB", len(body))
	codes := map[int]int{}
	var mu sync.Mutex
	peak := peakHeap(t, func() {
		var wg sync.WaitGroup
		for i := 0; i < 100; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequest(http.MethodPost, "http://"+r.Addr().String()+"/v1/traces", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/x-protobuf")
				req.Header.Set("Content-Encoding", "gzip")
				resp, err := http.DefaultClient.Do(req)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					codes[0]++
					return
				}
				resp.Body.Close()
				codes[resp.StatusCode]++
			}()
			if i%50 == 49 {
				wg.Wait()
			}
		}
	})
	t.Logf("answers %v; peak heap +%d MiB", codes, peak>>20)
	if codes[http.StatusOK] > 0 || codes[http.StatusRequestEntityTooLarge]+codes[http.StatusTooManyRequests] != 100 {
		t.Errorf("answers %v, want every bomb refused (413, or 429 while the bound is spent)", codes)
	}
	if peak > 3*DefaultInflightBytes {
		t.Errorf("the bombs took %d MiB of heap at once; the in-flight bound is %d MiB", peak>>20, DefaultInflightBytes>>20)
	}
}

// Senders that stall: 30 that send most of a 15 MiB body and stop, 100 that send a header
// byte every half second. Their bodies cost what the in-flight bound allows, and every
// connection is closed once the read timeouts pass.
func TestStalledSendersClosed(t *testing.T) {
	defer func(h, r time.Duration) { readHeaderTimeout, readTimeout = h, r }(readHeaderTimeout, readTimeout)
	readHeaderTimeout, readTimeout = time.Second, 2*time.Second
	s := NewStore(time.Minute, 0, nil)
	r, err := Listen(Config{Addr: "127.0.0.1:0"}, s, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Shutdown(context.Background())
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	chunk := make([]byte, 1<<20)
	peak := peakHeap(t, func() {
		for i := 0; i < 30; i++ {
			c, err := net.Dial("tcp", r.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
			fmt.Fprintf(c, "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: %d\r\n\r\n", 16<<20)
			go func() {
				for j := 0; j < 15; j++ {
					if _, err := c.Write(chunk); err != nil {
						return
					}
				}
			}()
		}
		for i := 0; i < 100; i++ {
			c, err := net.Dial("tcp", r.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
			go func() {
				for _, b := range []byte("POST /v1/traces HTTP/1.1\r\nHost: x\r\n") {
					if _, err := c.Write([]byte{b}); err != nil {
						return
					}
					time.Sleep(500 * time.Millisecond)
				}
			}()
		}
		time.Sleep(time.Second)
	})
	t.Logf("peak heap +%d MiB with 30 stalled 15 MiB bodies and 100 slow headers", peak>>20)
	if peak > 3*DefaultInflightBytes {
		t.Errorf("stalled bodies took %d MiB of heap at once; the in-flight bound is %d MiB", peak>>20, DefaultInflightBytes>>20)
	}
	deadline := time.Now().Add(readTimeout + 3*time.Second)
	open := 0
	for _, c := range conns {
		c.SetReadDeadline(deadline)
		_, err := io.Copy(io.Discard, c)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			open++
		}
	}
	if open > 0 {
		t.Errorf("%d of %d stalled connections still open %s after the read timeout", open, len(conns), 3*time.Second)
	}
}

// feed files n spans made by mk, in requests of 512.
func feed(s *Store, n int, mk func(i int) phases.ComponentSpan) {
	batch := make([]phases.ComponentSpan, 0, 512)
	for i := 0; i < n; i++ {
		batch = append(batch, mk(i))
		if len(batch) == cap(batch) || i == n-1 {
			s.Add(batch)
			batch = batch[:0]
		}
	}
}

func traceID(i int) phases.TraceID {
	var id phases.TraceID
	binary.BigEndian.PutUint64(id[8:], uint64(i)+1)
	id[0] = 0xaa
	return id
}

func spanID(i int) phases.SpanID {
	var id phases.SpanID
	binary.BigEndian.PutUint64(id[:], uint64(i)+1)
	return id
}

// What the store counts (readyspan_otlp_held_bytes, bounded by --otlp-receive-max-mib) is what
// holding costs in heap, within 0.8–1.25×, for every shape of input: the real capture, a
// flood of traces that concern no Pod, spans of ever new keys and values, undecided children
// whose roots never come, traces naming another Pod in every span.
func TestHeldBytesMatchHeap(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	const bound = 16 << 20
	for _, tc := range []struct {
		name string
		fill func(s *Store)
	}{
		{"real capture", func(s *Store) { receive(t, s, readCapture(t, "testdata/capture-chain/components.otlp.gz")) }},
		{"unrelated roots", func(s *Store) {
			feed(s, 400_000, func(i int) phases.ComponentSpan {
				return phases.ComponentSpan{Service: phases.ServiceAPIServer, TraceID: traceID(i), SpanID: spanID(1), Name: "PUT /apis/coordination.k8s.io/v1/namespaces/{:namespace}/leases/{:name}",
					Start: t0, End: t0, Attrs: []phases.Attr{{Key: attrHTTPMethod, Value: "PUT"}}}
			})
		}},
		{"unique keys and values", func(s *Store) {
			feed(s, 40_000, func(i int) phases.ComponentSpan {
				sp := phases.ComponentSpan{Service: phases.ServiceKubelet, TraceID: traceID(i), SpanID: spanID(1), Parent: spanID(0), Name: "syncPod", Start: t0, End: t0,
					Attrs: []phases.Attr{{Key: phases.AttrPodUID, Value: fmt.Sprintf("%036d", i)}}}
				for a := 0; a < maxAttrs-1; a++ {
					sp.Attrs = append(sp.Attrs, phases.Attr{Key: fmt.Sprintf("%0128d", i*maxAttrs+a), Value: fmt.Sprintf("%048d", i*maxAttrs+a)})
				}
				return sp
			})
		}},
		{"undecided children", func(s *Store) {
			feed(s, 300_000, func(i int) phases.ComponentSpan {
				return phases.ComponentSpan{Service: phases.ServiceContainerd, TraceID: traceID(i), SpanID: spanID(2), Parent: spanID(1), Name: "runtime.v1.RuntimeService/RunPodSandbox", Start: t0, End: t0}
			})
		}},
		{"a Pod in every span", func(s *Store) {
			feed(s, 200_000, func(i int) phases.ComponentSpan {
				return phases.ComponentSpan{Service: phases.ServiceKubelet, TraceID: traceID(i / 4), SpanID: spanID(i), Parent: spanID(0), Name: "syncPod", Start: t0, End: t0,
					Attrs: []phases.Attr{{Key: phases.AttrPodUID, Value: fmt.Sprintf("uid-%d", i)}}}
			})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := liveHeap()
			s := NewStore(time.Hour, bound, nil)
			s.now = func() time.Time { return t0 }
			tc.fill(s)
			live := liveHeap() - before
			spans, held := s.Held()
			runtime.KeepAlive(s)
			ratio := float64(live) / float64(held)
			t.Logf("%d spans held, %d KiB counted, %d KiB of heap (%.2f×)", spans, held>>10, live>>10, ratio)
			if held > bound {
				t.Errorf("%d bytes counted, past the bound of %d", held, bound)
			}
			if ratio < 0.8 || ratio > 1.25 {
				t.Errorf("the store took %d KiB of heap and counts %d KiB (%.2f×): what it counts no longer says what it holds", live>>10, held>>10, ratio)
			}
		})
	}
}

// A request of 400,000 spans that each name another Pod: filed in linear time, in chunks, so
// the join stage asking the store meanwhile waits a chunk at most; the trace names too many
// Pods to place and is dropped.
func TestLargeRequestShortLocks(t *testing.T) {
	s := NewStore(time.Hour, 256<<20, nil)
	t0 := time.Now()
	spans := make([]phases.ComponentSpan, 400_000)
	for i := range spans {
		spans[i] = phases.ComponentSpan{Service: phases.ServiceKubelet, TraceID: traceID(1), SpanID: spanID(i), Parent: spanID(0), Name: "syncPod", Start: t0, End: t0,
			Attrs: []phases.Attr{{Key: phases.AttrPodUID, Value: fmt.Sprintf("uid-%d", i)}}}
	}
	done := make(chan struct{})
	var longest time.Duration
	var asked int
	go func() {
		defer close(done)
		s.Add(spans)
	}()
	for stop := false; !stop; {
		select {
		case <-done:
			stop = true
		default:
			start := time.Now()
			s.Present(Query{UID: "uid-7", Node: "n"})
			longest = max(longest, time.Since(start))
			asked++
			time.Sleep(100 * time.Microsecond)
		}
	}
	took := time.Since(t0)
	t.Logf("400,000 spans filed in %s; the longest of %d concurrent queries waited %s", took.Round(time.Millisecond), asked, longest.Round(time.Microsecond))
	if longest > 200*time.Millisecond {
		t.Errorf("a query waited %s while one request was filed: the store's lock is held for the whole request", longest)
	}
	if n, _ := s.Held(); n != 0 {
		t.Errorf("%d spans held of a trace that names 400,000 Pods, want it dropped", n)
	}
}

// A sender's readyspan.* attributes are dropped at the door: readyspan's namespace is its own.
func TestDecodeDropsReservedAttributes(t *testing.T) {
	got := Decode(request("kubelet", span(1, 1, 0, "syncPod", "readyspan.time.source.start", "audit",
		"readyspan.component.span_name", "forged", "k8s.pod.uid", "u")))
	if len(got) != 1 {
		t.Fatalf("%d spans", len(got))
	}
	for _, a := range got[0].Attrs {
		if strings.HasPrefix(a.Key, "readyspan.") {
			t.Errorf("a sender's %s=%v kept", a.Key, a.Value)
		}
	}
	if got[0].Attr("k8s.pod.uid") != "u" {
		t.Errorf("the sender's own attributes lost: %v", got[0].Attrs)
	}
}

// apiserverFor answers TokenReviews and SubjectAccessReviews as an apiserver would for three
// senders: a Collector DaemonSet's node-bound token on node-a, the apiserver's own Collector
// (granted create-apiserver), and a gateway granted create-any-node.
func apiserverFor() *fake.Clientset {
	c := fake.NewClientset()
	type who struct {
		user, node string
		verbs      []string
	}
	tokens := map[string]who{
		"node-a":    {"system:serviceaccount:observability:collector", "node-a", []string{VerbSend}},
		"apiserver": {"system:serviceaccount:kube-system:apiserver-collector", "", []string{VerbSend, VerbAPIServer}},
		"gateway":   {"system:serviceaccount:observability:gateway", "", []string{VerbSend, VerbAnyNode}},
		"nobody":    {"system:serviceaccount:default:default", "", nil},
	}
	users := map[string]who{}
	for _, w := range tokens {
		users[w.user] = w
	}
	c.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		tr := a.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview).DeepCopy()
		if w, ok := tokens[tr.Spec.Token]; ok {
			u := authnv1.UserInfo{Username: w.user, Groups: []string{"system:authenticated"}}
			if w.node != "" {
				u.Extra = map[string]authnv1.ExtraValue{access.NodeNameExtra: {w.node}}
			}
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: u}
		}
		return true, tr, nil
	})
	c.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authzv1.SubjectAccessReview).DeepCopy()
		na := sar.Spec.NonResourceAttributes
		for _, v := range users[sar.Spec.User].verbs {
			sar.Status.Allowed = sar.Status.Allowed || na != nil && na.Path == AccessPath && na.Verb == v
		}
		return true, sar, nil
	})
	return c
}

// Who may write what: on an address that is not loopback senders authenticate; a node-bound
// sender's kubelet and containerd spans join only the Pods on its node, apiserver spans only
// from a sender granted create-apiserver; what is refused is counted.
func TestSenderAuthority(t *testing.T) {
	if _, err := Listen(Config{Addr: "0.0.0.0:0"}, NewStore(0, 0, nil), nil, nil); err == nil || !strings.Contains(err.Error(), "--otlp-receive-insecure") {
		t.Errorf("an address that is not loopback, without a way to check tokens: %v, want a refusal naming --otlp-receive-insecure", err)
	}
	certFile, keyFile, pool := writeCert(t)
	s := NewStore(time.Hour, 0, nil)
	r, err := Listen(Config{Addr: "0.0.0.0:0", CertFile: certFile, KeyFile: keyFile}, s, apiserverFor(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Shutdown(context.Background())
	_, port, _ := net.SplitHostPort(r.Addr().String())
	addr := net.JoinHostPort("127.0.0.1", port)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	send := func(token string, body []byte) int {
		req, _ := http.NewRequest(http.MethodPost, "https://"+addr+"/v1/traces", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/x-protobuf")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// The kubelet's syncPod of Pod uid-b (on node-b), and of uid-a (on node-a), each sent by
	// node-a's Collector; the same trace of uid-b sent by the gateway.
	sync := func(trace byte, uid string) []byte {
		return marshal(t, request("kubelet", span(trace, 1, 0, "syncPod", "k8s.pod.uid", uid)))
	}
	for _, c := range []struct {
		token string
		body  []byte
		want  int
	}{
		{"", sync(1, "uid-a"), http.StatusUnauthorized},
		{"nobody", sync(1, "uid-a"), http.StatusForbidden},
		{"node-a", sync(1, "uid-a"), http.StatusOK},
		{"node-a", sync(2, "uid-b"), http.StatusOK}, // accepted, and never joined to uid-b on node-b
		{"node-a", marshal(t, podCreate(3, "ns", "web-a")), http.StatusOK},
		{"apiserver", marshal(t, podCreate(4, "ns", "web-b")), http.StatusOK},
		{"apiserver", sync(5, "uid-c"), http.StatusOK},
		{"gateway", sync(6, "uid-c"), http.StatusOK},
	} {
		if got := send(c.token, c.body); got != c.want {
			t.Errorf("token %q: %d, want %d", c.token, got, c.want)
		}
	}
	if got := s.Take(Query{UID: "uid-a", Node: "node-a"}); len(got) != 1 {
		t.Errorf("node-a's own Pod: %d traces joined, want its syncPod", len(got))
	}
	if got := s.Take(Query{UID: "uid-b", Node: "node-b"}); len(got) != 0 {
		t.Errorf("node-a's spans for a Pod on node-b joined: %v", got)
	}
	if got := s.Take(Query{Namespace: "ns", Name: "web-a", From: time.Unix(0, 0), To: time.Now().Add(24 * 365 * time.Hour)}); len(got) != 0 {
		t.Errorf("apiserver spans from a node's Collector joined: %v", got)
	}
	if got := s.Take(Query{Namespace: "ns", Name: "web-b", From: time.Unix(0, 0), To: time.Now().Add(24 * 365 * time.Hour)}); len(got) != 1 {
		t.Errorf("the apiserver's Collector's request: %d joined, want 1", len(got))
	}
	if got := s.Take(Query{UID: "uid-c", Node: "node-c"}); len(got) != 1 {
		t.Errorf("uid-c: %d traces joined, want the gateway's only", len(got))
	}
	for _, c := range []struct {
		component string
		want      float64
	}{{phases.ServiceKubelet, 2}, {phases.ServiceAPIServer, 3}} {
		if got := testutil.ToFloat64(s.m.drop.WithLabelValues(c.component, ReasonForbidden)); got != c.want {
			t.Errorf("%s spans dropped as forbidden: %v, want %v", c.component, got, c.want)
		}
	}
}

func marshal(t *testing.T, req *collectortrace.ExportTraceServiceRequest) []byte {
	t.Helper()
	b, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Past the in-flight bound both transports answer with the OTLP specification's retryable
// refusal: gRPC RESOURCE_EXHAUSTED carrying a RetryInfo delay (read here by a real gRPC
// client), HTTP 429 with Retry-After. Once the bound frees, the same request is taken.
func TestBusyIsRetryable(t *testing.T) {
	s := NewStore(time.Minute, 0, nil)
	r, err := Listen(Config{Addr: "127.0.0.1:0", MaxInflightBytes: 2 * chunkCharge}, s, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Shutdown(context.Background())
	// A sender that states a large body and stalls holds the bound.
	stall, err := net.Dial("tcp", r.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(stall, "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: %d\r\n\r\n", 300<<10)
	time.Sleep(200 * time.Millisecond)

	conn, err := grpc.NewClient(r.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = collectortrace.NewTraceServiceClient(conn).Export(ctx, podCreate(1, "ns", "a"), grpc.UseCompressor(gzipcodec.Name))
	st := status.Convert(err)
	var delay time.Duration
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			delay = ri.GetRetryDelay().AsDuration()
		}
	}
	if st.Code() != codes.ResourceExhausted || delay <= 0 {
		t.Errorf("gRPC past the bound: %v, retry delay %v; want RESOURCE_EXHAUSTED with a delay", err, delay)
	}
	resp, err := http.Post("http://"+r.Addr().String()+"/v1/traces", "application/x-protobuf", bytes.NewReader(marshal(t, podCreate(2, "ns", "b"))))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Errorf("HTTP past the bound: %s, Retry-After %q; want 429 with a delay", resp.Status, resp.Header.Get("Retry-After"))
	}
	if n := testutil.ToFloat64(s.m.refuse.WithLabelValues(refusedBusy)); n != 2 {
		t.Errorf("%v refusals counted as busy, want 2", n)
	}
	stall.Close()
	time.Sleep(200 * time.Millisecond)
	if _, err := collectortrace.NewTraceServiceClient(conn).Export(ctx, podCreate(1, "ns", "a")); err != nil {
		t.Errorf("once the bound is free: %v", err)
	}
	if n, _ := s.Held(); n != 3 {
		t.Errorf("%d spans held, want the retried request's 3", n)
	}
}

// A request larger than the in-flight bound could ever admit is refused as too large (413,
// not retried), not told to retry forever.
func TestTooLargeForTheBound(t *testing.T) {
	s := NewStore(time.Minute, 0, nil)
	r, err := Listen(Config{Addr: "127.0.0.1:0", MaxInflightBytes: 32 << 20}, s, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Shutdown(context.Background())
	for _, c := range []struct {
		size int
		gz   bool
		want int
	}{{12 << 20, false, http.StatusRequestEntityTooLarge}, {12 << 20, true, http.StatusRequestEntityTooLarge}, {8 << 20, false, http.StatusBadRequest}} {
		body := make([]byte, c.size)
		if c.gz {
			body = bomb(t, c.size)
		}
		req, _ := http.NewRequest(http.MethodPost, "http://"+r.Addr().String()+"/v1/traces", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/x-protobuf")
		if c.gz {
			req.Header.Set("Content-Encoding", "gzip")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%d MiB (gzip %v) with a 32 MiB bound: %s, want %d", c.size>>20, c.gz, resp.Status, c.want)
		}
	}
}

// One authenticated sender's flood takes at most half of each bound: the spans another sender
// sent for a starting Pod stay held, and its requests are still admitted.
func TestSenderFloodLeavesRoom(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	s := NewStore(time.Hour, 4<<20, nil)
	s.now = func() time.Time { return t0 }
	genuine := s.Request(Sender{Name: "collector", AnyNode: true})
	genuine.Add([]phases.ComponentSpan{{Service: phases.ServiceKubelet, TraceID: traceID(-1), SpanID: spanID(1), Name: "syncPod", Start: t0, End: t0,
		Attrs: []phases.Attr{{Key: phases.AttrPodUID, Value: "real-pod"}}}})
	genuine.End()
	// Ever new Pods, then ever new keys and values: the strings a sender brings are its own.
	for r := 0; r < 300; r++ {
		flood := s.Request(Sender{Name: "attacker", Node: "kwok-1"})
		var spans []phases.ComponentSpan
		for i := r * 256; i < (r+1)*256; i++ {
			sp := phases.ComponentSpan{Service: phases.ServiceKubelet, TraceID: traceID(i), SpanID: spanID(1), Name: "syncPod", Start: t0, End: t0,
				Attrs: []phases.Attr{{Key: phases.AttrPodUID, Value: fmt.Sprintf("fake-%d", i)}}}
			if r >= 200 {
				sp.Attrs = append(sp.Attrs, phases.Attr{Key: fmt.Sprintf("%0128d", i), Value: fmt.Sprintf("%048d", i)})
			}
			spans = append(spans, sp)
		}
		flood.Add(spans)
		flood.End()
	}
	if _, held := s.Held(); held > 4<<20 {
		t.Errorf("%d bytes held, past the bound", held)
	}
	if got := s.Take(Query{UID: "real-pod", Node: "node-a"}); len(got) != 1 {
		t.Errorf("the genuine sender's syncPod: %d traces left after another sender's flood, want 1", len(got))
	}

	b := &budget{max: 8 << 20}
	flood := &charge{b: b, sender: "attacker"}
	for flood.take(readStep) {
	}
	if flood.n > b.max/2 {
		t.Errorf("one sender took %d of %d in flight", flood.n, b.max)
	}
	if c := (&charge{b: b, sender: "collector"}); !c.take(chunkCharge) {
		t.Error("another sender's request refused while one sender floods")
	}
}
