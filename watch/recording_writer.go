package watch

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Recorder writes deltas as a recording (the format LoadRecording reads): one
// watch.<stream>.jsonl file per stream, created on its first delta. It lives next to the
// reader so the two cannot drift apart.
type Recorder struct {
	kinds *Registry
	dir   string
	files map[Stream]*os.File
	n     int
	err   error // the first failure; later writes are dropped and Close returns it
}

// NewRecorder records the registry's kinds into dir, which must exist.
func NewRecorder(kinds *Registry, dir string) *Recorder {
	return &Recorder{kinds: kinds, dir: dir, files: map[Stream]*os.File{}}
}

// Write appends one delta to its stream's file. Deltas of unrecorded kinds (audit entries) are
// skipped; a failure stops the recording and is returned by Close.
func (r *Recorder) Write(d Delta) {
	if r.err != nil {
		return
	}
	s, ok := r.kinds.StreamFor(d.Object)
	if !ok {
		return
	}
	f := r.files[s]
	if f == nil {
		var err error
		f, err = os.Create(filepath.Join(r.dir, "watch."+string(s)+".jsonl"))
		if err != nil {
			r.err = fmt.Errorf("create recording file: %w", err)
			return
		}
		r.files[s] = f
	}
	obj, err := json.Marshal(d.Object)
	if err != nil {
		r.err = fmt.Errorf("encode %s: %w", s, err)
		return
	}
	l := Line{Type: d.Type, Object: obj, Initial: d.Initial, FinalStateUnknown: d.FinalStateUnknown}
	if !d.Recv.IsZero() {
		recv := d.Recv.UTC()
		l.Recv = &recv
	}
	line, _ := json.Marshal(l)
	if _, err := f.Write(append(line, '\n')); err != nil {
		r.err = fmt.Errorf("write recording: %w", err)
		return
	}
	r.n++
}

// Written is the number of watch events recorded so far.
func (r *Recorder) Written() int { return r.n }

// Close closes the stream files and returns the first failure of the recording.
func (r *Recorder) Close() error {
	err := r.err
	for s, f := range r.files {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close %s: %w", s, cerr)
		}
		delete(r.files, s)
	}
	return err
}
