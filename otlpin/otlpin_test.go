package otlpin

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/protobuf/proto"

	"github.com/readyspan/readyspan/phases"
)

func str(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

// span is a test span: trace t, span s, parent p (0: a root), with attributes as key, value pairs.
func span(t, s, p byte, name string, kv ...string) *tracepb.Span {
	sp := &tracepb.Span{TraceId: bytes.Repeat([]byte{t}, 16), SpanId: bytes.Repeat([]byte{s}, 8), Name: name,
		StartTimeUnixNano: uint64(time.Date(2026, 12, 2, 18, 0, 0, int(s)*1000, time.UTC).UnixNano()),
		EndTimeUnixNano:   uint64(time.Date(2026, 12, 2, 18, 0, 1, 0, time.UTC).UnixNano())}
	if p != 0 {
		sp.ParentSpanId = bytes.Repeat([]byte{p}, 8)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		sp.Attributes = append(sp.Attributes, str(kv[i], kv[i+1]))
	}
	return sp
}

func request(service string, spans ...*tracepb.Span) *collectortrace.ExportTraceServiceRequest {
	return &collectortrace.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource:   &resourcepb.Resource{Attributes: []*commonpb.KeyValue{str("service.name", service)}},
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: spans}},
	}}}
}

// podCreate is an apiserver request that created Pod ns/name: root, handler, storage write.
func podCreate(trace byte, ns, name string) *collectortrace.ExportTraceServiceRequest {
	return request("apiserver",
		span(trace, 3, 2, "Create etcd3", "key", "/pods/"+ns+"/"+name, "resource", "pods", "audit-id", "a"),
		span(trace, 2, 1, "Create", "resource", "pods", "verb", "POST", "subresource", "", "namespace", ns, "audit-id", "a"),
		span(trace, 1, 0, "POST /api/v1/namespaces/{:namespace}/pods", "http.request.method", "POST", "url.path", "/api/v1/namespaces/"+ns+"/pods"),
	)
}

