// Command render writes readyspan's krew plugin manifest for a release from the release's
// SHA256SUMS (see package krew). `make dist` runs it:
//
//	go run ./deploy/krew/render -version v0.1.0 -sums bin/dist/SHA256SUMS -o deploy/krew/readyspan.yaml
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/readyspan/readyspan/deploy/krew"
)

func main() {
	version := flag.String("version", "", "the release, as in VERSION (v0.1.0)")
	sums := flag.String("sums", "", "the release archives' SHA256SUMS")
	out := flag.String("o", "", "the manifest to write (stdout when empty)")
	flag.Parse()
	if err := run(*version, *sums, *out); err != nil {
		fmt.Fprintf(os.Stderr, "render: %v\n", err)
		os.Exit(1)
	}
}

func run(version, sums, out string) error {
	f, err := os.Open(sums)
	if err != nil {
		return fmt.Errorf("open sums: %w", err)
	}
	defer f.Close()
	archives, err := krew.ParseSums(f, version)
	if err != nil {
		return err
	}
	// Rendered in memory first: a failure leaves the committed manifest as it was.
	var buf bytes.Buffer
	if err := krew.Render(&buf, version, archives); err != nil {
		return err
	}
	if out == "" {
		_, err = os.Stdout.Write(buf.Bytes())
		return err
	}
	if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	return nil
}
