package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

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
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	tw := &layoutWriter{tw: tar.NewWriter(w), mtime: cf.Created.Time}
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.tw.WriteHeader(&tar.Header{Name: dir, Mode: 0o755, ModTime: tw.mtime, Typeflag: tar.TypeDir}); err != nil {
			return err
		}
	}
	if err := tw.addBytes("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	if err := tw.addLayers(img); err != nil {
		return err
	}
	rawConfig, err := img.RawConfigFile()
	if err != nil {
		return err
	}
	configDigest, err := img.ConfigName()
	if err != nil {
		return err
	}
	if err := tw.addBytes("blobs/sha256/"+configDigest.Hex, rawConfig); err != nil {
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
	if err := tw.addBytes("blobs/sha256/"+digest.Hex, rawManifest); err != nil {
		return err
	}
	rawIndex, err := indexOf(ref, img, cf, int64(len(rawManifest)), digest)
	if err != nil {
		return err
	}
	if err := tw.addBytes("index.json", rawIndex); err != nil {
		return err
	}
	return tw.tw.Close()
}

// layoutWriter writes the files of an OCI layout into a tar, each with the image's creation
// time, so that the same image gives the same bytes.
type layoutWriter struct {
	tw    *tar.Writer
	mtime time.Time
}

func (lw *layoutWriter) add(name string, size int64, r io.Reader) error {
	if err := lw.tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: size, ModTime: lw.mtime, Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	n, err := io.Copy(lw.tw, r)
	if err == nil && n != size {
		err = fmt.Errorf("%s: wrote %d bytes, want %d", name, n, size)
	}
	return err
}

func (lw *layoutWriter) addBytes(name string, data []byte) error {
	return lw.add(name, int64(len(data)), bytes.NewReader(data))
}

// addLayers writes each layer's compressed blob.
func (lw *layoutWriter) addLayers(img v1.Image) error {
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
		err = lw.add("blobs/sha256/"+d.Hex, size, rc)
		rc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// indexOf is the layout's index.json: the one manifest, under the reference's names.
func indexOf(ref name.Reference, img v1.Image, cf *v1.ConfigFile, size int64, digest v1.Hash) ([]byte, error) {
	mt, err := img.MediaType()
	if err != nil {
		return nil, err
	}
	index := v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Manifests: []v1.Descriptor{{
			MediaType: mt,
			Size:      size,
			Digest:    digest,
			Platform:  &v1.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant},
			Annotations: map[string]string{
				"org.opencontainers.image.ref.name": ref.Identifier(),
				"io.containerd.image.name":          ref.Name(),
			},
		}},
	}
	return json.Marshal(index)
}
