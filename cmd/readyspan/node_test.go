package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/readyspan/readyspan/dataplane"
	"github.com/readyspan/readyspan/dataplane/agent"
	"github.com/readyspan/readyspan/otlpin"
	"github.com/readyspan/readyspan/phases"
)

// TestNodeFlags: readyspan node refuses, before reading any rule, settings that cannot work,
// each with a message that says what to do.
func TestNodeFlags(t *testing.T) {
	t.Setenv("NODE_NAME", "")
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("t"), 0o600); err != nil {
		t.Fatal(err)
	}
	built := false
	defer swapWatcher(func(string, time.Duration, *slog.Logger) (agent.Watcher, error) {
		built = true
		return nil, errors.New("not in this test")
	})()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--otlp-endpoint", "r:4321"}, "no node name: set --node-name or NODE_NAME"},
		{[]string{"--node-name", "n1"}, "--otlp-endpoint is required"},
		{[]string{"--node-name", "n1", "--otlp-endpoint", "http://10.0.0.1:4321"}, "--otlp-insecure"},
		{[]string{"--node-name", "n1", "--otlp-endpoint", "10.0.0.1:4321", "--otlp-insecure", "--otlp-token-file", tok}, "plain text"},
		{[]string{"--node-name", "n1", "--otlp-endpoint", "r:4321", "--otlp-token-file", tok + ".missing"}, "read the token"},
		{[]string{"--node-name", "n1", "--otlp-endpoint", "r:4321", "--otlp-ca-file", tok}, "no PEM certificate"},
		{[]string{"--node-name", "n1", "--otlp-endpoint", "r:4321", "--poll", "-1s"}, "--poll"},
		{[]string{"--node-name", "n1", "--otlp-endpoint", "r:4321", "--queue", "0"}, "--queue"},
		{[]string{"--node-name", "n1", "--otlp-endpoint", "r:4321", "extra"}, "no arguments"},
		{[]string{"--node-name", "n1", "--otlp-endpoint", "r:4321", "--log-level", "loud"}, "log level"},
		{[]string{"--node-name", "n1", "--otlp-endpoint", "r:4321", "--otlp-receive", ":1"}, "unknown flag"},
	} {
		err := run(context.Background(), append([]string{"node"}, tc.args...), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("node %s: error %v, want one with %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
	if built {
		t.Error("a rule reader was built for settings that cannot work")
	}
}

func swapWatcher(f func(string, time.Duration, *slog.Logger) (agent.Watcher, error)) func() {
	old := newRuleWatcher
	newRuleWatcher = f
	return func() { newRuleWatcher = old }
}

// TestNodeHelp: -h lists the command's flags.
func TestNodeHelp(t *testing.T) {
	var stderr bytes.Buffer
	err := run(context.Background(), []string{"node", "-h"}, io.Discard, &stderr)
	if !errors.Is(err, pflag.ErrHelp) {
		t.Fatalf("node -h: %v", err)
	}
	for _, f := range []string{"--node-name", "--otlp-endpoint", "--otlp-token-file", "--otlp-ca-file", "--otlp-insecure", "--poll", "--metrics-addr"} {
		if !strings.Contains(stderr.String(), f) {
			t.Errorf("node -h lacks %s:\n%s", f, stderr.String())
		}
	}
}

type stillWatcher struct{}

func (stillWatcher) Run(ctx context.Context, _ func([]dataplane.Change)) error {
	<-ctx.Done()
	return nil
}
func (stillWatcher) Current() (string, int) { return dataplane.ModeNFTables, 4 }

// TestNodeRuns: with NODE_NAME from the environment (as the DaemonSet sets it) and a loopback
// receiver, the command hands the reader its node and poll period and sends the heartbeat.
func TestNodeRuns(t *testing.T) {
	t.Setenv("NODE_NAME", "node-7")
	var mu sync.Mutex
	var got []phases.ComponentSpan
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		_ = otlpin.DecodeMessage(b, func(c []phases.ComponentSpan) { got = append(got, c...) })
	}))
	defer srv.Close()
	var node string
	var poll time.Duration
	defer swapWatcher(func(n string, p time.Duration, _ *slog.Logger) (agent.Watcher, error) {
		node, poll = n, p
		return stillWatcher{}, nil
	})()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"node", "--otlp-endpoint", srv.URL, "--poll", "50ms", "--metrics-addr", "127.0.0.1:0"}, io.Discard, io.Discard)
	}()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no heartbeat")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if node != "node-7" || poll != 50*time.Millisecond {
		t.Errorf("the reader got node %q, poll %v", node, poll)
	}
	rep, err := dataplane.Parse(&got[0])
	if err != nil || rep.Sync == nil || rep.Sync.Node != "node-7" || rep.Sync.Endpoints != 4 {
		t.Errorf("heartbeat %+v: %v", rep.Sync, err)
	}
}
