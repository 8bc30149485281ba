package fakeapi

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Unpack unpacks a recording kept as a .tar.gz (of one directory) into dir and returns the
// directory it holds.
func Unpack(path, dir string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return "", err
	}
	tr := tar.NewReader(gz)
	top := ""
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", err
		}
		name := filepath.Clean(h.Name)
		if filepath.IsAbs(name) || strings.HasPrefix(name, "..") {
			return "", fmt.Errorf("%s: entry %q leaves the archive", path, h.Name)
		}
		target := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return "", err
			}
			if top == "" {
				top = target
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return "", err
			}
			out, err := os.Create(target)
			if err != nil {
				return "", err
			}
			_, err = io.Copy(out, io.LimitReader(tr, 1<<30))
			out.Close()
			if err != nil {
				return "", err
			}
			if top == "" {
				top = filepath.Dir(target)
			}
		}
	}
	if top == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return top, nil
}
