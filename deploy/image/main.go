// Command image builds readyspan's container image without Docker and pushes it to a registry
// or writes it as an OCI image layout tarball. `make image` runs it through build.sh.
//
// The image is distroless-style, built from nothing: the static readyspan binary as /readyspan,
// /etc/passwd and /etc/group with the nonroot user (65532), the host's CA bundle, user
// 65532:65532, entrypoint /readyspan. Every timestamp is --source-date-epoch, so the same inputs
// give the same digest.
//
//	go run . --binary ../../bin/readyspan --image 127.0.0.1:5000/readyspan/readyspan:dev
//	go run . --binary ../../bin/readyspan --image readyspan:dev --tar readyspan.tar
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Defaults, named so build.sh and the docs can refer to them.
const (
	defaultImage    = "127.0.0.1:5000/readyspan/readyspan:dev"
	defaultBinary   = "../../bin/readyspan"
	defaultCABundle = "/etc/ssl/certs/ca-certificates.crt"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) (err error) {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	var (
		cfg      Config
		image    = fs.String("image", envOr("IMAGE", defaultImage), "image reference to push or to name in the tarball ($IMAGE)")
		tarPath  = fs.String("tar", "", "write an OCI image layout tarball to this file instead of pushing")
		insecure = fs.Bool("insecure", false, "talk plain HTTP to the registry (localhost, 127.0.0.0/8 and private addresses already are)")
		epoch    = fs.Int64("source-date-epoch", 0, "Unix time for every timestamp in the image ($SOURCE_DATE_EPOCH)")
	)
	fs.StringVar(&cfg.Binary, "binary", defaultBinary, "the static readyspan binary")
	fs.StringVar(&cfg.CABundle, "ca-bundle", defaultCABundle, "PEM CA bundle to install as /etc/ssl/certs/ca-certificates.crt")
	fs.StringVar(&cfg.Version, "version", "dev", "value of the org.opencontainers.image.version label")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if v := os.Getenv("SOURCE_DATE_EPOCH"); v != "" && *epoch == 0 {
		if _, err := fmt.Sscan(v, epoch); err != nil {
			return fmt.Errorf("parse SOURCE_DATE_EPOCH %q: %w", v, err)
		}
	}
	cfg.Created = time.Unix(*epoch, 0).UTC()

	opts := []name.Option{name.WeakValidation}
	if *insecure {
		opts = append(opts, name.Insecure)
	}
	ref, err := name.ParseReference(*image, opts...)
	if err != nil {
		return fmt.Errorf("parse image reference %q: %w", *image, err)
	}

	img, err := Build(cfg)
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return fmt.Errorf("compute image digest: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return fmt.Errorf("read image config: %w", err)
	}
	platform := cf.OS + "/" + cf.Architecture

	if *tarPath != "" {
		if err := WriteOCITarball(*tarPath, ref, img); err != nil {
			return err
		}
		fmt.Printf("image: wrote %s (%s, %s) to %s\n", ref.Name(), platform, digest, *tarPath)
		return nil
	}

	err = remote.Write(ref, img,
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(authn.DefaultKeychain),
		remote.WithUserAgent("readyspan-image"))
	if err != nil {
		hint := ""
		if strings.HasPrefix(ref.Context().RegistryStr(), "127.0.0.1:") || strings.HasPrefix(ref.Context().RegistryStr(), "localhost:") {
			hint = " (is the local cluster's registry up? make cluster-up)"
		}
		return fmt.Errorf("push %s%s: %w", ref.Name(), hint, err)
	}
	fmt.Printf("image: pushed %s@%s (%s)\n", ref.Name(), digest, platform)
	return nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

var errDynamic = errors.New("is dynamically linked; build it with CGO_ENABLED=0 (make build)")
