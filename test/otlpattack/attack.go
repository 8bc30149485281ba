// Package otlpattack is what a hostile or broken sender does to an OTLP input: gzip bombs,
// bodies that stall, headers sent a byte at a time, floods of spans that concern no Pod, of ever
// new keys and values, of Pods named in every span, and spans forged for another node's Pod. The
// fault suite (test/e2e) runs it against the in-cluster readyspan; test/scale/otlpattack runs it
// against any address and reports what the target's memory did.
package otlpattack

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Target is an OTLP/HTTP input: its base URL (http:// or https://host:port), the bearer token
// sent (none when empty), and the TLS configuration for https (verification is the caller's
// choice: a test against a self-signed certificate skips it).
type Target struct {
	URL   string
	Token string
	TLS   *tls.Config
}

// Answers counts the HTTP status codes received (0: no answer).
type Answers map[int]int

func (a Answers) String() string { return fmt.Sprint(map[int]int(a)) }

func (t Target) client() *http.Client {
	return &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: t.TLS, MaxIdleConnsPerHost: 64}}
}

// Post sends one OTLP/HTTP request and returns its status code (0 on a transport error).
func (t Target) Post(ctx context.Context, c *http.Client, body []byte, gz bool) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL+"/v1/traces", bytes.NewReader(body))
	if err != nil {
		return 0
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if gz {
		req.Header.Set("Content-Encoding", "gzip")
	}
	if t.Token != "" {
		req.Header.Set("Authorization", "Bearer "+t.Token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// parallel sends n bodies, at most conc at a time.
func (t Target) parallel(ctx context.Context, n, conc int, body func(i int) ([]byte, bool)) Answers {
	c := t.client()
	out := Answers{}
	var mu sync.Mutex
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	for i := 0; i < n && ctx.Err() == nil; i++ {
		b, gz := body(i)
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			code := t.Post(ctx, c, b, gz)
			<-sem
			mu.Lock()
			out[code]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// GzipBombs sends n gzip bodies of about 20 KB that expand to 20 MiB, conc at a time.
func (t Target) GzipBombs(ctx context.Context, n, conc int) Answers {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	_, _ = zw.Write(make([]byte, 20<<20))
	zw.Close()
	bomb := buf.Bytes()
	return t.parallel(ctx, n, conc, func(int) ([]byte, bool) { return bomb, true })
}

// dial opens a raw connection to the target, TLS for https.
func (t Target) dial() (net.Conn, string, error) {
	u, err := url.Parse(t.URL)
	if err != nil {
		return nil, "", err
	}
	if u.Scheme == "https" {
		c, err := tls.Dial("tcp", u.Host, t.TLS)
		return c, u.Host, err
	}
	c, err := net.Dial("tcp", u.Host)
	return c, u.Host, err
}

// Stall opens n connections that each state a body of size bytes, send all but the last MiB
// and stop, and m more that send a request's first line a byte every interval. It returns
// once all are sending; close closes them, and open counts those the target has not closed.
func (t Target) Stall(n, size, m int, interval time.Duration) (open func() int, close func(), err error) {
	var conns []net.Conn
	var mu sync.Mutex
	closed := map[net.Conn]bool{}
	watch := func(c net.Conn) {
		go func() {
			b := make([]byte, 4096)
			for {
				if _, err := c.Read(b); err != nil {
					mu.Lock()
					closed[c] = true
					mu.Unlock()
					return
				}
			}
		}()
	}
	chunk := make([]byte, 1<<20)
	auth := ""
	if t.Token != "" {
		auth = "Authorization: Bearer " + t.Token + "\r\n"
	}
	for i := 0; i < n; i++ {
		c, host, err := t.dial()
		if err != nil {
			return nil, nil, err
		}
		conns = append(conns, c)
		fmt.Fprintf(c, "POST /v1/traces HTTP/1.1\r\nHost: %s\r\n%sContent-Type: application/x-protobuf\r\nContent-Length: %d\r\n\r\n", host, auth, size)
		watch(c)
		go func() {
			for j := 0; j < size>>20-1; j++ {
				if _, err := c.Write(chunk); err != nil {
					return
				}
			}
		}()
	}
	for i := 0; i < m; i++ {
		c, _, err := t.dial()
		if err != nil {
			return nil, nil, err
		}
		conns = append(conns, c)
		watch(c)
		go func() {
			for _, b := range []byte("POST /v1/traces HTTP/1.1\r\nHost: x\r\n") {
				if _, err := c.Write([]byte{b}); err != nil {
					return
				}
				time.Sleep(interval)
			}
		}()
	}
	open = func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(conns) - len(closed)
	}
	return open, func() {
		for _, c := range conns {
			c.Close()
		}
	}, nil
}

// Flood sends spans, perRequest to a request and conc requests at a time, each made by mk.
func (t Target) Flood(ctx context.Context, spans, perRequest, conc int, service string, mk func(i int) *tracepb.Span) Answers {
	return t.parallel(ctx, (spans+perRequest-1)/perRequest, conc, func(r int) ([]byte, bool) {
		var ss []*tracepb.Span
		for i := r * perRequest; i < min(spans, (r+1)*perRequest); i++ {
			ss = append(ss, mk(i))
		}
		return Marshal(service, ss...), false
	})
}

// UnrelatedRoots is a root span of its own trace that concerns no Pod: a Lease update.
func UnrelatedRoots(i int) *tracepb.Span {
	now := uint64(time.Now().UnixNano())
	return &tracepb.Span{TraceId: id(16, i), SpanId: id(8, 1), Name: "PUT /apis/coordination.k8s.io/v1/namespaces/{:namespace}/leases/{:name}",
		StartTimeUnixNano: now, EndTimeUnixNano: now, Attributes: []*commonpb.KeyValue{Str("http.request.method", "PUT")}}
}

// UniqueKeys is a kubelet span of its own trace naming a Pod, with 31 attributes whose 128-byte
// keys and 48-byte values are never seen again.
func UniqueKeys(i int) *tracepb.Span {
	now := uint64(time.Now().UnixNano())
	sp := &tracepb.Span{TraceId: id(16, i), SpanId: id(8, 2), ParentSpanId: id(8, 1), Name: "syncPod", StartTimeUnixNano: now, EndTimeUnixNano: now,
		Attributes: []*commonpb.KeyValue{Str("k8s.pod.uid", fmt.Sprintf("%036d", i))}}
	for a := 0; a < 31; a++ {
		sp.Attributes = append(sp.Attributes, Str(fmt.Sprintf("%0128d", i*31+a), fmt.Sprintf("%048d", i*31+a)))
	}
	return sp
}

// PodInEverySpan is a kubelet span of one trace that names another Pod each time.
func PodInEverySpan(i int) *tracepb.Span {
	now := uint64(time.Now().UnixNano())
	return &tracepb.Span{TraceId: id(16, 0), SpanId: id(8, i+2), ParentSpanId: id(8, 1), Name: "syncPod", StartTimeUnixNano: now, EndTimeUnixNano: now,
		Attributes: []*commonpb.KeyValue{Str("k8s.pod.uid", fmt.Sprintf("uid-%d", i))}}
}

// ForgedSyncPod is a kubelet syncPod trace for the Pod uid with its CRI calls, dated at, and
// readyspan's own attributes forged on every span: what a sender that is not the Pod's node
// would add to its trace. It returns the request and the forged trace's ID (hex).
func ForgedSyncPod(uid, podName, namespace string, at time.Time) ([]byte, string) {
	trace := random(16)
	root := random(8)
	start, end := uint64(at.UnixNano()), uint64(at.Add(time.Second).UnixNano())
	forged := []*commonpb.KeyValue{Str("readyspan.time.source.start", "audit"), Str("readyspan.component.span_name", "forged")}
	spans := []*tracepb.Span{{TraceId: trace, SpanId: root, Name: "syncPod", StartTimeUnixNano: start, EndTimeUnixNano: end,
		Attributes: append([]*commonpb.KeyValue{Str("k8s.pod.uid", uid), Str("k8s.pod", podName), Str("k8s.namespace.name", namespace)}, forged...)}}
	for _, m := range []string{"RunPodSandbox", "CreateContainer", "StartContainer"} {
		spans = append(spans, &tracepb.Span{TraceId: trace, SpanId: random(8), ParentSpanId: root, Name: "runtime.v1.RuntimeService/" + m,
			StartTimeUnixNano: start, EndTimeUnixNano: end, Attributes: forged})
	}
	return Marshal("kubelet", spans...), hex.EncodeToString(trace)
}

// Marshal is one request of a service's spans.
func Marshal(service string, spans ...*tracepb.Span) []byte {
	b, _ := proto.Marshal(&collectortrace.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource:   &resourcepb.Resource{Attributes: []*commonpb.KeyValue{Str("service.name", service)}},
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: spans}},
	}}})
	return b
}

// Str is a string attribute.
func Str(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

// id is an ID of n bytes unique to i (never zero).
func id(n, i int) []byte {
	b := make([]byte, n)
	b[0] = 0xab
	for k := 0; k < 8 && k < n-1; k++ {
		b[n-1-k] = byte(uint64(i+1) >> (8 * k))
	}
	return b
}

func random(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}
