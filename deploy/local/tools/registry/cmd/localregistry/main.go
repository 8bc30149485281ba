// Command localregistry is the local cluster's image registry and image builder. It needs no
// network and no Docker: images are assembled offline with go-containerregistry.
//
//	localregistry serve  --addr 127.0.0.1:5000 [--load REPO:TAG=FILE.tar]... \
//	                     [--blob-delay 2s] [--delay-repo PREFIX]... [--cold-repo REPO --cold-base REPO:TAG]
//	localregistry images --out DIR --busybox /bin/busybox --pause bin/pause
//	localregistry build  --tag REF --out FILE.tar --file SRC:DST[:MODE]... [--link DST:TARGET]... [--entrypoint a,b] [--cmd a,b]
//	localregistry push   FILE.tar REF
//
// serve runs an in-memory OCI registry (it accepts pushes too). With --blob-delay every blob GET
// in a repository matching a --delay-repo prefix (all repositories if none is given) waits that
// long before it is served, which makes real cold pulls of a controllable length. With
// --cold-repo, a manifest request for any tag of that repository that does not exist yet creates
// it: the --cold-base image plus one layer unique to the tag. Every new tag is therefore a
// genuinely cold pull on a node that already has the base image, however many times the demo or
// the tests run. A cold tag named delay-DURATION-ANYTHING (e.g. delay-20s-run1) serves its own
// blobs after DURATION instead of --blob-delay, for a pull of a chosen length.
package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The images every local cluster has. Their references are relative to the registry address.
const (
	BusyboxRepoTag = "readyspan/busybox:v1"
	PauseRepoTag   = "readyspan/pause:v1"
)

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	if len(os.Args) < 2 {
		usage()
	}
	args := os.Args[2:]
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(args)
	case "images":
		err = images(args)
	case "build":
		err = buildCmd(args)
	case "push":
		err = push(args)
	default:
		usage()
	}
	if err != nil {
		log.Fatalf("localregistry %s: %v", os.Args[1], err)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: localregistry serve|images|build|push [flags]  (see the package comment)")
	os.Exit(2)
}

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

// ---- serve ----------------------------------------------------------------------------------

type server struct {
	addr       string
	reg        http.Handler
	blobDelay  time.Duration
	delayRepos []string
	coldRepo   string
	coldBase   v1.Image
	coldSize   int

	mu         sync.Mutex
	created    map[string]bool          // cold tags already synthesized
	blobDelays map[string]time.Duration // blob digest -> delay, for delay-DURATION-* cold tags
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:5000", "listen address")
	blobDelay := fs.Duration("blob-delay", 0, "delay before serving each blob GET (in the --delay-repo repositories)")
	coldRepo := fs.String("cold-repo", "", "repository whose tags are created on first request (e.g. readyspan/cold)")
	coldBase := fs.String("cold-base", BusyboxRepoTag, "loaded image that cold images are built on")
	coldSize := fs.Int("cold-size", 1<<20, "bytes of unique data in each cold image's own layer")
	var loads, delayRepos listFlag
	fs.Var(&loads, "load", "REPO:TAG=FILE.tar image to preload (repeatable)")
	fs.Var(&delayRepos, "delay-repo", "repository prefix that --blob-delay applies to (repeatable; default all)")
	_ = fs.Parse(args)

	s := &server{
		addr:       *addr,
		blobDelay:  *blobDelay,
		delayRepos: delayRepos,
		coldRepo:   strings.Trim(*coldRepo, "/"),
		coldSize:   *coldSize,
		created:    map[string]bool{},
		blobDelays: map[string]time.Duration{},
		reg:        registry.New(registry.Logger(log.New(io.Discard, "", 0))),
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
			log.Fatalf("serve: %v", err)
		}
	}()

	loaded := map[string]v1.Image{}
	for _, l := range loads {
		repoTag, file, ok := strings.Cut(l, "=")
		if !ok {
			return fmt.Errorf("--load %q: want REPO:TAG=FILE.tar", l)
		}
		img, err := tarball.ImageFromPath(file, nil)
		if err != nil {
			return fmt.Errorf("load %s: %w", file, err)
		}
		if err := writeImage(s.addr, repoTag, img, remote.WithTransport(handlerTransport{s.reg})); err != nil {
			return err
		}
		loaded[repoTag] = img
		d, _ := img.Digest()
		log.Printf("preloaded %s/%s %s", s.addr, repoTag, d)
	}
	if s.coldRepo != "" {
		if s.coldBase = loaded[*coldBase]; s.coldBase == nil {
			return fmt.Errorf("--cold-base %s is not among the --load images", *coldBase)
		}
	}
	log.Printf("serving on %s (blob-delay %s for %v, cold repo %q)", s.addr, s.blobDelay, s.delayRepos, s.coldRepo)

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
	log.Printf("stopping")
	return srv.Close()
}

