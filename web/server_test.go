package web

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Every response of the UI server, the JSON API's and the errors' too, tells the browser not to
// sniff it, frame it or send its address on; the page runs only the script file it is served
// with.
func TestServerHeaders(t *testing.T) {
	hosts, err := ListenHosts("127.0.0.1:8081", nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(NewRing(RingConfig{}), ServerConfig{TraceUI: "http://jaeger.example/trace/{trace_id}", Hosts: hosts})
	for _, tc := range []struct {
		path, host string
		wantCode   int
		wantType   string
	}{
		{"/", "127.0.0.1:8081", 200, "text/html"},
		{"/app.js", "127.0.0.1:8081", 200, "text/javascript"},
		{"/app.css", "127.0.0.1:8081", 200, "text/css"},
		{"/api/v1/rollouts", "localhost:8081", 200, "application/json"},
		{"/api/v1/pods", "localhost:8081", 200, "application/json"},
		{"/api/v1/pods/no-such-uid", "localhost:8081", 404, "application/json"},
		{"/api/v1/nodes", "localhost:8081", 200, "application/json"},
		{"/api/v1/nodes/no-such-id", "localhost:8081", 404, "application/json"},
		{"/api/v1/nodes", "attacker.example:8081", http.StatusMisdirectedRequest, "text/plain"},
		{"/nothing-here", "localhost:8081", 404, "text/plain"},
		{"/", "attacker.example:8081", http.StatusMisdirectedRequest, "text/plain"},
	} {
		t.Run(tc.path+" "+tc.host, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, tc.path, nil)
			req.Host = tc.host
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, req)
			h := rec.Result().Header
			if rec.Code != tc.wantCode || !strings.HasPrefix(h.Get("Content-Type"), tc.wantType) {
				t.Fatalf("%d %s, want %d %s", rec.Code, h.Get("Content-Type"), tc.wantCode, tc.wantType)
			}
			for k, want := range map[string]string{"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer"} {
				if got := h.Get(k); got != want {
					t.Errorf("%s: %q, want %q", k, got, want)
				}
			}
			csp := h.Get("Content-Security-Policy")
			if !strings.Contains(csp, "frame-ancestors 'none'") || !strings.HasPrefix(csp, "default-src 'none';") || strings.Contains(csp, "unsafe-inline") {
				t.Errorf("Content-Security-Policy %q", csp)
			}
			if tc.path == "/" && tc.wantCode == 200 && !strings.Contains(csp, "script-src 'self';") {
				t.Errorf("the page's Content-Security-Policy %q does not allow its own script file", csp)
			}
		})
	}
}

// scriptElem matches a script element: its attributes and its text.
var scriptElem = regexp.MustCompile(`(?s)<script([^>]*)>(.*?)</script>`)

// inlineHandler is an event handler attribute (onclick=, onerror=…) in markup.
var inlineHandler = regexp.MustCompile(`(?i)<[^>]*\son[a-z]+\s*=`)

// The served page runs no inline script: one script file, and the data block, which is JSON.
func TestServedPageNoInlineScript(t *testing.T) {
	srv := NewServer(NewRing(RingConfig{}), ServerConfig{})
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://localhost/", nil))
	page := rec.Body.String()
	scripts := scriptElem.FindAllStringSubmatch(page, -1)
	if len(scripts) != 2 {
		t.Fatalf("%d script elements, want the data block and app.js", len(scripts))
	}
	for _, s := range scripts {
		switch {
		case strings.Contains(s[1], `type="application/json"`):
		case strings.TrimSpace(s[1]) == `src="app.js"` && s[2] == "":
		default:
			t.Errorf("inline script: <script%s>%.80s", s[1], s[2])
		}
	}
	if strings.Contains(page, "<style") || strings.Contains(page, "style=") {
		t.Error("the served page has inline style")
	}
	if m := inlineHandler.FindAllString(page, -1); len(m) > 0 {
		t.Errorf("the page has inline event handlers: %q", m)
	}
	// The script builds markup as strings: no style attribute (the policy refuses them) and no
	// handler attribute may appear in them.
	if m := regexp.MustCompile(`(?i)['"\s](style|on[a-z]+)=`).FindAllString(pageJS, -1); len(m) > 0 {
		t.Errorf("app.js writes attributes the policy refuses or that run script: %q", m)
	}
}

