package proxyrules

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/readyspan/readyspan/dataplane"
)

// lockedSource lets a test change a recording while a Watcher reads it.
type lockedSource struct {
	mu  sync.Mutex
	rec *recording
}

func (l *lockedSource) ListTables() ([]*nftables.Table, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rec.ListTables()
}

func (l *lockedSource) ListChainsOfTableFamily(f nftables.TableFamily) ([]*nftables.Chain, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rec.ListChainsOfTableFamily(f)
}

func (l *lockedSource) GetRules(t *nftables.Table, c *nftables.Chain) ([]*nftables.Rule, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rec.GetRules(t, c)
}

func (l *lockedSource) GetSetElements(s *nftables.Set) ([]nftables.SetElement, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rec.GetSetElements(s)
}

// dropFirst removes the first element of web:http's map (10.88.77.4:8080), as a sync of
// kube-proxy's that took that Pod out would.
func (l *lockedSource) dropFirst() {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := "2/kube-proxy/__map0"
	l.rec.Elements[k] = l.rec.Elements[k][1:]
}

// startWatcher runs a Watcher over the nftables capture, its changes sent on the channel.
func startWatcher(t *testing.T, open func() (*monitor, error), poll time.Duration) (*lockedSource, *Watcher, chan []dataplane.Change) {
	t.Helper()
	src := &lockedSource{rec: replay(t, "nftables.json")}
	w := &Watcher{o: Options{Node: "node-a", Poll: poll, Log: slog.New(slog.NewTextHandler(io.Discard, nil))},
		r: newReader(src), open: open}
	ch := make(chan []dataplane.Change, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- w.Run(ctx, func(c []dataplane.Change) { ch <- c }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	deadline := time.Now().Add(5 * time.Second)
	for {
		if mode, n := w.Current(); mode == dataplane.ModeNFTables && n == 14 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the Watcher's first read did not happen")
		}
		time.Sleep(time.Millisecond)
	}
	return src, w, ch
}

func wantRemoved(t *testing.T, ch chan []dataplane.Change) dataplane.Change {
	t.Helper()
	select {
	case cs := <-ch:
		if len(cs) != 1 || cs[0].In || cs[0].Node != "node-a" || cs[0].Mode != dataplane.ModeNFTables ||
			cs[0].String() != "rules-probe/web:http -> 10.88.77.4:8080" {
			t.Fatalf("changes %+v, want web:http 10.88.77.4 removed", cs)
		}
		return cs[0]
	case <-time.After(5 * time.Second):
		t.Fatal("no change reported")
	}
	return dataplane.Change{}
}

func TestWatcherNotified(t *testing.T) {
	m := &monitor{wake: make(chan struct{}, 1)}
	src, w, ch := startWatcher(t, func() (*monitor, error) { return m, nil }, time.Hour)
	select {
	case cs := <-ch:
		t.Fatalf("the first read was reported: %v", cs)
	default:
	}
	src.dropFirst()
	at := time.Now()
	m.signal(at)
	c := wantRemoved(t, ch)
	if !c.At.Equal(at) || c.Precision <= 0 || c.Precision > time.Since(at) {
		t.Errorf("At %s, Precision %s; want the notification's %s and the read's end after it", c.At, c.Precision, at)
	}
	if mode, n := w.Current(); mode != dataplane.ModeNFTables || n != 13 {
		t.Errorf("Current: %s %d, want nftables 13", mode, n)
	}
	// A notification of a generation that changed nothing reports nothing.
	m.signal(time.Now())
	select {
	case cs := <-ch:
		t.Fatalf("reported %v", cs)
	case <-time.After(50 * time.Millisecond):
	}
}

func TestWatcherPollsWithoutNotifications(t *testing.T) {
	src, _, ch := startWatcher(t, func() (*monitor, error) { return nil, errors.New("EPERM") }, 5*time.Millisecond)
	before := time.Now()
	src.dropFirst()
	c := wantRemoved(t, ch)
	if c.At.Before(before) || c.Precision <= 0 || c.Precision > time.Second {
		t.Errorf("At %s (changed after %s), Precision %s", c.At, before, c.Precision)
	}
}

func TestWatcherPollsWhenNotificationsStop(t *testing.T) {
	m := &monitor{wake: make(chan struct{}, 1)}
	src, _, ch := startWatcher(t, func() (*monitor, error) { return m, nil }, 5*time.Millisecond)
	m.mu.Lock()
	m.err = errors.New("socket closed")
	m.mu.Unlock()
	m.signal(time.Time{})
	time.Sleep(20 * time.Millisecond)
	src.dropFirst()
	wantRemoved(t, ch)
}

func TestMonitorKeepsEarliest(t *testing.T) {
	m := &monitor{wake: make(chan struct{}, 1)}
	t0 := time.Now()
	m.signal(t0.Add(time.Second))
	m.signal(t0)
	m.signal(t0.Add(2 * time.Second))
	if at, ok, err := m.take(); !ok || err != nil || !at.Equal(t0) {
		t.Errorf("take: %s %v %v, want %s", at, ok, err, t0)
	}
	if _, ok, _ := m.take(); ok {
		t.Error("taken twice")
	}
}

func TestRelevant(t *testing.T) {
	msg := func(fam byte, table string) []byte {
		b, _ := netlink.MarshalAttributes([]netlink.Attribute{{Type: 1, Data: append([]byte(table), 0)}})
		return append([]byte{fam, 0, 0, 0}, b...)
	}
	for _, c := range []struct {
		data []byte
		want bool
	}{
		{msg(unix.NFPROTO_IPV4, "nat"), true},
		{msg(unix.NFPROTO_IPV6, "kube-proxy"), true},
		{msg(unix.NFPROTO_IPV4, "filter"), false},
		{msg(unix.NFPROTO_INET, "kube-proxy"), false},
		{msg(unix.NFPROTO_IPV4, "mangle"), false},
		{[]byte{2, 0}, true},          // unparseable: re-read rather than miss a change
		{[]byte{2, 0, 0, 0, 9}, true}, // a truncated attribute
	} {
		if got := relevant(c.data); got != c.want {
			t.Errorf("%v: %v, want %v", c.data, got, c.want)
		}
	}
}

func TestLegacyNAT(t *testing.T) {
	dir := t.TempDir()
	for content, want := range map[string]bool{"filter\nnat\n": true, "filter\n": false, "natx\n": false, "": false} {
		p := dir + "/names"
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := legacyNAT(p); got != want {
			t.Errorf("%q: %v, want %v", content, got, want)
		}
	}
	if legacyNAT(dir + "/missing") {
		t.Error("a missing file says legacy")
	}
}
