package leader

import (
	"sort"
	"sync"
	"time"

	"github.com/readyspan/readyspan/phases"
)

// watchTrace is the trace of a Pod this process saw turn Ready at readyAt.
func watchTrace(uid string, readyAt time.Time) *phases.Trace {
	p := &phases.Pod{UID: uid, Name: uid, Namespace: "default", Root: phases.RootBarePod}
	p.Created.Add(readyAt.Add(-3*time.Second), phases.SourceWatch)
	p.Ready.Add(readyAt, phases.SourceWatch)
	return phases.Build(p, phases.Options{})
}

// statusTrace is the trace of a Pod that was Ready when this process started: only the
// condition's whole-second time is known.
func statusTrace(uid string, readyAt time.Time) *phases.Trace {
	p := &phases.Pod{UID: uid, Name: uid, Namespace: "default", Root: phases.RootBarePod}
	p.Created.Add(readyAt.Add(-3*time.Second), phases.SourceMetadata)
	p.Ready.Add(readyAt.Truncate(time.Second), phases.SourceStatus)
	return phases.Build(p, phases.Options{})
}

// recorder is the exporters and the metrics of one replica.
type recorder struct {
	mu      sync.Mutex
	sent    []string // UIDs, in export order
	dropped map[string]int
	leader  []bool // every SetLeader call
}

func newRecorder() *recorder { return &recorder{dropped: map[string]int{}} }

func (r *recorder) Export(t *phases.Trace) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent = append(r.sent, t.Pod.UID)
}

func (r *recorder) SetLeader(ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.leader = append(r.leader, ok)
}

func (r *recorder) Dropped(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dropped[reason]++
}

func (r *recorder) exported() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := append([]string(nil), r.sent...)
	sort.Strings(out)
	return out
}

func (r *recorder) drops(reason string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dropped[reason]
}

func (r *recorder) leading() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.leader) > 0 && r.leader[len(r.leader)-1]
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}
