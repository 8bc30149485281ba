package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The user the image runs as, as in distroless' nonroot images.
const (
	nonrootUID  = 65532
	nonrootName = "nonroot"
)

// Config is what goes into the image.
type Config struct {
	// Binary is the path of the static readyspan binary; its ELF header decides the platform.
	Binary string
	// CABundle is a PEM file installed as /etc/ssl/certs/ca-certificates.crt, where Go's
	// crypto/x509 looks on Linux (for an OTLP endpoint over TLS).
	CABundle string
	// Version becomes the org.opencontainers.image.version label.
	Version string
	// Created is every timestamp in the image: config, history and file times.
	Created time.Time
}

const passwd = `root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
`

const group = `root:x:0:
nobody:x:65534:
nonroot:x:65532:
`

// Build assembles the image: a base layer (users, CA bundle, /tmp, the nonroot home) and a
// layer with the binary, so a new binary reuses the base layer in the registry.
func Build(cfg Config) (v1.Image, error) {
	bin, err := os.ReadFile(cfg.Binary)
	if err != nil {
		return nil, fmt.Errorf("read readyspan binary: %w", err)
	}
	platform, err := elfPlatform(cfg.Binary)
	if err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(cfg.CABundle)
	if err != nil {
		return nil, fmt.Errorf("read CA bundle (apt-get install ca-certificates, or pass --ca-bundle): %w", err)
	}
	if !bytes.Contains(ca, []byte("-----BEGIN CERTIFICATE-----")) {
		return nil, fmt.Errorf("CA bundle %s holds no PEM certificate", cfg.CABundle)
	}

	base, err := layer(cfg.Created, []entry{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/ssl/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: ca},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/nonroot/", mode: 0o700, dir: true, uid: nonrootUID, gid: nonrootUID},
		{name: "tmp/", mode: 0o1777, dir: true},
	})
	if err != nil {
		return nil, fmt.Errorf("build base layer: %w", err)
	}
	app, err := layer(cfg.Created, []entry{
		{name: "readyspan", mode: 0o755, data: bin},
	})
	if err != nil {
		return nil, fmt.Errorf("build binary layer: %w", err)
	}

	created := v1.Time{Time: cfg.Created}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, MediaType: types.OCILayer, History: v1.History{
			Created: created, CreatedBy: "readyspan deploy/image: users, CA certificates", Comment: "base"}},
		mutate.Addendum{Layer: app, MediaType: types.OCILayer, History: v1.History{
			Created: created, CreatedBy: "readyspan deploy/image: COPY bin/readyspan /readyspan"}},
	)
	if err != nil {
		return nil, fmt.Errorf("append layers: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("read image config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.Created = created
	cf.OS = platform.OS
	cf.Architecture = platform.Architecture
	cf.Variant = platform.Variant
	cf.Config.User = strconv.Itoa(nonrootUID) + ":" + strconv.Itoa(nonrootUID)
	cf.Config.Entrypoint = []string{"/readyspan"}
	cf.Config.Cmd = nil
	cf.Config.WorkingDir = "/"
	cf.Config.Env = []string{"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}
	cf.Config.ExposedPorts = map[string]struct{}{"8080/tcp": {}}
	cf.Config.Labels = map[string]string{
		"org.opencontainers.image.title":   "readyspan",
		"org.opencontainers.image.source":  "https://github.com/readyspan/readyspan",
		"org.opencontainers.image.version": cfg.Version,
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("set image config: %w", err)
	}
	return img, nil
}

type entry struct {
	name     string
	mode     int64
	dir      bool
	data     []byte
	uid, gid int
}

// layer writes the entries into one gzip'd tar layer with fixed times and owners.
func layer(mtime time.Time, entries []entry) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{
			Name:    e.name,
			Mode:    e.mode,
			Uid:     e.uid,
			Gid:     e.gid,
			ModTime: mtime,
			Format:  tar.FormatPAX,
		}
		if e.dir {
			hdr.Typeflag = tar.TypeDir
		} else {
			hdr.Typeflag = tar.TypeReg
			hdr.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if !e.dir {
			if _, err := tw.Write(e.data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// elfPlatform reads the binary's ELF header: the image's platform is the binary's, and a
// dynamically linked binary would not start in an image without a C library.
func elfPlatform(path string) (v1.Platform, error) {
	f, err := elf.Open(path)
	if err != nil {
		return v1.Platform{}, fmt.Errorf("read %s as a Linux binary: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return v1.Platform{}, fmt.Errorf("%s %w", path, errDynamic)
		}
	}
	p := v1.Platform{OS: "linux"}
	switch f.Machine {
	case elf.EM_X86_64:
		p.Architecture = "amd64"
	case elf.EM_AARCH64:
		p.Architecture = "arm64"
	case elf.EM_386:
		p.Architecture = "386"
	case elf.EM_ARM:
		p.Architecture, p.Variant = "arm", "v7"
	case elf.EM_PPC64:
		p.Architecture = "ppc64le"
	case elf.EM_S390:
		p.Architecture = "s390x"
	case elf.EM_RISCV:
		p.Architecture = "riscv64"
	default:
		return v1.Platform{}, fmt.Errorf("%s: unsupported machine %s", path, f.Machine)
	}
	return p, nil
}
