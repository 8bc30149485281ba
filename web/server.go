package web

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
)

// Server serves the UI and the JSON API over a ring. It only reads.
type Server struct {
	ring    *Ring
	traceUI string
	mux     *http.ServeMux
}

// NewServer serves ring. traceUI is a trace UI's URL with a {trace_id} placeholder (Jaeger:
// http://jaeger:16686/trace/{trace_id}); empty for no links.
func NewServer(ring *Ring, traceUI string) *Server {
	s := &Server{ring: ring, traceUI: traceUI, mux: http.NewServeMux()}
	s.mux.HandleFunc("GET /{$}", s.page)
	s.mux.HandleFunc("GET /api/v1/rollouts", s.rollouts)
	s.mux.HandleFunc("GET /api/v1/rollouts/{id}", s.rollout)
	s.mux.HandleFunc("GET /api/v1/pods", s.pods)
	s.mux.HandleFunc("GET /api/v1/pods/{uid}", s.pod)
	return s
}

// ServeHTTP serves the page at / and the API under /api/v1/.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// pageCSPServed lets the page call its own API and nothing else.
const pageCSPServed = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; connect-src 'self'"

func (s *Server) page(w http.ResponseWriter, _ *http.Request) {
	var b bytes.Buffer
	if err := writePage(&b, "readyspan", "", pageData{API: "api/v1/", TraceUI: s.traceUI}); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", pageCSPServed)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	_, _ = w.Write(b.Bytes())
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

func (s *Server) pod(w http.ResponseWriter, r *http.Request) {
	writeBody(w, s.ring.Pod(r.PathValue("uid")), "no trace of Pod "+r.PathValue("uid")+" is held (it may have left the ring)")
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
