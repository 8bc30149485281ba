package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/spf13/pflag"

	"github.com/readyspan/readyspan/daemon"
	"github.com/readyspan/readyspan/node"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/web"
)

// uiFlags configure the web UI `readyspan run` serves on its metrics port.
type uiFlags struct {
	enabled      bool
	traceURL     string
	allowedHosts stringList
	maxRollouts  int
	maxPods      int
	maxMiB       int
}

func (u *uiFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&u.enabled, "ui", true, "serve the web UI (recent rollouts, Pod and node waterfalls) at / on --metrics-addr")
	registerTraceURL(fs, &u.traceURL)
	registerAllowedHosts(fs, &u.allowedHosts)
	fs.IntVar(&u.maxRollouts, "ui-rollouts", web.DefaultMaxRollouts, "most recent rollout traces the UI keeps")
	fs.IntVar(&u.maxPods, "ui-pods", web.DefaultMaxPods, "most recent Pod traces the UI keeps")
	fs.IntVar(&u.maxMiB, "ui-max-mib", web.DefaultMaxBytes>>20, "most memory, in MiB, the UI's traces take; the oldest leave first")
}

func registerTraceURL(fs *pflag.FlagSet, to *string) {
	fs.StringVar(to, "trace-ui-url", "", "link each trace to a trace UI: an http(s) URL with {trace_id}, e.g. http://localhost:16686/trace/{trace_id}")
}

// checkTraceURL checks --trace-ui-url before any work: an http(s) URL with {trace_id}.
func checkTraceURL(u string) error { return web.CheckTraceUI(u) }

// registerAllowedHosts adds --ui-allowed-hosts: the UI answers only requests that name it by
// the address it listens on (web.ListenHosts), so a page of another site cannot read it through
// DNS rebinding; a Service's or an Ingress's name must be listed.
func registerAllowedHosts(fs *pflag.FlagSet, to *stringList) {
	fs.Var(to, "ui-allowed-hosts", "more host names the web UI answers to, comma-separated or repeated (e.g. readyspan.example.com); "+
		"it always answers to the address it listens on, and to localhost when that is a loopback address or every address")
}

// options are the daemon's UI options from the flags (daemon.Options.Validate checks them).
func (u *uiFlags) options() daemon.UIOptions {
	return daemon.UIOptions{Enabled: u.enabled, TraceURL: u.traceURL, AllowedHosts: u.allowedHosts,
		MaxRollouts: u.maxRollouts, MaxPods: u.maxPods, MaxMiB: u.maxMiB}
}

// writeReport is -o html: one self-contained page with every trace, linked to the trace UI
// at traceURL when set.
func writeReport(w io.Writer, title, traceURL string, pods []*phases.Trace, rollouts []*rollout.Trace, nodes []*node.Trace) error {
	return web.WriteReport(w, title, traceURL, pods, rollouts, nodes)
}

// replayListenAddr is where replay --listen binds: a bare port (":8081") means the loopback
// address, since the UI has no authentication; serving other machines takes an explicit
// 0.0.0.0:8081.
func replayListenAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("--listen %q: want host:port or :port (%w)", addr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// replayServer is the HTTP server of replay --listen on addr, over ring.
func replayServer(ring *web.Ring, addr, traceURL string, allowedHosts []string) (*http.Server, error) {
	if err := checkTraceURL(traceURL); err != nil {
		return nil, err
	}
	hosts, err := web.ListenHosts(addr, allowedHosts)
	if err != nil {
		return nil, err
	}
	return web.NewHTTPServer(web.NewServer(ring, web.ServerConfig{TraceUI: traceURL, Hosts: hosts})), nil
}

// serveReplay is `replay --listen`: the UI over a recording's traces, until interrupted.
func serveReplay(ctx context.Context, addr, traceURL string, allowedHosts []string, pods []*phases.Trace, rollouts []*rollout.Trace,
	nodes []*node.Trace, stderr io.Writer) error {
	addr, err := replayListenAddr(addr)
	if err != nil {
		return err
	}
	ring := web.NewRing(web.RingConfig{MaxRollouts: len(rollouts) + 1, MaxPods: len(pods) + 1, MaxNodes: len(nodes) + 1, MaxBytes: 1 << 40})
	for _, t := range pods {
		ring.AddPod(t)
	}
	for _, t := range rollouts {
		ring.AddRollout(t)
	}
	for _, t := range nodes {
		ring.AddNode(t)
	}
	srv, err := replayServer(ring, addr, traceURL, allowedHosts)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on --listen %s: %w", addr, err)
	}
	fmt.Fprintf(stderr, "%s: serving %d rollouts, %d Pod traces and %d node startups on http://%s/ (Ctrl-C to stop)\n", prog,
		len(rollouts), len(pods), len(nodes), hostPort(ln.Addr()))
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

// hostPort names a listening address the way a browser reaches it: an unspecified host as
// localhost.
func hostPort(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}
