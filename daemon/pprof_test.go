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
	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/watch"
)

// The profiles are served only with --pprof, on the metrics address, beside /metrics.
func TestServePprof(t *testing.T) {
	for _, tc := range []struct {
		name     string
		profiles bool
		wantCode int
		wantBody string
	}{
		{"off", false, http.StatusNotFound, ""},
		{"on", true, http.StatusOK, "heap"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			guard, err := access.New(access.Config{}, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			var ready atomic.Bool
			w := watch.NewWatcher(fake.NewClientset(), tracer.Kinds, watch.Config{}, nil, nil)
			srv, addr := serveOnFreePort(t, guard, w, &ready, tc.profiles)
			defer srv.Shutdown(context.Background())
			resp, err := http.Get("http://" + addr + "/debug/pprof/")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.wantCode || !strings.Contains(string(body), tc.wantBody) {
				t.Fatalf("GET /debug/pprof/: %d, want %d with %q in the body", resp.StatusCode, tc.wantCode, tc.wantBody)
			}
		})
	}
}

// serveOnFreePort runs serve on a port the kernel picks and returns the server and its address.
func serveOnFreePort(t *testing.T, guard *access.Guard, w *watch.Watcher, ready *atomic.Bool, profiles bool) (*http.Server, string) {
	t.Helper()
	ln, err := guard.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	srv, err := serve(addr, guard, prometheus.NewRegistry(), w, ready, func() otlp.Status { return otlp.Status{} }, nil, profiles, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return srv, addr
}
