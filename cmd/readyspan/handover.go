package main

import (
	"context"

	"encoding/json"
	"errors"
	"fmt"
	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"os"
	"sync"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/readyspan/readyspan/phases"
)

// Handing over between readyspan processes without a duplicate or a lost trace.
//
// A stopping readyspan exports every Pod that is Ready (tracer.Correlator.Drain). What it
// cannot export are Pods that become Ready after it stopped; the next process sees those as
// already Ready and would skip them. Two mechanisms close that gap:
//
//   - a restart of one process (--state-file): the stopping process writes when it stopped and
//     the UIDs it exported last; the next one traces Pods Ready since then, except those UIDs;
//   - leader election: the standby correlates too, and keeps what it would have exported in a
//     short buffer; when it takes over it exports the buffered traces of Pods that became Ready
//     after the previous leader's last renewal (or its release, which a graceful stop does).
//     A stopping leader also leaves the UIDs it exported last on a second Lease
//     (<lease>-handover), the in-cluster counterpart of the state file: a Pod whose Ready
//     second straddles the release is then neither lost nor exported twice.

// recentWindow is how long exported UIDs and standby traces are remembered.
const recentWindow = 2 * time.Minute

// handover remembers recent exports and, while standing by, what would have been exported.
type handover struct {
	mu       sync.Mutex
	exported []stamped // UIDs this process exported, oldest first
	standby  []standbyTrace
	// prevAlive is when the previous leader was last known alive, set at takeover: a Pod this
	// process found already Ready is owed only if it became Ready after that, and not in skip
	// (what the previous leader said it exported last).
	prevAlive time.Time
	skip      map[string]bool
}

type stamped struct {
	uid string
	at  time.Time
}

type standbyTrace struct {
	t  *phases.Trace
	at time.Time
}

func (h *handover) noteExported(uid string, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.exported = append(h.exported, stamped{uid, now})
	for len(h.exported) > 0 && now.Sub(h.exported[0].at) > recentWindow {
		h.exported = h.exported[1:]
	}
}

func (h *handover) keepStandby(t *phases.Trace, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.standby = append(h.standby, standbyTrace{t, now})
	for len(h.standby) > 0 && now.Sub(h.standby[0].at) > recentWindow {
		h.standby = h.standby[1:]
	}
}

// takeOver returns the standby traces of Pods that became Ready after the previous leader
// last proved it was alive, and forgets the rest.
func (h *handover) takeOver(prevAlive time.Time, skip map[string]bool) []*phases.Trace {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.prevAlive, h.skip = prevAlive, skip
	var out []*phases.Trace
	for _, s := range h.standby {
		if h.owedLocked(s.t) {
			out = append(out, s.t)
		}
	}
	h.standby = nil
	return out
}

// owed reports whether a leader should export a trace: always without leader election; after
// a takeover, unless the previous leader exported it: it says so in its handover when it
// stopped gracefully, else it is assumed to have exported what became Ready (or ended) before
// it was last alive.
func (h *handover) owed(t *phases.Trace) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.owedLocked(t)
}

func (h *handover) owedLocked(t *phases.Trace) bool {
	if h.skip != nil {
		// The previous leader said what it exported: everything else recent is owed. (Its
		// view can lag: a Pod Ready just before it stopped may not have reached it.)
		return !h.skip[t.Pod.UID]
	}
	return h.prevAlive.IsZero() || readySeen(t).After(h.prevAlive)
}

// readySeen is when this process saw the Pod turn Ready. For a Pod that was Ready when it
// started, only the whole-second condition time is known: the latest moment it can stand for
// is used, so an ambiguous second leads to a duplicate (the same trace IDs) rather than a loss.
// Traces that did not end Ready count from when they ended.
func readySeen(t *phases.Trace) time.Time {
	var status time.Time
	for _, s := range t.Pod.Ready {
		switch s.Source {
		case phases.SourceWatch:
			return s.Time
		case phases.SourceStatus:
			status = s.Time.Add(time.Second - time.Nanosecond)
		}
	}
	if !status.IsZero() {
		return status
	}
	return t.Root().End
}

// state is what a stopping readyspan leaves for the next one.
type state struct {
	StoppedAt time.Time `json:"stoppedAt"`
	Exported  []string  `json:"exported"`
}

func readState(path string) (*state, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read --state-file: %w", err)
	}
	var s state
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("--state-file %s is not a readyspan state file: %w", path, err)
	}
	return &s, nil
}

// snapshot is the state to leave behind when stopping at now.
func (h *handover) snapshot(now time.Time) state {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := state{StoppedAt: now.UTC()}
	for _, e := range h.exported {
		if now.Sub(e.at) <= recentWindow {
			s.Exported = append(s.Exported, e.uid)
		}
	}
	return s
}

func (h *handover) writeState(path string, now time.Time) error {
	b, _ := json.Marshal(h.snapshot(now))
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("write --state-file: %w", err)
	}
	return os.Rename(tmp, path)
}

// observingLock wraps the leader-election lock to remember the last record held by another
// replica: its renew time is when the previous leader was last known alive. A graceful stop
// exports what is Ready, flushes, then releases the Lease (an empty holder) with a final renew
// time: everything Ready before it was exported. A leader that died without releasing may
// still have had traces waiting their settle time: those count as not exported.
type observingLock struct {
	resourcelock.Interface
	mu   sync.Mutex
	last resourcelock.LeaderElectionRecord
}

func (l *observingLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := l.Interface.Get(ctx)
	if err == nil && rec != nil && rec.HolderIdentity != l.Identity() {
		l.mu.Lock()
		l.last = *rec
		l.mu.Unlock()
	}
	return rec, raw, err
}

// previousAlive returns the time up to which the previous leader exported what was Ready: its
// release, or its last renewal less the settle time; and whether it released the Lease (then
// its handover, written just before, is current).
func (l *observingLock) previousAlive(settle time.Duration) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.last.RenewTime.Time
	if t.IsZero() || l.last.HolderIdentity == "" {
		return t, !t.IsZero()
	}
	return t.Add(-settle), false
}

// handoverAnnotation holds a stopping leader's state on the <lease>-handover Lease.
const handoverAnnotation = "readyspan.dev/handover"

// maxHandoverUIDs bounds the annotation (256 KiB for all of an object's annotations).
const maxHandoverUIDs = 5000

func handoverLeaseName(lease string) string { return lease + "-handover" }

// writeHandover leaves a stopping leader's state for the next one.
func writeHandover(ctx context.Context, leases coordinationv1.LeaseInterface, name string, s state) error {
	if n := len(s.Exported); n > maxHandoverUIDs {
		s.Exported = s.Exported[n-maxHandoverUIDs:]
	}
	b, _ := json.Marshal(s)
	cur, err := leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{handoverAnnotation: string(b)}}}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	if cur.Annotations == nil {
		cur.Annotations = map[string]string{}
	}
	cur.Annotations[handoverAnnotation] = string(b)
	_, err = leases.Update(ctx, cur, metav1.UpdateOptions{})
	return err
}

// readHandover returns what the previous leader left, or nil.
func readHandover(ctx context.Context, leases coordinationv1.LeaseInterface, name string) (*state, error) {
	cur, err := leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	raw, ok := cur.Annotations[handoverAnnotation]
	if !ok {
		return nil, nil
	}
	var s state
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return nil, fmt.Errorf("lease %s: bad %s annotation: %w", name, handoverAnnotation, err)
	}
	return &s, nil
}
