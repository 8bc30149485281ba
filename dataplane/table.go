package dataplane

import (
	"net/netip"
	"sync"
	"time"

	"github.com/readyspan/readyspan/phases"
)

// Defaults for NewTable.
const (
	// DefaultRetention is how long the central readyspan keeps a reported change: long enough
	// for a Pod trace or a rollout to wait for the nodes and be looked up, several times over.
	DefaultRetention = 10 * time.Minute
	// DefaultMaxChanges bounds the changes kept, whatever the senders send: ~100 bytes each.
	DefaultMaxChanges = 200_000
	// maxNodes bounds the nodes remembered (a sender may name nodes that do not exist).
	maxNodes = 20_000
	// Slack widens the window in which a change counts for a Pod: kube-proxy may read the
	// EndpointSlice, and program it, before readyspan's own watch delivers the slice.
	Slack = 5 * time.Second
)

// Table holds, in the central readyspan, what the nodes' components reported: each node's
// heartbeat and the changes of each address's rotation, by namespace and address. It is safe
// for concurrent use (the OTLP input adds, the last-mile stage reads), and bounded in time and
// count: past either bound the oldest changes go.
type Table struct {
	retention  time.Duration
	maxChanges int

	mu      sync.Mutex
	nodes   map[string]*nodeState
	byAddr  map[addrKey][]change
	order   []orderEntry // every change's key in arrival order, for eviction
	head    int          // order's first live entry
	changes int
}

type nodeState struct {
	name        string // the one copy every change of the node refers to
	first, last time.Time
	mode        string
}

type addrKey struct {
	namespace string
	addr      netip.Addr
}

type change struct {
	node      *nodeState
	in        bool
	at        time.Time
	precision time.Duration
}

type orderEntry struct {
	key addrKey
	at  time.Time
}

// NewTable makes a Table; zero arguments take the defaults.
func NewTable(retention time.Duration, maxChanges int) *Table {
	if retention <= 0 {
		retention = DefaultRetention
	}
	if maxChanges <= 0 {
		maxChanges = DefaultMaxChanges
	}
	return &Table{retention: retention, maxChanges: maxChanges, nodes: map[string]*nodeState{}, byAddr: map[addrKey][]change{}}
}

// Add files one report; now is the receiver's clock (a node's heartbeat counts from when it
// arrived, so a node with a skewed clock is not taken for silent).
func (t *Table) Add(r Report, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	var name, mode string
	switch {
	case r.Sync != nil:
		name, mode = r.Sync.Node, r.Sync.Mode
	case r.Change != nil:
		name, mode = r.Change.Node, r.Change.Mode
	default:
		return false
	}
	n := t.nodes[name]
	if n == nil {
		if len(t.nodes) >= maxNodes {
			t.forgetSilentNodes(now)
			if len(t.nodes) >= maxNodes {
				return false
			}
		}
		n = &nodeState{name: name, first: now}
		t.nodes[name] = n
	}
	n.last = now
	if mode == ModeIPTables || mode == ModeNFTables {
		n.mode = mode
	}
	if c := r.Change; c != nil {
		k := addrKey{c.Namespace, c.Address}
		t.byAddr[k] = append(t.byAddr[k], change{node: n, in: c.In, at: c.At, precision: c.Precision})
		t.order = append(t.order, orderEntry{k, now})
		t.changes++
		t.evict(now)
	}
	return true
}

// evict drops the changes past the retention or the count bound, oldest first.
func (t *Table) evict(now time.Time) {
	for t.head < len(t.order) && (t.changes > t.maxChanges || now.Sub(t.order[t.head].at) > t.retention) {
		k := t.order[t.head].key
		t.head++
		t.changes--
		if cs := t.byAddr[k]; len(cs) <= 1 {
			delete(t.byAddr, k)
		} else {
			t.byAddr[k] = cs[1:]
		}
	}
	if t.head > len(t.order)/2 && t.head > 1024 {
		t.order = append(t.order[:0:0], t.order[t.head:]...)
		t.head = 0
	}
}

// forgetSilentNodes drops the nodes silent past the retention.
func (t *Table) forgetSilentNodes(now time.Time) {
	for name, n := range t.nodes {
		if now.Sub(n.last) > t.retention {
			delete(t.nodes, name)
		}
	}
}

// Reporting names the nodes whose component was reporting at the moment at: heard before it
// and since at most three heartbeats before it. These are the nodes a Pod that entered its
// endpoints then (or an old Pod deleted then) waits for; mode is their kube-proxy mode when
// they agree.
func (t *Table) Reporting(at time.Time) (nodes []string, mode string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, n := range t.nodes {
		if n.first.After(at) || at.Sub(n.last) > 3*SyncEvery {
			continue
		}
		nodes = append(nodes, n.name)
		switch {
		case mode == "":
			mode = n.mode
		case mode != n.mode:
			mode = "mixed"
		}
	}
	return nodes, mode
}

// First finds, for each of nodes, the first change of one of the addresses in the namespace
// into (in) or out of the rotation at or after since less Slack: when that node's kube-proxy
// put the Pod in its rules, or took it out. A node without one has a zero At.
func (t *Table) First(namespace string, addrs []string, in bool, since time.Time, nodes []string) []phases.NodeProgramming {
	out := make([]phases.NodeProgramming, len(nodes))
	at := make(map[string]int, len(nodes))
	for i, n := range nodes {
		out[i].Node = n
		at[n] = i
	}
	from := since.Add(-Slack)
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, a := range addrs {
		addr, err := netip.ParseAddr(a)
		if err != nil {
			continue
		}
		for _, c := range t.byAddr[addrKey{namespace, addr.Unmap()}] {
			i, ok := at[c.node.name]
			if !ok || c.in != in || c.at.Before(from) {
				continue
			}
			if o := &out[i]; o.At.IsZero() || c.at.Before(o.At) {
				o.At, o.Precision = c.at, c.precision
			}
		}
	}
	return out
}

// Len is how many changes the table holds.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.changes
}
