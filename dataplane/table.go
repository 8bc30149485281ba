package dataplane

import (
	"net/netip"
	"sync"
	"time"

	"github.com/readyspan/readyspan/phases"
)

// Defaults for NewTable.
const (
	// DefaultRetention is how long the central readyspan keeps a reported change, at least:
	// long enough for a Pod trace to settle, wait for the nodes and be looked up, several times
	// over.
	DefaultRetention = 2 * time.Minute
	// DefaultMaxChanges bounds the changes kept, whatever the senders send, and maxAddresses
	// the addresses they are filed under. A change is 16 bytes in its address's list, an
	// address ~110 bytes of map and list (otlpin's BenchmarkNodeReports: 134 bytes a change when
	// every change names another address), so the table holds ~40 MB at most. 1,000 Pod
	// startups a minute on a 1,000-node cluster are 1,000,000 changes of 1,000 addresses a minute.
	DefaultMaxChanges = 1_000_000
	maxAddresses      = 200_000
	// maxNodes bounds the nodes remembered.
	maxNodes = 20_000
	// Slack widens the window in which a change counts for a Pod: kube-proxy may read the
	// EndpointSlice, and program it, before readyspan's own watch delivers the slice.
	Slack = 5 * time.Second
)

// Table holds, in the central readyspan, what the nodes' components reported: each node's
// heartbeat and the changes of each address's rotation, by namespace and address. It is safe
// for concurrent use (the OTLP input adds, the last-mile stage reads), and bounded in time and
// count. Changes are kept in two generations: the current one takes the new changes, and when
// it is half the retention old or holds half a bound it becomes the previous one, whose
// changes go. So nothing is dropped younger than half the retention unless the count bound is
// reached, and no per-change bookkeeping is needed to drop the oldest.
type Table struct {
	retention  time.Duration
	maxChanges int

	mu        sync.Mutex
	nodes     map[string]uint32 // node name → index into names and states
	names     []string
	states    []nodeState
	cur, prev generation
}

type nodeState struct {
	first, last time.Time
	mode        string
}

type generation struct {
	byAddr  map[addrKey][]change
	changes int
	started time.Time
}

type addrKey struct {
	namespace string
	addr      netip.Addr
}

// change is one node's report about one address: small, since a large cluster's rollout
// reports a change per node per Pod.
type change struct {
	at        int64 // Unix nanoseconds
	precision int32 // microseconds
	node      uint32
	in        bool
}

// NewTable makes a Table; zero arguments take the defaults.
func NewTable(retention time.Duration, maxChanges int) *Table {
	if retention <= 0 {
		retention = DefaultRetention
	}
	if maxChanges <= 0 {
		maxChanges = DefaultMaxChanges
	}
	return &Table{retention: retention, maxChanges: maxChanges, nodes: map[string]uint32{},
		cur: generation{byAddr: map[addrKey][]change{}}, prev: generation{byAddr: map[addrKey][]change{}}}
}

// Add files one report; now is the receiver's clock (a node's heartbeat counts from when it
// arrived, so a node with a skewed clock is not taken for silent). It reports false for a
// report it could not keep: a new node past the bound on nodes.
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
	i, ok := t.nodes[name]
	if !ok {
		if len(t.names) >= maxNodes {
			return false
		}
		i = uint32(len(t.names))
		t.nodes[name] = i
		t.names = append(t.names, name)
		t.states = append(t.states, nodeState{first: now})
	}
	n := &t.states[i]
	n.last = now
	if mode == ModeIPTables || mode == ModeNFTables {
		n.mode = mode
	}
	if c := r.Change; c != nil {
		t.turn(now)
		k := addrKey{c.Namespace, c.Address}
		t.cur.byAddr[k] = append(t.cur.byAddr[k], change{at: c.At.UnixNano(), node: i, in: c.In,
			precision: int32(min(c.Precision.Microseconds(), 1<<31-1))})
		t.cur.changes++
	}
	return true
}

// turn makes the current generation the previous one when it is half the retention old or
// holds half a bound.
func (t *Table) turn(now time.Time) {
	if t.cur.started.IsZero() {
		t.cur.started = now
	}
	if now.Sub(t.cur.started) < t.retention/2 && t.cur.changes < t.maxChanges/2 && len(t.cur.byAddr) < maxAddresses/2 {
		return
	}
	t.prev = t.cur
	t.cur = generation{byAddr: map[addrKey][]change{}, started: now}
}

// Reporting names the nodes whose component was reporting at the moment at: heard before it
// and since at most three heartbeats before it. These are the nodes a Pod that entered its
// endpoints then (or an old Pod deleted then) waits for; mode is their kube-proxy mode when
// they agree, "mixed" when they do not.
func (t *Table) Reporting(at time.Time) (nodes []string, mode string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range t.states {
		n := &t.states[i]
		if n.first.After(at) || at.Sub(n.last) > 3*SyncEvery {
			continue
		}
		nodes = append(nodes, t.names[i])
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
	t.mu.Lock()
	defer t.mu.Unlock()
	at := make(map[uint32]int, len(nodes))
	for i, n := range nodes {
		out[i].Node = n
		if j, ok := t.nodes[n]; ok {
			at[j] = i
		}
	}
	from := since.Add(-Slack).UnixNano()
	for _, a := range addrs {
		addr, err := netip.ParseAddr(a)
		if err != nil {
			continue
		}
		k := addrKey{namespace, addr.Unmap()}
		for _, g := range []*generation{&t.prev, &t.cur} {
			for _, c := range g.byAddr[k] {
				i, ok := at[c.node]
				if !ok || c.in != in || c.at < from {
					continue
				}
				if o := &out[i]; o.At.IsZero() || c.at < o.At.UnixNano() {
					o.At, o.Precision = time.Unix(0, c.at), time.Duration(c.precision)*time.Microsecond
				}
			}
		}
	}
	return out
}

// Len is how many changes the table holds.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.prev.changes + t.cur.changes
}
