package daemon

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/readyspan/readyspan/access"
	"github.com/readyspan/readyspan/exporters/otlp"
	"github.com/readyspan/readyspan/shard"
	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/watch"
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
	uo := UIOptions{Enabled: true, MaxRollouts: 1, MaxPods: 1, MaxMiB: 1, AllowedHosts: []string{"readyspan.example.com"}}
	ui, err := uo.handler(uo.ring(), addr)
	if err != nil {
		t.Fatal(err)
	}
	var ready atomic.Bool
	w := watch.NewWatcher(fake.NewClientset(), tracer.Kinds, watch.Config{}, nil, nil)
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

func TestLeaseForShard(t *testing.T) {
	for _, tc := range []struct {
		part shard.Shard
		want string
	}{
		{shard.Shard{}, "readyspan"},
		{shard.Shard{Index: 0, Total: 1}, "readyspan"},
		{shard.Shard{Index: 1, Total: 3}, "readyspan-shard-1-of-3"},
	} {
		o := Options{Shard: tc.part, Leader: LeaderOptions{Lease: "readyspan"}}
		if got := o.LeaseName(); got != tc.want {
			t.Errorf("shard %s: Lease %q, want %q", tc.part, got, tc.want)
		}
	}
}
