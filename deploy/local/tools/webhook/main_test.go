package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
)

// reviewOf is an AdmissionReview as the kube-apiserver POSTs it for a Pod create by a
// controller (generateName, no name; the namespace on the request).
func reviewOf(t *testing.T, labels map[string]string, containers ...string) []byte {
	t.Helper()
	pod := map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"generateName": "web-7d4b9c-", "namespace": "team-a", "labels": labels},
		"spec":     map[string]any{"containers": containerList(containers)},
	}
	raw, _ := json.Marshal(pod)
	review := map[string]any{
		"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
		"request": map[string]any{
			"uid":       "705ab4f5-6393-11e8-b7cc-42010a800002",
			"kind":      map[string]any{"group": "", "version": "v1", "kind": "Pod"},
			"resource":  map[string]any{"group": "", "version": "v1", "resource": "pods"},
			"namespace": "team-a", "operation": "CREATE",
			"userInfo": map[string]any{"username": "system:serviceaccount:kube-system:replicaset-controller"},
			"object":   json.RawMessage(raw),
		},
	}
	b, _ := json.Marshal(review)
	return b
}

func containerList(names []string) []map[string]any {
	out := []map[string]any{}
	for _, n := range names {
		out = append(out, map[string]any{"name": n, "image": "busybox"})
	}
	return out
}

type result struct {
	code   int
	review admissionv1.AdmissionReview
	body   string
	rec    Record
}

func post(t *testing.T, s *Server, path, contentType string, body []byte) result {
	t.Helper()
	var log bytes.Buffer
	s.Log = &log
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, req)
	r := result{code: w.Code, body: w.Body.String()}
	if w.Code == http.StatusOK {
		if err := json.Unmarshal(w.Body.Bytes(), &r.review); err != nil {
			t.Fatalf("response is not an AdmissionReview: %v: %s", err, w.Body)
		}
	}
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("want one log line per request, got %d: %q", len(lines), log.String())
	}
	if err := json.Unmarshal([]byte(lines[0]), &r.rec); err != nil {
		t.Fatalf("log line is not JSON: %v: %s", err, lines[0])
	}
	return r
}

func TestMutateInjectsSidecarAfterDelay(t *testing.T) {
	s := &Server{InjectDelay: 30 * time.Millisecond, SidecarImage: "registry/busybox:v1"}
	start := time.Now()
	r := post(t, s, "/mutate", "application/json", reviewOf(t, map[string]string{InjectLabel: InjectValue}, "app"))
	took := time.Since(start)
	if r.code != http.StatusOK {
		t.Fatalf("status %d: %s", r.code, r.body)
	}
	resp := r.review.Response
	if resp == nil || !resp.Allowed || resp.UID != "705ab4f5-6393-11e8-b7cc-42010a800002" {
		t.Fatalf("response = %+v, want allowed with the request's UID", resp)
	}
	if r.review.APIVersion != "admission.k8s.io/v1" || r.review.Kind != "AdmissionReview" {
		t.Errorf("response type %s/%s, want the request's admission.k8s.io/v1 AdmissionReview", r.review.APIVersion, r.review.Kind)
	}
	if resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
		t.Fatalf("patch type = %v, want JSONPatch", resp.PatchType)
	}
	var patch []struct {
		Op, Path string
		Value    corev1.Container
	}
	if err := json.Unmarshal(resp.Patch, &patch); err != nil {
		t.Fatalf("patch: %v: %s", err, resp.Patch)
	}
	if len(patch) != 1 || patch[0].Op != "add" || patch[0].Path != "/spec/containers/-" ||
		patch[0].Value.Name != SidecarName || patch[0].Value.Image != "registry/busybox:v1" {
		t.Errorf("patch = %+v, want one add of the sidecar to /spec/containers/-", patch)
	}
	if took < 30*time.Millisecond {
		t.Errorf("answered after %s, want at least the 30ms delay", took)
	}
	rec := r.rec
	if rec.UID != "705ab4f5-6393-11e8-b7cc-42010a800002" || rec.Namespace != "team-a" || rec.GenerateName != "web-7d4b9c-" ||
		rec.Name != "" || rec.Hook != "mutate" || !rec.Patched || !rec.Allowed || rec.Operation != "CREATE" || rec.Kind != "Pod" {
		t.Errorf("log record = %+v", rec)
	}
	if rec.HandlingMs < 30 || rec.HandlingMs > float64(took.Microseconds())/1000 {
		t.Errorf("handlingMs = %v, want between the delay (30) and the caller's own measure (%v)", rec.HandlingMs, took)
	}
}

