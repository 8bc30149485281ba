package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Server serves the UI and the JSON API over a ring. It only reads.
type Server struct {
	ring    *Ring
	traceUI string
	hosts   *Hosts
	mux     *http.ServeMux
}

// ServerConfig configures a Server.
type ServerConfig struct {
	// TraceUI is a trace UI's URL with a {trace_id} placeholder (Jaeger:
	// http://jaeger:16686/trace/{trace_id}); empty for no links. See CheckTraceUI.
	TraceUI string
	// Hosts are the names the server answers to (ListenHosts); nil answers to loopback names only.
	Hosts *Hosts
}

// NewServer serves ring.
func NewServer(ring *Ring, cfg ServerConfig) *Server {
	hosts := cfg.Hosts
	if hosts == nil {
		hosts = loopbackHosts()
	}
	s := &Server{ring: ring, traceUI: cfg.TraceUI, hosts: hosts, mux: http.NewServeMux()}
	s.mux.HandleFunc("GET /{$}", s.page)
	s.mux.HandleFunc("GET /app.js", asset(pageJS, "text/javascript; charset=utf-8"))
	s.mux.HandleFunc("GET /app.css", asset(pageCSS, "text/css; charset=utf-8"))
	s.mux.HandleFunc("GET /api/v1/rollouts", s.rollouts)
	s.mux.HandleFunc("GET /api/v1/rollouts/{id}", s.rollout)
	s.mux.HandleFunc("GET /api/v1/rollouts/{id}/rotation", s.rotation)
	s.mux.HandleFunc("GET /api/v1/pods", s.pods)
	s.mux.HandleFunc("GET /api/v1/pods/{uid}", s.pod)
	s.mux.HandleFunc("GET /api/v1/nodes", s.nodes)
	s.mux.HandleFunc("GET /api/v1/nodes/{id}", s.node)
	return s
}

// The policies: the served page may run its own script file, use its own style file and call
// its own API; every other response (JSON, errors) may do nothing at all. Neither may be framed.
const (
	pageCSPServed = "default-src 'none'; script-src 'self'; style-src 'self'; img-src data:; connect-src 'self'; " +
		"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
	noneCSP = "default-src 'none'; frame-ancestors 'none'"
)

// SecurityHeaders sets, on every response of h, the headers that keep a browser from sniffing a
// response into another type, framing it or sending its address on: readyspan run sets them on
// its whole metrics port, /metrics and /healthz included.
func SecurityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setSecurityHeaders(w.Header())
		h.ServeHTTP(w, r)
	})
}

func setSecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", noneCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
}

// ServeHTTP serves the page at /, its script and style, and the API under /api/v1/, to requests
// that name one of the server's hosts.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	setSecurityHeaders(w.Header())
	if !s.hosts.Allow(r.Host) {
		// A page of another site whose name now resolves to this address (DNS rebinding)
		// would otherwise read the traces; its requests carry its own name.
		http.Error(w, fmt.Sprintf("readyspan: host %q is not a name of this server (--ui-allowed-hosts adds names)", clipHost(r.Host)),
			http.StatusMisdirectedRequest)
		return
	}
	s.mux.ServeHTTP(w, r)
}

func clipHost(h string) string {
	if len(h) > 100 {
		return h[:100] + "…"
	}
	return h
}

func (s *Server) page(w http.ResponseWriter, _ *http.Request) {
	var b bytes.Buffer
	if err := writePage(&b, "readyspan", "", false, pageData{API: "api/v1/", TraceUI: s.traceUI}); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", pageCSPServed)
	h.Set("Cache-Control", "no-store")
	_, _ = w.Write(b.Bytes())
}

// asset serves an embedded file; no-cache, so a new readyspan's page never runs an old script.
func asset(body, contentType string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		h.Set("Content-Type", contentType)
		h.Set("Cache-Control", "no-cache")
		_, _ = w.Write([]byte(body))
	}
}

func filterOf(r *http.Request) Filter {
	q := r.URL.Query()
	return Filter{Namespace: strings.TrimSpace(q.Get("namespace")), Workload: strings.TrimSpace(q.Get("workload"))}
}

func (s *Server) rollouts(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, s.ring.Rollouts(filterOf(r)))
}

func (s *Server) pods(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, s.ring.Pods(filterOf(r)))
}

func (s *Server) rollout(w http.ResponseWriter, r *http.Request) {
	writeBody(w, s.ring.Rollout(r.PathValue("id")), "no rollout "+r.PathValue("id")+" is held (it may have left the ring)")
}

func (s *Server) rotation(w http.ResponseWriter, r *http.Request) {
	writeBody(w, s.ring.Rotation(r.PathValue("id")), "no rollout "+r.PathValue("id")+" is held (it may have left the ring)")
}

func (s *Server) pod(w http.ResponseWriter, r *http.Request) {
	writeBody(w, s.ring.Pod(r.PathValue("uid")), "no trace of Pod "+r.PathValue("uid")+" is held (it may have left the ring)")
}

func (s *Server) nodes(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, s.ring.Nodes())
}

func (s *Server) node(w http.ResponseWriter, r *http.Request) {
	writeBody(w, s.ring.Node(r.PathValue("id")), "no startup trace of node "+r.PathValue("id")+" is held (it may have left the ring)")
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeBody(w, b, "")
}

func writeBody(w http.ResponseWriter, body []byte, notFound string) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	if body == nil {
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": notFound})
		return
	}
	_, _ = w.Write(body)
}

// CheckTraceUI checks a --trace-ui-url: an http or https URL with a host and the {trace_id}
// placeholder. Anything else (javascript:, data:, a relative path) would become a link the UI
// and the report draw on every trace.
func CheckTraceUI(u string) error {
	if u == "" {
		return nil
	}
	if !strings.Contains(u, "{trace_id}") {
		return fmt.Errorf("--trace-ui-url %q has no {trace_id} placeholder (e.g. http://jaeger:16686/trace/{trace_id})", u)
	}
	p, err := url.Parse(strings.ReplaceAll(u, "{trace_id}", "0123456789abcdef0123456789abcdef"))
	if err != nil {
		return fmt.Errorf("--trace-ui-url %q: %w", u, err)
	}
	if p.Scheme != "http" && p.Scheme != "https" || p.Host == "" {
		return fmt.Errorf("--trace-ui-url %q: want an http:// or https:// URL with a host", u)
	}
	return nil
}

// The servers' timeouts. A request is a GET without a body and an answer is at most a few
// megabytes of JSON (a 1,000-Pod rollout is about 0.5 MB), so a client has 10 s to send its
// headers and 30 s for the whole request, an answer 2 min to be written (also a CPU profile's
// default 30 s with readyspan run --pprof), and an idle keep-alive connection is closed after
// 2 min instead of being held forever.
const (
	ReadHeaderTimeout = 10 * time.Second
	ReadTimeout       = 30 * time.Second
	WriteTimeout      = 2 * time.Minute
	IdleTimeout       = 2 * time.Minute
)

// NewHTTPServer is an http.Server for h with the timeouts above.
func NewHTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: ReadHeaderTimeout, ReadTimeout: ReadTimeout,
		WriteTimeout: WriteTimeout, IdleTimeout: IdleTimeout}
}
