package main

import (
	"net/http"
	"net/http/pprof"
)

// servePprof adds Go's profiles to mux at /debug/pprof/ (readyspan run --pprof): heap and CPU
// profiles of a running readyspan, so what it caches per Pod is measured rather than guessed.
// Registered by hand rather than by importing net/http/pprof for its side effect, which would
// put them on http.DefaultServeMux, unguarded.
func servePprof(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}