// repoOf splits /v2/<repo>/(blobs|manifests)/<ref> into its parts.
func repoOf(path string) (repo, kind, ref string, ok bool) {
	p := strings.TrimPrefix(path, "/v2/")
	for _, k := range []string{"/blobs/", "/manifests/"} {
		if i := strings.LastIndex(p, k); i > 0 {
			return p[:i], strings.Trim(k, "/"), p[i+len(k):], true
		}
	}
	return "", "", "", false
}

func (s *server) delayed(repo string) bool {
	if s.blobDelay <= 0 {
		return false
	}
	if len(s.delayRepos) == 0 {
		return true
	}
	for _, p := range s.delayRepos {
		if strings.HasPrefix(repo, strings.Trim(p, "/")) {
			return true
		}
	}
	return false
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	repo, kind, ref, ok := repoOf(r.URL.Path)
	if ok && kind == "manifests" && repo == s.coldRepo && !strings.Contains(ref, ":") &&
		(r.Method == http.MethodGet || r.Method == http.MethodHead) {
		if err := s.ensureCold(ref); err != nil {
			log.Printf("cold %s:%s: %v", repo, ref, err)
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	var delay time.Duration
	if ok && kind == "blobs" && r.Method == http.MethodGet {
		s.mu.Lock()
		d, own := s.blobDelays[ref]
		s.mu.Unlock()
		if own {
			delay = d
		} else if s.delayed(repo) {
			delay = s.blobDelay
		}
		time.Sleep(delay)
	}
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	s.reg.ServeHTTP(rec, r)
	if ok && r.Method != http.MethodHead {
		log.Printf("%s %s %d %s (delay %s)", r.Method, r.URL.Path, rec.status, time.Since(start).Round(time.Millisecond), delay)
	}
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) { r.status = code; r.ResponseWriter.WriteHeader(code) }

// ensureCold pushes the cold image for tag unless it exists already. It runs before the manifest
// request is served, so the client sees an ordinary registry.
func (s *server) ensureCold(tag string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.created[tag] {
		return nil
	}
	var tagDelay time.Duration
	if rest, ok := strings.CutPrefix(tag, "delay-"); ok {
		if d, _, ok := strings.Cut(rest, "-"); ok {
			var err error
			if tagDelay, err = time.ParseDuration(d); err != nil {
				return fmt.Errorf("tag %q: bad delay: %w", tag, err)
			}
		}
	}
	data := make([]byte, s.coldSize)
	seed := sha256.Sum256([]byte(fmt.Sprintf("%s:%s:%d", s.coldRepo, tag, time.Now().UnixNano())))
	for i := 0; i < len(data); i += len(seed) { // incompressible, unique per tag
		seed = sha256.Sum256(seed[:])
		copy(data[i:], seed[:])
	}
	layer, err := layerOf([]tarEntry{{path: "etc/readyspan-cold", mode: 0o644, data: data}})
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(s.coldBase, layer)
	if err != nil {
		return err
	}
	if err := writeImage(s.addr, s.coldRepo+":"+tag, img, remote.WithTransport(handlerTransport{s.reg})); err != nil {
		return err
	}
	s.created[tag] = true
	if tagDelay > 0 {
		cfg, err := img.ConfigName()
		if err != nil {
			return err
		}
		dig, err := layer.Digest()
		if err != nil {
			return err
		}
		s.blobDelays[cfg.String()] = tagDelay
		s.blobDelays[dig.String()] = tagDelay
	}
	d, _ := img.Digest()
	log.Printf("created cold image %s/%s:%s %s (blob delay %s)", s.addr, s.coldRepo, tag, d, tagDelay)
	return nil
}

// handlerTransport serves requests with the registry handler in-process, so the server's own
// writes bypass the delay and cold-image middleware (and cannot deadlock on it).
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	r = r.Clone(r.Context())
	if r.Body == nil {
		r.Body = http.NoBody // a server-side request always has a body
	}
	defer r.Body.Close()
	t.h.ServeHTTP(rec, r)
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}

func writeImage(addr, repoTag string, img v1.Image, opts ...remote.Option) error {
	ref, err := name.ParseReference(addr+"/"+repoTag, name.Insecure)
	if err != nil {
		return err
	}
	if err := remote.Write(ref, img, opts...); err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	return nil
}

// ---- images / build / push ------------------------------------------------------------------

// images builds the two base images every local cluster needs.
func images(args []string) error {
	fs := flag.NewFlagSet("images", flag.ExitOnError)
	out := fs.String("out", ".", "directory for busybox.tar and pause.tar")
	busybox := fs.String("busybox", "/bin/busybox", "a static busybox binary (Debian's busybox-static)")
	pause := fs.String("pause", "", "the static pause binary (built from ./cmd/pause)")
	registryAddr := fs.String("registry", "127.0.0.1:5000", "registry host the tarballs are tagged for")
	_ = fs.Parse(args)
	if *pause == "" {
		return fmt.Errorf("--pause is required")
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	// busybox: one file plus a symlink per applet, so `sh`, `httpd`, `wget`... all resolve.
	appletsOut, err := exec.Command(*busybox, "--list").Output()
	if err != nil {
		return fmt.Errorf("%s --list: %w", *busybox, err)
	}
	spec := imageSpec{cmd: []string{"sh"}}
	bb, err := os.ReadFile(*busybox)
	if err != nil {
		return err
	}
	spec.entries = append(spec.entries, tarEntry{path: "bin/busybox", mode: 0o755, data: bb})
	for _, a := range strings.Fields(string(appletsOut)) {
		if a != "busybox" {
			spec.entries = append(spec.entries, tarEntry{path: "bin/" + a, link: "/bin/busybox"})
		}
	}
	if err := buildTo(filepath.Join(*out, "busybox.tar"), *registryAddr+"/"+BusyboxRepoTag, spec); err != nil {
		return err
	}
	pb, err := os.ReadFile(*pause)
	if err != nil {
		return err
	}
	return buildTo(filepath.Join(*out, "pause.tar"), *registryAddr+"/"+PauseRepoTag, imageSpec{
		entrypoint: []string{"/pause"},
		entries:    []tarEntry{{path: "pause", mode: 0o755, data: pb}},
	})
}

func buildCmd(args []string) error {
	fs := flag.NewFlagSet("build", flag.ExitOnError)
	tag := fs.String("tag", "", "image reference the tarball is tagged with")
	out := fs.String("out", "", "output tarball (docker-archive format)")
	ep := fs.String("entrypoint", "", "entrypoint, comma separated")
	cmd := fs.String("cmd", "", "cmd, comma separated")
	var files, links listFlag
	fs.Var(&files, "file", "SRC:DST[:MODE] file to add (repeatable)")
	fs.Var(&links, "link", "DST:TARGET symlink to add (repeatable)")
	_ = fs.Parse(args)
	if *tag == "" || *out == "" {
		return fmt.Errorf("--tag and --out are required")
	}
	spec := imageSpec{entrypoint: splitComma(*ep), cmd: splitComma(*cmd)}
	for _, f := range files {
		p := strings.Split(f, ":")
		if len(p) < 2 {
			return fmt.Errorf("--file %q: want SRC:DST[:MODE]", f)
		}
		data, err := os.ReadFile(p[0])
		if err != nil {
			return err
		}
		mode := int64(0o755)
		if len(p) > 2 {
			if mode, err = strconv.ParseInt(p[2], 8, 64); err != nil {
				return fmt.Errorf("--file %q: %w", f, err)
			}
		}
		spec.entries = append(spec.entries, tarEntry{path: p[1], mode: mode, data: data})
	}
	for _, l := range links {
		dst, target, ok := strings.Cut(l, ":")
		if !ok {
			return fmt.Errorf("--link %q: want DST:TARGET", l)
		}
		spec.entries = append(spec.entries, tarEntry{path: dst, link: target})
	}
	return buildTo(*out, *tag, spec)
}

func push(args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("usage: localregistry push FILE.tar HOST/REPO:TAG")
	}
	img, err := tarball.ImageFromPath(args[0], nil)
	if err != nil {
		return err
	}
	ref, err := name.ParseReference(args[1], name.Insecure)
	if err != nil {
		return err
	}
	if err := remote.Write(ref, img); err != nil {
		return err
	}
	d, _ := img.Digest()
	fmt.Printf("pushed %s %s\n", ref, d)
	return nil
}

func splitComma(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

type tarEntry struct {
	path string // relative to the image root
	mode int64
	data []byte
	link string // symlink target if set
}

type imageSpec struct {
	entries         []tarEntry
	entrypoint, cmd []string
}

// layerOf builds one reproducible layer (fixed mtimes, parent directories included).
func layerOf(entries []tarEntry) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	dirs := map[string]bool{}
	mkdirs := func(p string) error {
		parts := strings.Split(p, "/")
		cur := ""
		for _, d := range parts[:len(parts)-1] {
			cur += d + "/"
			if !dirs[cur] {
				dirs[cur] = true
				if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: cur, Mode: 0o755, ModTime: epoch}); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, e := range entries {
		p := strings.TrimPrefix(e.path, "/")
		if strings.HasSuffix(p, "/") { // a directory
			if err := mkdirs(p + "."); err != nil {
				return nil, err
			}
			continue
		}
		if err := mkdirs(p); err != nil {
			return nil, err
		}
		h := &tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: e.mode, Size: int64(len(e.data)), ModTime: epoch}
		if e.link != "" {
			h = &tar.Header{Typeflag: tar.TypeSymlink, Name: p, Linkname: e.link, Mode: 0o777, ModTime: epoch}
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if e.link == "" {
			if _, err := tw.Write(e.data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
}

func buildTo(out, tag string, spec imageSpec) error {
	// Directories every container runtime expects to mount over.
	base := []tarEntry{}
	for _, d := range []string{"tmp", "proc", "sys", "dev", "etc", "var/run", "root"} {
		base = append(base, tarEntry{path: d + "/"})
	}
	layer, err := layerOf(append(base, spec.entries...))
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = runtime.GOARCH, "linux"
	cf.Created = v1.Time{Time: time.Unix(0, 0)}
	cf.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	cf.Config.Entrypoint = spec.entrypoint
	cf.Config.Cmd = spec.cmd
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	ref, err := name.ParseReference(tag, name.Insecure)
	if err != nil {
		return err
	}
	if err := tarball.WriteToFile(out, ref, img); err != nil {
		return err
	}
	d, _ := img.Digest()
	fmt.Printf("built %s %s -> %s\n", tag, d, out)
	return nil
}
