package main

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

const testPEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"

// fixture builds a tiny static binary and a CA bundle, as make build and the host provide them.
func fixture(t *testing.T) (binary, ca string) {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(src, "go.mod"), "module hello\n\ngo 1.26\n")
	write(t, filepath.Join(src, "main.go"), "package main\n\nfunc main() { println(\"readyspan\") }\n")
	binary = filepath.Join(dir, "readyspan")
	cmd := exec.Command("go", "build", "-trimpath", "-o", binary, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build test binary: %v\n%s", err, out)
	}
	ca = filepath.Join(dir, "ca.crt")
	write(t, ca, testPEM)
	return binary, ca
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestPushAndReadBack(t *testing.T) {
	binary, ca := fixture(t)
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	image := strings.TrimPrefix(srv.URL, "http://") + "/readyspan/readyspan:test"

	args := []string{"--binary", binary, "--ca-bundle", ca, "--image", image, "--version", "v0.0.0-test", "--source-date-epoch", "1700000000"}
	if err := run(context.Background(), args); err != nil {
		t.Fatal(err)
	}

	ref, err := name.ParseReference(image)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(ref)
	if err != nil {
		t.Fatalf("read back %s: %v", image, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("user = %q, want 65532:65532", cf.Config.User)
	}
	if got := strings.Join(cf.Config.Entrypoint, " "); got != "/readyspan" {
		t.Errorf("entrypoint = %q, want /readyspan", got)
	}
	if cf.OS != "linux" || cf.Architecture == "" {
		t.Errorf("platform = %s/%s", cf.OS, cf.Architecture)
	}
	if want := time.Unix(1700000000, 0).UTC(); !cf.Created.Time.Equal(want) {
		t.Errorf("created = %s, want %s", cf.Created.Time, want)
	}
	if got := cf.Config.Labels["org.opencontainers.image.version"]; got != "v0.0.0-test" {
		t.Errorf("version label = %q", got)
	}
	mt, err := img.MediaType()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mt), "oci") {
		t.Errorf("manifest media type = %s, want OCI", mt)
	}

	files := flatten(t, img)
	bin, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	checkFile(t, files, "readyspan", 0o755, 0, bin)
	checkFile(t, files, "etc/ssl/certs/ca-certificates.crt", 0o644, 0, []byte(testPEM))
	if p := files["etc/passwd"]; p == nil || !bytes.Contains(p.data, []byte("nonroot:x:65532:65532:")) {
		t.Errorf("etc/passwd has no nonroot user 65532")
	}
	if g := files["etc/group"]; g == nil || !bytes.Contains(g.data, []byte("nonroot:x:65532:")) {
		t.Errorf("etc/group has no nonroot group 65532")
	}
	if h := files["home/nonroot"]; h == nil || h.hdr.Uid != 65532 {
		t.Errorf("home/nonroot is missing or not owned by 65532")
	}
	if tmp := files["tmp"]; tmp == nil || tmp.hdr.Mode&0o1777 != 0o1777 {
		t.Errorf("tmp is missing or not mode 1777")
	}
}

type file struct {
	hdr  *tar.Header
	data []byte
}

func flatten(t *testing.T, img v1.Image) map[string]*file {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string]*file{}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimSuffix(hdr.Name, "/")] = &file{hdr: hdr, data: data}
	}
	return files
}

func checkFile(t *testing.T, files map[string]*file, path string, mode int64, uid int, data []byte) {
	t.Helper()
	f := files[path]
	if f == nil {
		t.Errorf("%s is missing from the image", path)
		return
	}
	if f.hdr.Mode&0o7777 != mode || f.hdr.Uid != uid {
		t.Errorf("%s: mode %o uid %d, want mode %o uid %d", path, f.hdr.Mode, f.hdr.Uid, mode, uid)
	}
	if !bytes.Equal(f.data, data) {
		t.Errorf("%s: content differs from the input", path)
	}
}

func TestReproducible(t *testing.T) {
	binary, ca := fixture(t)
	cfg := Config{Binary: binary, CABundle: ca, Version: "dev", Created: time.Unix(0, 0).UTC()}
	var digests []v1.Hash
	for range 2 {
		img, err := Build(cfg)
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, d)
	}
	if digests[0] != digests[1] {
		t.Errorf("two builds of the same inputs differ: %s vs %s", digests[0], digests[1])
	}
}

func TestOCITarball(t *testing.T) {
	binary, ca := fixture(t)
	out := filepath.Join(t.TempDir(), "readyspan.tar")
	image := "example.invalid/readyspan/readyspan:v1"
	if err := run(context.Background(), []string{"--binary", binary, "--ca-bundle", ca, "--image", image, "--tar", out}); err != nil {
		t.Fatal(err)
	}
	// Unpack the tarball into an OCI layout directory and read it back.
	dir := t.TempDir()
	untar(t, out, dir)
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("read OCI layout: %v", err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("index has %d manifests, want 1", len(im.Manifests))
	}
	desc := im.Manifests[0]
	if got := desc.Annotations["io.containerd.image.name"]; got != image {
		t.Errorf("io.containerd.image.name = %q, want %q", got, image)
	}
	if got := desc.Annotations["org.opencontainers.image.ref.name"]; got != "v1" {
		t.Errorf("org.opencontainers.image.ref.name = %q, want v1", got)
	}
	img, err := idx.Image(desc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	files := flatten(t, img)
	if files["readyspan"] == nil {
		t.Error("readyspan is missing from the tarball's image")
	}
}

func untar(t *testing.T, path, dir string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(dir, filepath.FromSlash(hdr.Name))
		if hdr.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(target, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(target, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRejectsDynamicBinary(t *testing.T) {
	const sh = "/bin/sh"
	if _, err := elfPlatform(sh); err == nil || !errors.Is(err, errDynamic) {
		if err != nil {
			t.Skipf("%s is not an ELF binary here: %v", sh, err)
		}
		t.Skipf("%s is statically linked here", sh)
	}
	_, ca := fixture(t)
	_, err := Build(Config{Binary: sh, CABundle: ca})
	if !errors.Is(err, errDynamic) {
		t.Fatalf("Build with a dynamic binary: err = %v, want %v", err, errDynamic)
	}
}
