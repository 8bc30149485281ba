// Command localwebhook is the local cluster's admission webhook server: a real webhook the
// kube-apiserver calls over TLS (a certificate from the local PKI, deploy/local/scripts/pki.sh),
// registered by deploy/local/config/webhooks.yaml with objectSelectors, so only Pods that carry
// its labels pass through it:
//
//	readyspan.dev/inject: sidecar   /mutate adds a sidecar container, after --inject-delay
//	readyspan.dev/deny: ANY         /validate denies the Pod, after --deny-delay
//
//	localwebhook --addr 127.0.0.1:9443 --cert webhook.crt --key webhook.key \
//	             [--inject-delay 50ms] [--deny-delay 20ms] [--sidecar-image IMAGE]
//
// Every AdmissionReview it answers is one JSON line on stdout with the request's UID, the
// object's namespace and name (or generateName), the decision, and the server's own measured
// handling time, from the request's arrival to the response written: the reference a trace's
// admission span is compared with. The first request on a new connection also states the time
// from the connection's accept to the request's arrival (the TLS handshake), which the caller
// waited for too.
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"mime"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The labels the webhooks act on (the configurations' objectSelectors select the same).
const (
	InjectLabel = "readyspan.dev/inject"
	InjectValue = "sidecar"
	DenyLabel   = "readyspan.dev/deny"
	// SidecarName is the injected container's name; a Pod that has one already is left alone
	// (the apiserver may call a mutating webhook again: reinvocation).
	SidecarName = "readyspan-sidecar"
)

// Defaults of the flags.
const (
	defaultAddr        = "127.0.0.1:9443"
	defaultInjectDelay = 50 * time.Millisecond
	defaultDenyDelay   = 20 * time.Millisecond
	defaultSidecar     = "127.0.0.1:5000/readyspan/busybox:v1"
	// maxBody bounds a request body: an AdmissionReview of a Pod is a few kilobytes, and the
	// apiserver caps an object at 3 MiB.
	maxBody = 3 << 20
)

func main() {
	log.SetFlags(0)
	if err := run(); err != nil {
		log.Fatalf("localwebhook: %v", err)
	}
}

func run() (err error) {
	addr := flag.String("addr", defaultAddr, "address to serve HTTPS on")
	cert := flag.String("cert", "", "serving certificate (PEM)")
	key := flag.String("key", "", "serving certificate's key (PEM)")
	injectDelay := flag.Duration("inject-delay", defaultInjectDelay, "how long /mutate waits before it answers")
	denyDelay := flag.Duration("deny-delay", defaultDenyDelay, "how long /validate waits before it answers")
	image := flag.String("sidecar-image", defaultSidecar, "image of the injected sidecar container")
	flag.Parse()
	if *cert == "" || *key == "" {
		return errors.New("--cert and --key are required")
	}
	if *injectDelay < 0 || *denyDelay < 0 {
		return errors.New("--inject-delay and --deny-delay must not be negative")
	}
	pair, err := tls.LoadX509KeyPair(*cert, *key)
	if err != nil {
		return fmt.Errorf("load the serving certificate: %w", err)
	}
	s := &Server{InjectDelay: *injectDelay, DenyDelay: *denyDelay, SidecarImage: *image, Log: os.Stdout}
	srv := &http.Server{
		Addr: *addr, Handler: s.Handler(), ConnContext: s.ConnContext,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServeTLS("", "") }()
	log.Printf("localwebhook: serving on https://%s (inject delay %s, deny delay %s)", *addr, *injectDelay, *denyDelay)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(shutdown)
}

// Server answers AdmissionReviews (admission.k8s.io/v1).
type Server struct {
	InjectDelay, DenyDelay time.Duration
	SidecarImage           string
	// Log receives one JSON line (Record) per request.
	Log io.Writer
	mu  sync.Mutex // serialises writes to Log
}

// Record is the line logged per request.
type Record struct {
	Start        time.Time `json:"start"`
	Hook         string    `json:"hook"` // mutate or validate
	UID          string    `json:"uid,omitempty"`
	Operation    string    `json:"operation,omitempty"`
	Kind         string    `json:"kind,omitempty"`
	Namespace    string    `json:"namespace,omitempty"`
	Name         string    `json:"name,omitempty"`
	GenerateName string    `json:"generateName,omitempty"`
	Allowed      bool      `json:"allowed"`
	Patched      bool      `json:"patched,omitempty"`
	Message      string    `json:"message,omitempty"`
	Error        string    `json:"error,omitempty"`
	// HandlingMs is the server's own measure, from the request's arrival (before its body is
	// read) to the response written.
	HandlingMs float64 `json:"handlingMs"`
	// NewConnection marks the first request on its connection; ConnectMs is then the time
	// from the connection's accept to the request's arrival: the TLS handshake and the
	// request's headers, which the caller waited for before HandlingMs began.
	NewConnection bool    `json:"newConnection,omitempty"`
	ConnectMs     float64 `json:"connectMs,omitempty"`
}

// conn is what the server knows of one connection.
type conn struct {
	accepted time.Time
	used     atomic.Bool // a request has come on it
}

type connKey struct{}

// ConnContext is the http.Server's ConnContext: it stamps each connection's accept.
func (s *Server) ConnContext(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, &conn{accepted: time.Now()})
}

