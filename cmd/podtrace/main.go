// Command podtrace reconstructs, for every Pod, where the time went between the request that
// created it and the Pod Ready and serving, and exports it as a trace (OTLP) and metrics.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// version is set at build time (-X main.version=...).
var version = "dev"

const usage = `podtrace traces Pod startup: submit, apiserver, controllers, scheduling, kubelet, status.

Usage:
  podtrace run      [flags]                   watch the cluster, export traces (OTLP) and metrics
  podtrace watch    [flags]                   print a waterfall for each Pod as its startup completes
  podtrace explain  (pod|deployment)/NAME [-n NS] [flags]
                                              reconstruct from the objects and events still in the API
  podtrace record   DIR [flags]               record the watch streams podtrace consumes into DIR
  podtrace replay   DIR [flags]               rebuild the traces of a recording, offline
  podtrace version

Run "podtrace COMMAND -h" for a command's flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "podtrace:", err)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "run":
		return runDaemon(ctx, rest, stdout, stderr)
	case "watch":
		return runWatch(ctx, rest, stdout, stderr)
	case "explain":
		return runExplain(ctx, rest, stdout, stderr)
	case "record":
		return runRecord(ctx, rest, stdout, stderr)
	case "replay":
		return runReplay(ctx, rest, stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, "podtrace", version)
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", cmd)
}
