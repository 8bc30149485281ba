package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// WriteOCITarball writes img as an OCI image layout (oci-layout, index.json, blobs/sha256/…) in
// one tar file, which `ctr images import`, `skopeo copy oci-archive:…` and `docker load` read.
// The index names the image twice: the OCI ref.name annotation (the tag) and containerd's
// io.containerd.image.name (the full reference).
func WriteOCITarball(path string, ref name.Reference, img v1.Image) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("close %s: %w", path, cerr)
		}
	}()
	if err := writeOCILayout(f, ref, img); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func writeOCILayout(w io.Writer, ref name.Reference, img v1.Image) error {
	tw := tar.NewWriter(w)
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	mtime := cf.Created.Time

	add := func(name string, size int64, r io.Reader) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: size, ModTime: mtime, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		n, err := io.Copy(tw, r)
		if err == nil && n != size {
			err = fmt.Errorf("%s: wrote %d bytes, want %d", name, n, size)
		}
		return err
	}
	addBytes := func(name string, data []byte) error {
		return add(name, int64(len(data)), bytes.NewReader(data))
	}
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Name: dir, Mode: 0o755, ModTime: mtime, Typeflag: tar.TypeDir}); err != nil {
			return err
		}
	}
	if err := addBytes("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}

	layers, err := img.Layers()
	if err != nil {
		return err
	}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return err
		}
		size, err := l.Size()
		if err != nil {
			return err
		}
		rc, err := l.Compressed()
		if err != nil {
			return err
		}
		err = add("blobs/sha256/"+d.Hex, size, rc)
		rc.Close()
		if err != nil {
			return err
		}
	}
	rawConfig, err := img.RawConfigFile()
	if err != nil {
		return err
	}
	configDigest, err := img.ConfigName()
	if err != nil {
		return err
	}
	if err := addBytes("blobs/sha256/"+configDigest.Hex, rawConfig); err != nil {
		return err
	}
	rawManifest, err := img.RawManifest()
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	if err := addBytes("blobs/sha256/"+digest.Hex, rawManifest); err != nil {
		return err
	}
	mt, err := img.MediaType()
	if err != nil {
		return err
	}
	refName := ref.Identifier()
	index := v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Manifests: []v1.Descriptor{{
			MediaType: mt,
			Size:      int64(len(rawManifest)),
			Digest:    digest,
			Platform:  &v1.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant},
			Annotations: map[string]string{
				"org.opencontainers.image.ref.name": refName,
				"io.containerd.image.name":          ref.Name(),
			},
		}},
	}
	rawIndex, err := json.Marshal(index)
	if err != nil {
		return err
	}
	if err := addBytes("index.json", rawIndex); err != nil {
		return err
	}
	return tw.Close()
}
