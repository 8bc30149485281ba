// Command gen writes every file generated from phases/conventions.yaml (conventions.Generate).
// go generate ./phases runs it.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/readyspan/readyspan/internal/conventions"
)

func main() {
	root := flag.String("root", ".", "the module's root")
	flag.Parse()
	if err := run(*root); err != nil {
		fmt.Fprintln(os.Stderr, "conventions:", err)
		os.Exit(1)
	}
}

func run(root string) error {
	outs, err := conventions.Generate(root)
	if err != nil {
		return err
	}
	for _, o := range outs {
		path := filepath.Join(root, filepath.FromSlash(o.Path))
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, o.Data) {
			continue // unchanged: keep its modification time
		}
		if err := os.WriteFile(path, o.Data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