// Handler serves /mutate, /validate and /healthz.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/mutate", func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, "mutate") })
	mux.HandleFunc("/validate", func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, "validate") })
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	return mux
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, hook string) {
	rec := Record{Start: time.Now(), Hook: hook}
	if c, ok := r.Context().Value(connKey{}).(*conn); ok && c.used.CompareAndSwap(false, true) {
		rec.NewConnection = true
		rec.ConnectMs = float64(rec.Start.Sub(c.accepted).Microseconds()) / 1000
	}
	defer func() {
		rec.HandlingMs = float64(time.Since(rec.Start).Microseconds()) / 1000
		s.write(&rec)
	}()
	status, body, err := s.review(r, hook, &rec)
	if err != nil {
		rec.Error = err.Error()
		http.Error(w, err.Error(), status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// review reads the AdmissionReview, decides, waits the hook's delay, and returns the response's
// body; or an HTTP status and an error for a request that is not a review.
func (s *Server) review(r *http.Request, hook string, rec *Record) (int, []byte, error) {
	if r.Method != http.MethodPost {
		return http.StatusMethodNotAllowed, nil, fmt.Errorf("method %s: an AdmissionReview is POSTed", r.Method)
	}
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/json" {
		return http.StatusUnsupportedMediaType, nil, fmt.Errorf("content type %q: want application/json", r.Header.Get("Content-Type"))
	}
	raw, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxBody))
	if err != nil {
		return http.StatusRequestEntityTooLarge, nil, fmt.Errorf("read the request: %w", err)
	}
	var in admissionv1.AdmissionReview
	if err := json.Unmarshal(raw, &in); err != nil {
		return http.StatusBadRequest, nil, fmt.Errorf("decode the AdmissionReview: %w", err)
	}
	req := in.Request
	if req == nil {
		return http.StatusBadRequest, nil, errors.New("the AdmissionReview has no request")
	}
	rec.UID, rec.Operation, rec.Kind, rec.Namespace = string(req.UID), string(req.Operation), req.Kind.Kind, req.Namespace
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	var pod corev1.Pod
	if req.Kind.Kind == "Pod" && len(req.Object.Raw) > 0 {
		if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
			return http.StatusBadRequest, nil, fmt.Errorf("decode the Pod of request %s: %w", req.UID, err)
		}
		rec.Name, rec.GenerateName = pod.Name, pod.GenerateName
		if rec.Namespace == "" {
			rec.Namespace = pod.Namespace
		}
	}
	isPod := req.Kind.Kind == "Pod" && req.Operation == admissionv1.Create
	switch hook {
	case "mutate":
		time.Sleep(s.InjectDelay)
		if isPod && pod.Labels[InjectLabel] == InjectValue && !hasContainer(&pod, SidecarName) {
			patch, err := json.Marshal([]jsonPatch{{Op: "add", Path: "/spec/containers/-", Value: s.sidecar()}})
			if err != nil {
				return http.StatusInternalServerError, nil, err
			}
			pt := admissionv1.PatchTypeJSONPatch
			resp.Patch, resp.PatchType = patch, &pt
			rec.Patched = true
		}
	case "validate":
		time.Sleep(s.DenyDelay)
		if v, ok := pod.Labels[DenyLabel]; isPod && ok {
			resp.Allowed = false
			resp.Result = &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden,
				Reason: metav1.StatusReasonForbidden, Message: DenyMessage(v)}
			rec.Message = resp.Result.Message
		}
	}
	rec.Allowed = resp.Allowed
	out, err := json.Marshal(&admissionv1.AdmissionReview{TypeMeta: in.TypeMeta, Response: resp})
	if err != nil {
		return http.StatusInternalServerError, nil, err
	}
	return http.StatusOK, out, nil
}

// DenyMessage is the reason /validate gives; the apiserver reports it as
// `admission webhook "deny.readyspan.dev" denied the request: MESSAGE`.
func DenyMessage(value string) string {
	return fmt.Sprintf("Pods labelled %s are denied by the local cluster's webhook (value %q)", DenyLabel, value)
}

type jsonPatch struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// sidecar is the injected container: it idles, and exits at once on SIGTERM (a shell as PID 1
// ignores it otherwise, and every labelled Pod's deletion would wait its grace period).
func (s *Server) sidecar() corev1.Container {
	return corev1.Container{
		Name: SidecarName, Image: s.SidecarImage, ImagePullPolicy: corev1.PullIfNotPresent,
		Command: []string{"sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"},
	}
}

func hasContainer(p *corev1.Pod, name string) bool {
	for i := range p.Spec.Containers {
		if p.Spec.Containers[i].Name == name {
			return true
		}
	}
	return false
}

func (s *Server) write(rec *Record) {
	b, err := json.Marshal(rec)
	if err != nil {
		return
	}
	b = append(bytes.TrimSpace(b), '\n')
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = s.Log.Write(b)
}
