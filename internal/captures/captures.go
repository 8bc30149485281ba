// Package captures finds the real captures of tracer/testdata/real-node (readyspan's recordings
// of a real node's startups) for the tests of every package, and copies one to edit it.
package captures

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// Dir is the directory of the captures, wherever the test runs from.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "tracer", "testdata", "real-node")
}

// Path is the directory of one capture.
func Path(name string) string { return filepath.Join(Dir(), name) }

// Copy copies a capture into a temporary directory, passing each file through edit (by name)
// when edit has an entry for it.
func Copy(t testing.TB, name string, edit map[string]func([]byte) []byte) string {
	t.Helper()
	src := Path(name)
	dir := t.TempDir()
	files, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(src, f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e := edit[f.Name()]; e != nil {
			b = e(b)
		}
		if err := os.WriteFile(filepath.Join(dir, f.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