func TestMutateLeavesOthersAlone(t *testing.T) {
	for _, tc := range []struct {
		name   string
		labels map[string]string
		have   []string
	}{
		{"unlabelled", nil, []string{"app"}},
		{"other value", map[string]string{InjectLabel: "no"}, []string{"app"}},
		{"sidecar already there (reinvocation)", map[string]string{InjectLabel: InjectValue}, []string{"app", SidecarName}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := post(t, &Server{}, "/mutate", "application/json", reviewOf(t, tc.labels, tc.have...))
			if r.code != http.StatusOK || r.review.Response == nil || !r.review.Response.Allowed {
				t.Fatalf("status %d, response %+v: want allowed", r.code, r.review.Response)
			}
			if r.review.Response.Patch != nil || r.rec.Patched {
				t.Errorf("patched %s: want no patch", r.review.Response.Patch)
			}
		})
	}
}

func TestValidateDeniesLabelled(t *testing.T) {
	s := &Server{DenyDelay: 10 * time.Millisecond}
	r := post(t, s, "/validate", "application/json", reviewOf(t, map[string]string{DenyLabel: "yes"}, "app"))
	resp := r.review.Response
	if r.code != http.StatusOK || resp == nil || resp.Allowed {
		t.Fatalf("status %d, response %+v: want denied", r.code, resp)
	}
	if resp.Result == nil || resp.Result.Code != http.StatusForbidden || resp.Result.Message != DenyMessage("yes") {
		t.Errorf("result = %+v, want 403 with %q", resp.Result, DenyMessage("yes"))
	}
	if !strings.Contains(resp.Result.Message, DenyLabel) {
		t.Errorf("message %q does not name the label", resp.Result.Message)
	}
	if r.rec.Allowed || r.rec.Message != DenyMessage("yes") || r.rec.HandlingMs < 10 {
		t.Errorf("log record = %+v", r.rec)
	}

	r = post(t, s, "/validate", "application/json", reviewOf(t, map[string]string{"app": "web"}, "app"))
	if r.review.Response == nil || !r.review.Response.Allowed {
		t.Errorf("unlabelled Pod: response %+v, want allowed", r.review.Response)
	}
}

func TestBadRequests(t *testing.T) {
	for _, tc := range []struct {
		name, ct string
		body     []byte
		code     int
	}{
		{"not JSON", "application/json", []byte("{"), http.StatusBadRequest},
		{"no request", "application/json", []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`), http.StatusBadRequest},
		{"wrong content type", "text/plain", reviewOf(t, nil, "app"), http.StatusUnsupportedMediaType},
		{"bad pod", "application/json", []byte(`{"request":{"uid":"u","kind":{"kind":"Pod"},"operation":"CREATE","object":{"spec":7}}}`), http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := post(t, &Server{}, "/validate", tc.ct, tc.body)
			if r.code != tc.code {
				t.Errorf("status %d, want %d (%s)", r.code, tc.code, r.body)
			}
			if r.rec.Error == "" {
				t.Errorf("log record %+v has no error", r.rec)
			}
		})
	}
	w := httptest.NewRecorder()
	s := &Server{Log: &bytes.Buffer{}}
	s.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/mutate", nil))
	if w.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET /mutate: %d, want 405", w.Code)
	}
}

// TestNewConnectionTimed: over TLS, the first request on a connection is marked new with the
// time from the connection's accept (its handshake included) to the request; the next request
// on the same connection is not.
func TestNewConnectionTimed(t *testing.T) {
	var log syncBuffer
	s := &Server{Log: &log, SidecarImage: "busybox"}
	srv := httptest.NewUnstartedServer(s.Handler())
	srv.Config.ConnContext = s.ConnContext
	srv.StartTLS()
	defer srv.Close()
	client := srv.Client()
	for range 2 {
		resp, err := client.Post(srv.URL+"/mutate", "application/json", bytes.NewReader(reviewOf(t, nil, "app")))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body) // read to the end: the connection is reused
		resp.Body.Close()
	}
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d log lines, want 2:\n%s", len(lines), log.String())
	}
	var first, second Record
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &second); err != nil {
		t.Fatal(err)
	}
	if !first.NewConnection || first.ConnectMs <= 0 {
		t.Errorf("first request: newConnection %v, connectMs %v; want true and the handshake's time", first.NewConnection, first.ConnectMs)
	}
	if second.NewConnection || second.ConnectMs != 0 {
		t.Errorf("second request on the same connection: newConnection %v, connectMs %v; want neither", second.NewConnection, second.ConnectMs)
	}
}

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