// The report's policy allows exactly its own script and style, by their hashes, computed from
// the bytes in the file.
func TestReportCSPHashes(t *testing.T) {
	var b bytes.Buffer
	if err := WriteReport(&b, `report <"&'>`, "https://jaeger.example/trace/{trace_id}", nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	csp := regexp.MustCompile(`<meta http-equiv="Content-Security-Policy" content="([^"]*)">`).FindStringSubmatch(page)
	if csp == nil {
		t.Fatal("no Content-Security-Policy")
	}
	policy := csp[1]
	if strings.Contains(policy, "unsafe-inline") || !strings.HasPrefix(policy, "default-src 'none';") {
		t.Errorf("policy %q", policy)
	}
	hash := func(s string) string {
		sum := sha256.Sum256([]byte(s))
		return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	}
	var code int
	for _, s := range scriptElem.FindAllStringSubmatch(page, -1) {
		if strings.Contains(s[1], "application/json") {
			continue
		}
		code++
		if !strings.Contains(policy, "script-src "+hash(s[2])+";") {
			t.Errorf("policy %q does not allow the report's script (%s)", policy, hash(s[2]))
		}
	}
	if code != 1 {
		t.Errorf("%d scripts, want 1", code)
	}
	style := regexp.MustCompile(`(?s)<style>(.*?)</style>`).FindStringSubmatch(page)
	if style == nil || !strings.Contains(policy, "style-src "+hash(style[1])+";") {
		t.Errorf("policy %q does not allow the report's style", policy)
	}
	if !strings.Contains(page, `"traceUI":"https://jaeger.example/trace/{trace_id}"`) {
		t.Error("the report does not link to the trace UI")
	}
	if !strings.Contains(page, "<title>report &lt;&#34;&amp;&#39;&gt;</title>") {
		t.Error("the title is not escaped")
	}
}

func TestCheckTraceUI(t *testing.T) {
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"", true},
		{"http://localhost:16686/trace/{trace_id}", true},
		{"https://tempo.example.com/explore?trace={trace_id}&x=1", true},
		{"HTTPS://jaeger.example/trace/{trace_id}", true},
		{"http://jaeger.example/trace/", false},
		{"javascript:alert(document.domain)//{trace_id}", false},
		{"JavaScript:alert(1)//{trace_id}", false},
		{"data:text/html,<script>alert(1)</script>{trace_id}", false},
		{"/trace/{trace_id}", false},
		{"//evil.example/{trace_id}", false},
		{"ftp://files.example/{trace_id}", false},
		{"http:///trace/{trace_id}", false},
		{"http://[::1/trace/{trace_id}", false},
	} {
		err := CheckTraceUI(tc.url)
		if (err == nil) != tc.ok {
			t.Errorf("CheckTraceUI(%q) = %v, want ok %v", tc.url, err, tc.ok)
		}
	}
	if err := WriteReport(&bytes.Buffer{}, "r", "javascript:alert(1)//{trace_id}", nil, nil, nil); err == nil {
		t.Error("the report accepts a javascript: trace UI")
	}
}

// A UI server answers only to the names of the address it listens on and the ones it is given.
func TestHosts(t *testing.T) {
	for _, tc := range []struct {
		listen string
		extra  []string
		allow  []string
		deny   []string
	}{
		{
			listen: "127.0.0.1:8081",
			allow:  []string{"127.0.0.1:8081", "127.0.0.1", "localhost:8081", "LOCALHOST:9999", "localhost.:8081", "[::1]:8081"},
			deny:   []string{"", "attacker.example", "attacker.example:8081", "127.0.0.1.attacker.example:8081", "localhost.attacker.example", "10.0.0.7:8081", "[::1"},
		},
		{
			listen: "localhost:8081",
			allow:  []string{"localhost:8081", "127.0.0.1:8081"},
			deny:   []string{"attacker.example:8081"},
		},
		{
			// Every address, as readyspan run in a Pod: its IP, a port forward's localhost.
			listen: ":8080",
			allow:  []string{"10.244.0.17:8080", "[fd00::17]:8080", "localhost:8080", "127.0.0.1:18080"},
			deny:   []string{"readyspan.readyspan.svc:8080", "attacker.example:8080", "10.244.0.17.nip.io:8080"},
		},
		{
			listen: "0.0.0.0:8080",
			extra:  []string{"readyspan.readyspan.svc", "UI.Example.com:443"},
			allow:  []string{"readyspan.readyspan.svc:8080", "ui.example.com", "10.0.0.1"},
			deny:   []string{"readyspan.other.svc:8080", "example.com"},
		},
		{
			listen: "192.168.1.5:8081",
			allow:  []string{"192.168.1.5:8081"},
			deny:   []string{"localhost:8081", "10.0.0.1:8081", "attacker.example"},
		},
	} {
		h, err := ListenHosts(tc.listen, tc.extra)
		if err != nil {
			t.Fatalf("%s: %v", tc.listen, err)
		}
		srv := NewServer(NewRing(RingConfig{}), ServerConfig{Hosts: h})
		for _, host := range append(tc.allow, tc.deny...) {
			want := http.StatusOK
			if !contains(tc.allow, host) {
				want = http.StatusMisdirectedRequest
			}
			req := httptest.NewRequest(http.MethodGet, "/api/v1/pods", nil)
			req.Host = host
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, req)
			if rec.Code != want {
				t.Errorf("listen %s %v, Host %q: %d, want %d", tc.listen, tc.extra, host, rec.Code, want)
			}
		}
	}
	for _, bad := range []string{"http://ui.example.com/", "user@ui.example.com", "", "ui example", "[::1", "*.example.com"} {
		if _, err := ListenHosts(":8080", []string{bad}); err == nil {
			t.Errorf("--ui-allowed-hosts %q accepted", bad)
		}
	}
	if _, err := ListenHosts("8080", nil); err == nil {
		t.Error("a listen address without a colon accepted")
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// An idle keep-alive connection is closed, and a client that never finishes its headers is cut
// off: the servers' timeouts are set.
func TestHTTPServerTimeouts(t *testing.T) {
	srv := NewHTTPServer(http.NotFoundHandler())
	for name, d := range map[string]time.Duration{"ReadHeaderTimeout": srv.ReadHeaderTimeout, "ReadTimeout": srv.ReadTimeout,
		"WriteTimeout": srv.WriteTimeout, "IdleTimeout": srv.IdleTimeout} {
		if d <= 0 || d > 5*time.Minute {
			t.Errorf("%s %v", name, d)
		}
	}
	if srv.ReadHeaderTimeout > srv.ReadTimeout || srv.Handler == nil {
		t.Errorf("ReadHeaderTimeout %v above ReadTimeout %v, or no handler", srv.ReadHeaderTimeout, srv.ReadTimeout)
	}
}