func dropped(t *testing.T, reg *prometheus.Registry, component, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "readyspan_otlp_dropped_spans_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["component"] == component && l["reason"] == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// What concerns no Pod or workload is dropped as soon as its trace's root says so; what
// concerns one is held until a Pod's trace takes it; reads are never held; what is held
// expires after the hold, undecided spans sooner, and the oldest go first past the byte bound.
func TestStoreFiltersAndHolds(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := NewStore(time.Minute, 0, reg)
	now := time.Date(2026, 12, 2, 18, 0, 0, 0, time.UTC)
	s.now = func() time.Time { return now }

	s.Add(Decode(podCreate(1, "ns", "web-1")))
	// A Lease update: no Pod or workload anywhere, root present.
	s.Add(Decode(request("apiserver",
		span(2, 2, 1, "GuaranteedUpdate etcd3", "key", "/leases/kube-node-lease/node", "resource", "leases"),
		span(2, 1, 0, "PUT /apis/coordination.k8s.io/v1/namespaces/{:namespace}/leases/{:name}", "http.request.method", "PUT"))))
	// A kubelet PLEG relist: a root CRI call.
	s.Add(Decode(request("kubelet", span(3, 1, 0, "runtime.v1.RuntimeService/ListContainers"))))
	// A GET of the Pod: concerns it, but a read.
	s.Add(Decode(request("apiserver", span(4, 1, 0, "GET /api/v1/namespaces/{:namespace}/pods/{:name}", "http.request.method", "GET", "url.path", "/api/v1/namespaces/ns/pods/web-1"))))
	// containerd's span beneath a kubelet CRI call whose trace has not arrived: undecided.
	s.Add(Decode(request("containerd", span(5, 9, 8, "runtime.v1.RuntimeService/RunPodSandbox"))))
	// An unknown service.
	s.Add(Decode(request("my-app", span(6, 1, 0, "GET /"))))

	if n, _ := s.Held(); n != 4 {
		t.Fatalf("%d spans held, want 4 (the Pod's create request and containerd's undecided span)", n)
	}
	for _, c := range []struct {
		component, reason string
		want              float64
	}{
		{phases.ServiceAPIServer, ReasonUnrelated, 2}, {phases.ServiceKubelet, ReasonUnrelated, 1},
		{phases.ServiceAPIServer, ReasonRead, 1}, {labelOther, ReasonComponent, 1},
	} {
		if got := dropped(t, reg, c.component, c.reason); got != c.want {
			t.Errorf("dropped %s %s: %v, want %v", c.component, c.reason, got, c.want)
		}
	}
	// A late span of a trace already decided unrelated is dropped at once.
	s.Add(Decode(request("apiserver", span(2, 7, 1, "authorization"))))
	if got := dropped(t, reg, phases.ServiceAPIServer, ReasonUnrelated); got != 3 {
		t.Errorf("a late span of an unrelated trace: %v dropped, want 3", got)
	}

	q := Query{UID: "u", Namespace: "ns", Name: "web-1", From: now.Add(-time.Hour), To: now.Add(time.Hour)}
	if p := s.Present(q); !p.Create || p.Sync || p.Runtime {
		t.Errorf("present %+v, want only the create", p)
	}
	if got := s.Take(Query{Namespace: "ns", Name: "web-1", From: now.Add(time.Hour), To: now.Add(2 * time.Hour)}); len(got) != 0 {
		t.Errorf("a request outside the window taken: %v", got)
	}
	got := s.Take(q)
	if len(got) != 1 || len(got[0]) != 3 {
		t.Fatalf("took %v, want the create request's 3 spans", got)
	}
	if v := testutil.ToFloat64(s.m.join.WithLabelValues(phases.ServiceAPIServer)); v != 3 {
		t.Errorf("joined %v, want 3", v)
	}

	now = now.Add(undecidedFor + 2*time.Second)
	s.Add(Decode(podCreate(7, "ns", "web-2")))
	if got := dropped(t, reg, phases.ServiceContainerd, ReasonUnresolved); got != 1 {
		t.Errorf("undecided containerd span: %v dropped as unresolved, want 1", got)
	}
	now = now.Add(time.Minute + 2*time.Second)
	s.Add(nil)
	if got := dropped(t, reg, phases.ServiceAPIServer, ReasonExpired); got != 3 {
		t.Errorf("web-2's request after the hold: %v expired, want 3", got)
	}

	small := NewStore(time.Hour, 6000, nil)
	for i := byte(10); i < 20; i++ {
		small.Add(Decode(podCreate(i, "ns", "p")))
	}
	if n, b := small.Held(); b > 6000 || n == 0 {
		t.Errorf("held %d spans, %d bytes with a bound of 6000", n, b)
	}
	if v := testutil.ToFloat64(small.m.drop.WithLabelValues(phases.ServiceAPIServer, ReasonBytes)); v == 0 {
		t.Error("nothing evicted for the byte bound")
	}
}

// Both OTLP transports on one address: gRPC (gzip-compressed, as a Collector sends) and HTTP
// protobuf; anything else gets a clear error.
func TestReceiverGRPCAndHTTP(t *testing.T) {
	s := NewStore(time.Minute, 0, nil)
	r, err := Listen(Config{Addr: "127.0.0.1:0"}, s, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Shutdown(context.Background())

	conn, err := grpc.NewClient(r.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := collectortrace.NewTraceServiceClient(conn).Export(ctx, podCreate(1, "ns", "a"), grpc.UseCompressor(gzip.Name)); err != nil {
		t.Fatalf("gRPC export: %v", err)
	}
	body, _ := proto.Marshal(podCreate(2, "ns", "b"))
	resp, err := http.Post("http://"+r.Addr().String()+"/v1/traces", "application/x-protobuf", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("HTTP export: %s", resp.Status)
	}
	if n, _ := s.Held(); n != 6 {
		t.Errorf("%d spans held, want both requests' 6", n)
	}
	resp, err = http.Post("http://"+r.Addr().String()+"/v1/traces", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType || !strings.Contains(string(msg), "application/x-protobuf") {
		t.Errorf("JSON: %s %q, want 415 naming protobuf", resp.Status, msg)
	}
	if err := r.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
	if err := r.Shutdown(context.Background()); err != nil {
		t.Errorf("second shutdown: %v", err)
	}
}

// Strings from outside are bounded before they are held; invalid UTF-8 is refused, as
// proto.Unmarshal refuses it.
func TestDecodeBoundsStrings(t *testing.T) {
	long := strings.Repeat("é", 1000)
	sp := span(1, 1, 0, long, "key", long)
	for i := 0; i < 100; i++ {
		sp.Attributes = append(sp.Attributes, str("k", "v"))
	}
	got := Decode(request("kubelet", sp))[0]
	if len(got.Name) > maxNameLen+32 || len(got.Attrs) != maxAttrs {
		t.Errorf("name of %d bytes, %d attributes", len(got.Name), len(got.Attrs))
	}
	for _, a := range got.Attrs {
		v, _ := a.Value.(string)
		if len(v) > maxValueLen+32 || !strings.HasPrefix(a.Key, "k") || strings.Contains(a.Key, "\xff") {
			t.Errorf("attribute %q of %d bytes", a.Key, len(v))
		}
	}
	if got.Service != phases.ServiceKubelet {
		t.Errorf("service %q", got.Service)
	}
	b, err := proto.Marshal(request("kubelet", span(1, 1, 0, "syncPod", "keyX", "v")))
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Replace(b, []byte("keyX"), []byte("key\xff"), 1)
	if err := DecodeMessage(b, func([]phases.ComponentSpan) { t.Error("a span with invalid UTF-8 decoded") }); !errors.Is(err, errBadMessage) {
		t.Errorf("invalid UTF-8: %v, want it refused", err)
	}
}

// writeCert writes a self-signed certificate for 127.0.0.1 and its key, and returns a pool
// trusting it.
func writeCert(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "readyspan-test"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// With a certificate, both transports are served over TLS (gRPC needs HTTP/2 offered by ALPN).
func TestReceiverTLS(t *testing.T) {
	certFile, keyFile, pool := writeCert(t)
	s := NewStore(time.Minute, 0, nil)
	r, err := Listen(Config{Addr: "127.0.0.1:0", CertFile: certFile, KeyFile: keyFile}, s, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Shutdown(context.Background())
	conn, err := grpc.NewClient(r.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := collectortrace.NewTraceServiceClient(conn).Export(ctx, podCreate(1, "ns", "a")); err != nil {
		t.Fatalf("gRPC over TLS: %v", err)
	}
	body, _ := proto.Marshal(podCreate(2, "ns", "b"))
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := c.Post("https://"+r.Addr().String()+"/v1/traces", "application/x-protobuf", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("HTTP over TLS: %s", resp.Status)
	}
	if n, _ := s.Held(); n != 6 {
		t.Errorf("%d spans held, want 6", n)
	}
	if _, err := http.Post("http://"+r.Addr().String()+"/v1/traces", "application/x-protobuf", bytes.NewReader(body)); err == nil {
		if n, _ := s.Held(); n != 6 {
			t.Error("plain HTTP accepted on the TLS address")
		}
	}
}

// TestRuntimeWaitsForTheSandbox: containerd exports its spans as they end, in batches, so the
// spans of a sandbox's making (the CNI's network setup) may come a batch before the span of the
// RunPodSandbox call they lie beneath, and the later CreateContainer call's spans before both.
// containerd counts as present only with its side of the RunPodSandbox call: a trace joined
// earlier lost its network setup, unnamed as missing (seen in the end-to-end suite).
func TestRuntimeWaitsForTheSandbox(t *testing.T) {
	s := NewStore(time.Minute, 0, nil)
	now := time.Date(2026, 12, 2, 18, 0, 0, 0, time.UTC)
	s.now = func() time.Time { return now }
	q := Query{UID: "u", Node: "n"}
	s.Add(Decode(request("kubelet",
		span(1, 1, 0, "syncPod", "k8s.pod.uid", "u"),
		span(1, 2, 1, "runtime.v1.RuntimeService/RunPodSandbox"),
		span(1, 3, 1, "runtime.v1.RuntimeService/CreateContainer"))))
	if p := s.Present(q); !p.Sync || p.Runtime {
		t.Fatalf("the kubelet's spans alone: %+v, want the syncPod and no runtime", p)
	}
	// A first batch of containerd's: the network setup, beneath a sandbox span still to come,
	// and its side of the CreateContainer call.
	s.Add(Decode(request("containerd",
		span(1, 12, 11, "cni.setup_pod_network"),
		span(1, 13, 3, "runtime.v1.RuntimeService/CreateContainer"))))
	if p := s.Present(q); p.Runtime {
		t.Errorf("containerd's spans without its side of RunPodSandbox: %+v, want no runtime yet", p)
	}
	s.Add(Decode(request("containerd",
		span(1, 11, 10, "cri.sandbox.run"),
		span(1, 10, 2, "runtime.v1.RuntimeService/RunPodSandbox"))))
	if p := s.Present(q); !p.Runtime {
		t.Errorf("containerd's side of RunPodSandbox in: %+v, want the runtime present", p)
	}
}
