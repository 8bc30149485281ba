package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/readyspan/readyspan/dataplane/agent"
	"github.com/readyspan/readyspan/dataplane/proxyrules"
)

// defaultNodeMetricsAddr is loopback: the node component runs in the host's network namespace,
// where any other address opens the port on the node's own interfaces.
const defaultNodeMetricsAddr = "127.0.0.1:9465"

// newRuleWatcher builds the reader of the node's kube-proxy rules (a variable, so the
// command's tests run without root or a kernel's rules).
var newRuleWatcher = func(node string, poll time.Duration, log *slog.Logger) (agent.Watcher, error) {
	return proxyrules.NewWatcher(proxyrules.Options{Node: node, Poll: poll, Log: log})
}

// runNode is `readyspan node`: its flags become agent.Config, and the agent package does the
// rest.
func runNode(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("node", "--otlp-endpoint ADDR [flags]", stderr)
	var c agent.Config
	fs.StringVar(&c.Node, "node-name", envOr("NODE_NAME", ""), "the node this runs on, as the cluster names it (default: $NODE_NAME; the DaemonSet sets it from spec.nodeName)")
	fs.StringVar(&c.Endpoint, "otlp-endpoint", "", "the central readyspan's --otlp-receive: host:port (TLS unless --otlp-insecure) or an http(s):// URL")
	fs.StringVar(&c.TokenFile, "otlp-token-file", "", "bearer token to send, read again for every request (a projected ServiceAccount token rotates); needed where the receiver is not on loopback")
	fs.StringVar(&c.CAFile, "otlp-ca-file", "", "PEM CA of the receiver's certificate (default: the system's)")
	fs.BoolVar(&c.Insecure, "otlp-insecure", false, "send in plain text: only to loopback or over a network you trust (never with a token off loopback)")
	poll := fs.Duration("poll", 0, "how often the node's rules are read (0: the reader's default); each change's precision attribute says how late it may be")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", defaultNodeMetricsAddr, "address for /metrics and /healthz (loopback by default: the component shares the host's network)")
	fs.IntVar(&c.Queue, "queue", agent.DefaultQueue, "most changes kept for the receiver while it is down or slow; past it the oldest are dropped and counted")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("node takes no arguments, got %q", fs.Args())
	}
	if c.Endpoint == "" {
		return errors.New("--otlp-endpoint is required: the central readyspan's --otlp-receive address (e.g. readyspan.readyspan.svc:4321)")
	}
	if *poll < 0 {
		return fmt.Errorf("--poll %v: want a positive duration, or 0 for the reader's default", *poll)
	}
	if c.Queue <= 0 {
		return fmt.Errorf("--queue %d: want at least 1", c.Queue)
	}
	if err := c.Validate(); err != nil {
		return err
	}
	log, err := newLogger(stderr, *logLevel)
	if err != nil {
		return err
	}
	c.Log = log
	w, err := newRuleWatcher(c.Node, *poll, log)
	if err != nil {
		return fmt.Errorf("read the node's kube-proxy rules: %w", err)
	}
	a, err := agent.New(c, w)
	if err != nil {
		return err
	}
	return a.Run(ctx)
}
