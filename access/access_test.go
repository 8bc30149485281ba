package access

import (
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// apiserver is a fake clientset that answers TokenReviews from tokens and
// SubjectAccessReviews from grants, and counts the calls.
func apiserver(tokens map[string]string, grants map[string]bool, down bool) (*fake.Clientset, *int) {
	c := fake.NewClientset()
	calls := new(int)
	c.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		*calls++
		if down {
			return true, nil, errors.New("connection refused")
		}
		tr := a.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview).DeepCopy()
		if user, ok := tokens[tr.Spec.Token]; ok {
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: user, Groups: []string{"system:authenticated"}}}
		}
		return true, tr, nil
	})
	c.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		*calls++
		sar := a.(k8stesting.CreateAction).GetObject().(*authzv1.SubjectAccessReview).DeepCopy()
		na := sar.Spec.NonResourceAttributes
		sar.Status.Allowed = na != nil && (na.Verb == "get" && grants[sar.Spec.User+" "+na.Path] || grants[sar.Spec.User+" "+na.Verb+" "+na.Path])
		return true, sar, nil
	})
	return c, calls
}

var ok = http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) { io.WriteString(rw, "metrics") })

func TestGuard(t *testing.T) {
	tokens := map[string]string{"prom-token": "system:serviceaccount:monitoring:prometheus", "other-token": "system:serviceaccount:default:default",
		"collector-token": "system:serviceaccount:observability:collector"}
	grants := map[string]bool{"system:serviceaccount:monitoring:prometheus /metrics": true,
		"system:serviceaccount:observability:collector create /v1/traces": true}
	for _, tc := range []struct {
		name     string
		cfg      Config
		down     bool
		path     string
		auth     string
		wantCode int
		wantBody string
	}{
		{"plain HTTP: open to all", Config{}, false, "/metrics", "", 200, "metrics"},
		{"secure: no token", Config{Secure: true}, false, "/metrics", "", 401, "Unauthorized: a bearer token is required\n"},
		{"secure: unknown token", Config{Secure: true}, false, "/metrics", "Bearer forged", 401, "Unauthorized\n"},
		{"secure: not allowed", Config{Secure: true}, false, "/metrics", "Bearer other-token", 403, "Forbidden: system:serviceaccount:default:default may not get /metrics\n"},
		{"secure: allowed", Config{Secure: true}, false, "/metrics", "Bearer prom-token", 200, "metrics"},
		{"secure: allowed path only", Config{Secure: true}, false, "/ui", "Bearer prom-token", 403, "Forbidden: system:serviceaccount:monitoring:prometheus may not get /ui\n"},
		{"secure: probes stay open", Config{Secure: true, Open: []string{"/healthz", "/readyz"}}, false, "/readyz", "", 200, "metrics"},
		{"secure: apiserver down", Config{Secure: true}, true, "/metrics", "Bearer prom-token", 503, "cannot check the request with the apiserver\n"},
		{"OTLP input: allowed to create", Config{Secure: true, Verb: "create"}, false, "/v1/traces", "Bearer collector-token", 200, "metrics"},
		{"OTLP input: only allowed to get", Config{Secure: true, Verb: "create"}, false, "/v1/traces", "Bearer prom-token", 403,
			"Forbidden: system:serviceaccount:monitoring:prometheus may not create /v1/traces\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, _ := apiserver(tokens, grants, tc.down)
			g, err := New(tc.cfg, client, nil)
			if err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest(http.MethodGet, tc.path, nil)
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			rec := httptest.NewRecorder()
			g.Handler(ok).ServeHTTP(rec, req)
			if rec.Code != tc.wantCode || rec.Body.String() != tc.wantBody {
				t.Fatalf("got %d %q, want %d %q", rec.Code, rec.Body.String(), tc.wantCode, tc.wantBody)
			}
		})
	}
}

// Decisions are cached for a minute per token and path; the cache stays bounded.
func TestGuardCache(t *testing.T) {
	client, calls := apiserver(map[string]string{"t": "u"}, map[string]bool{"u /metrics": true}, false)
	g, _ := New(Config{Secure: true}, client, nil)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	g.now = func() time.Time { return now }
	get := func(token string) int {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		g.Handler(ok).ServeHTTP(rec, req)
		return rec.Code
	}
	for range 5 {
		if code := get("t"); code != 200 {
			t.Fatalf("code %d", code)
		}
	}
	if *calls != 2 {
		t.Fatalf("%d apiserver calls for 5 scrapes in a minute, want 2", *calls)
	}
	now = now.Add(cacheTTL)
	get("t")
	if *calls != 4 {
		t.Fatalf("%d apiserver calls after the cache expired, want 4", *calls)
	}
	for i := range 3 * cacheSize {
		get("bad-" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + time.Duration(i).String())
	}
	if n := len(g.cache); n > cacheSize {
		t.Fatalf("cache holds %d decisions, bound %d", n, cacheSize)
	}
}

// Secure serves TLS (a self-signed certificate without files); plain HTTP is refused.
func TestGuardTLS(t *testing.T) {
	client, _ := apiserver(map[string]string{"t": "u"}, map[string]bool{"u /metrics": true}, false)
	for _, tc := range []struct {
		name   string
		secure bool
		scheme string
	}{{"plain", false, "http"}, {"secure", true, "https"}} {
		t.Run(tc.name, func(t *testing.T) {
			g, _ := New(Config{Secure: tc.secure}, client, nil)
			ln, err := g.Listen("127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			srv := &http.Server{Handler: g.Handler(ok), ReadHeaderTimeout: time.Second}
			go srv.Serve(ln)
			defer srv.Close()
			hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
			req, _ := http.NewRequest(http.MethodGet, tc.scheme+"://"+ln.Addr().String()+"/metrics", nil)
			req.Header.Set("Authorization", "Bearer t")
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 || (resp.TLS != nil) != tc.secure {
				t.Fatalf("status %d, TLS %v", resp.StatusCode, resp.TLS != nil)
			}
			if tc.secure {
				resp, err := hc.Get("http://" + ln.Addr().String() + "/metrics")
				if err == nil {
					resp.Body.Close()
					if resp.StatusCode != http.StatusBadRequest {
						t.Fatalf("plain HTTP to the TLS port: %d", resp.StatusCode)
					}
				}
			}
		})
	}
}

func TestGuardConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{CertFile: "c", KeyFile: "k"}, "need --metrics-secure"},
		{Config{Secure: true, CertFile: "c"}, "go together"},
	} {
		if _, err := New(tc.cfg, nil, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.cfg, err, tc.want)
		}
	}
	g, _ := New(Config{Secure: true, CertFile: "/nonexistent.crt", KeyFile: "/nonexistent.key"}, nil, nil)
	if _, err := g.Listen("127.0.0.1:0"); err == nil || !strings.Contains(err.Error(), "load the TLS certificate") {
		t.Errorf("missing certificate files: %v", err)
	}
}
