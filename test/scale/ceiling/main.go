// Command ceiling measures readyspan's own ceiling apart from the control plane (docs/scale.md):
// it serves a recording of the scale test bed's load through test/scale/fakeapi at chosen rates
// to `readyspan run` and to the bare baseline, one after the other at each rate, and reports the
// rate at which each falls behind, its CPU per 1,000 startups and its memory.
//
//	ceiling record --kubeconfig .local/kubeconfig --out DIR   # record a cluster's load (whole objects)
//	ceiling run --recording DIR --rates 100,300,1000 ...      # measure (make ceiling)
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: ceiling record|run [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "record":
		err = record(ctx, os.Args[2:])
	case "run":
		err = run(ctx, os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q (record, run)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ceiling:", err)
		os.Exit(1)
	}
}
