// Command readyspan reconstructs, for every Pod, where the time went between the request that
// created it and the Pod Ready and serving, and exports it as a trace (OTLP) and metrics.
//
// Installed as kubectl-readyspan on the PATH (make install links it), it is the kubectl plugin
// `kubectl readyspan`: the terminal commands take kubectl's connection flags with kubectl's
// meaning, and help and errors name the command the way it was invoked.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/readyspan/readyspan/safetext"
	"github.com/readyspan/readyspan/tracer"
)

// version and commit are set at build time (-X main.version=... -X main.commit=...): the release
// in the repository's VERSION file and the tree it was built from.
var (
	version = "dev"
	commit  = "unknown"
)

// prog is the command as the user typed it: "readyspan", or "kubectl readyspan" when kubectl runs
// this binary as its plugin (kubectl execs kubectl-readyspan with that path as argument zero).
var prog = programName(os.Args[0])

func programName(arg0 string) string {
	base := strings.TrimSuffix(filepath.Base(arg0), ".exe")
	if plugin, ok := strings.CutPrefix(base, "kubectl-"); ok && plugin != "" {
		// krew's convention: underscores in the file name stand for dashes in the command.
		return "kubectl " + strings.ReplaceAll(plugin, "_", "-")
	}
	return "readyspan"
}

func usage() string {
	r := strings.NewReplacer("PROG", prog, "ROLLOUTKINDS", plurals(tracer.Kinds.RolloutKinds()), "EXPLAINKINDS", explainNames("|", "|"))
	return r.Replace(`PROG traces Pod startup (submit, apiserver, controllers, scheduling, kubelet, status) and
the rollouts of ROLLOUTKINDS.

Usage:
  PROG explain  (EXPLAINKINDS)/NAME [-n NS] [flags]
                                    reconstruct from the objects and events still in the API:
                                    a Pod's waterfall, a workload's latest rollout as a Gantt chart,
                                    a Job's or CronJob's Pods as waterfalls, a Node's startup
  PROG watch    [-n NS | -A] [flags]
                                    print a waterfall for each Pod as its startup completes (and,
                                    with -A, each new Node), and a Gantt chart for each rollout
  PROG record   DIR [-n NS | -A] [flags]
                                    record the watch streams readyspan consumes into DIR
  PROG replay   DIR [flags]         rebuild the traces of a recording, offline
  PROG compare  A B [flags]         is B slower than A, by how much, with what uncertainty and
                                    because of what (each a recording, a file of exported traces
                                    or, with --url, a window of a running readyspan's traces)
  PROG gate     (KIND/NAME | --for DURATION | --recording DIR) --slo FILE [-n NS | -A] [flags]
                                    judge a rollout, every Pod started in a window, or a
                                    recording against an SLO file: exit 0 met, 1 broken, 2 no verdict
  PROG run      [flags]             the daemon: watch the cluster, export traces (OTLP) and metrics
  PROG node     --otlp-endpoint ADDR [flags]
                                    the node component (a DaemonSet): report when kube-proxy's
                                    rules on this node take each Pod's address in and out
  PROG version

explain, watch and record take kubectl's flags (--kubeconfig, --context, --cluster, --user,
-n/--namespace, --as, --request-timeout, ...) with kubectl's meaning; -n defaults to the
kubeconfig context's namespace. Run "PROG COMMAND -h" for a command's flags.
`)
}

// plurals lists kinds as prose: "Deployments, StatefulSets and DaemonSets".
func plurals(kinds []string) string {
	for i, k := range kinds {
		kinds[i] = k + "s"
	}
	if len(kinds) < 2 {
		return strings.Join(kinds, "")
	}
	return strings.Join(kinds[:len(kinds)-1], ", ") + " and " + kinds[len(kinds)-1]
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		code := 1
		var ec *exitCode
		if errors.As(err, &ec) {
			code = ec.code
		}
		if !errors.Is(err, pflag.ErrHelp) && (ec == nil || ec.err != nil) {
			printError(os.Stderr, err)
		}
		os.Exit(code)
	}
}

// printError writes the error a command ended with; it may quote the cluster (an apiserver's
// message, an object's name), so each line is escaped and bounded as a warning's are.
func printError(w io.Writer, err error) { printLines(w, "", err.Error()) }

// run runs one command. Everything it writes to stderr (messages, warnings, log lines, client-go's
// own) passes through safetext.Writer, so no string from the cluster reaches the terminal as a
// control sequence; stdout is guarded per output format (outputFlag), since -o html is a page.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	guard := safetext.NewWriter(stderr)
	defer guard.Flush()
	stderr = guard
	// client-go logs through klog, which would write to the process's own stderr past the
	// guard; its warnings go through slog's text handler instead, which quotes any value with a
	// control in it (run replaces this with the daemon's own logger).
	klog.SetSlogLogger(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if len(args) == 0 {
		fmt.Fprint(stderr, usage())
		return errors.New("no command given")
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "run":
		return runDaemon(ctx, rest, stdout, stderr)
	case "node":
		return runNode(ctx, rest, stdout, stderr)
	case "watch":
		return runWatch(ctx, rest, stdout, stderr)
	case "explain":
		return runExplain(ctx, rest, stdout, stderr)
	case "record":
		return runRecord(ctx, rest, stdout, stderr)
	case "replay":
		return runReplay(ctx, rest, stdout, stderr)
	case "compare":
		return runCompare(ctx, rest, stdout, stderr)
	case "gate":
		return runGate(ctx, rest, stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintf(stdout, "readyspan %s (commit %s)\n", version, commit)
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage())
		return nil
	}
	fmt.Fprint(stderr, usage())
	return fmt.Errorf("unknown command %q (run %q for help)", cmd, prog+" help")
}
