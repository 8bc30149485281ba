// Package proxyrules reads, from the host's kernel, which endpoints kube-proxy has put in each
// Service port's rotation, and watches that set change: the data-plane half of dataplane's
// contract, which `readyspan node` reports.
//
// It reads the rules over nftables netlink (github.com/google/nftables), never by running
// iptables or nft, which the node component's minimal image does not have. Both of kube-proxy's
// Linux modes are visible that way on a host whose iptables is iptables-nft:
//
//   - iptables mode: table nat (ip and ip6), chains KUBE-SVC-* (cluster policy) and KUBE-SVL-*
//     (local policy), one rule per endpoint, commented "ns/svc:port -> 10.88.77.5:80", jumping
//     to the endpoint's KUBE-SEP-* chain, whose DNAT rule names the protocol.
//   - nftables mode: table kube-proxy (ip and ip6), chains service-HASH-ns/svc/proto/port and
//     local-HASH-…, which DNAT to one endpoint, or through `numgen random mod N map {…}` to
//     one of N, or, with ClientIP session affinity (and in kube-proxy before 1.35 always), jump
//     through a `numgen … vmap` to per-endpoint chains that DNAT.
//
// An endpoint is "in rotation" when such a rule can send the Service port's traffic to it.
// Reading needs CAP_NET_ADMIN in the host's network namespace. iptables-legacy rules live
// outside nftables and are not read: on such a host Read finds no mode.
package proxyrules

import (
	"fmt"
	"time"

	"github.com/google/nftables"

	"github.com/readyspan/readyspan/dataplane"
)

// Snapshot is the endpoints in some Service port's rotation on this host, as kube-proxy's rules say.
type Snapshot struct {
	// Mode is the kube-proxy mode whose rules were found (dataplane.ModeIPTables or
	// ModeNFTables), "" when there were none. When both are there (a mode switch in progress)
	// it is the one with more endpoints, and Endpoints is the union: traffic may take either.
	Mode      string
	Endpoints map[dataplane.Endpoint]struct{}
}

// source is what reading needs of the kernel: *nftables.Conn, or a recording of one (capture.go).
type source interface {
	ListTables() ([]*nftables.Table, error)
	ListChainsOfTableFamily(nftables.TableFamily) ([]*nftables.Chain, error)
	GetRules(*nftables.Table, *nftables.Chain) ([]*nftables.Rule, error)
	GetSetElements(*nftables.Set) ([]nftables.SetElement, error)
}

// The tables kube-proxy writes, per mode.
const (
	tableIPTables = "nat"
	tableNFTables = "kube-proxy"
)

// Read reads the host's rules once (both iptables-nft tables ip/ip6 nat and nftables-mode tables
// ip/ip6 kube-proxy).
func Read() (Snapshot, error) {
	c, err := nftables.New(nftables.AsLasting())
	if err != nil {
		return Snapshot{}, fmt.Errorf("nftables netlink: %w", err)
	}
	defer func() { _ = c.CloseLasting() }()
	return newReader(c).read()
}

// reader reads snapshots from one source. It remembers, across reads, the protocol of each
// iptables KUBE-SEP chain it has seen: the chain's name is a hash of its Service port, protocol
// and endpoint, so its protocol never changes, and a re-read need not dump every endpoint's
// chain again. The memory is pruned to the chains of the last read.
type reader struct {
	src      source
	sepProto map[string]string
}

func newReader(src source) *reader { return &reader{src: src, sepProto: map[string]string{}} }

func (r *reader) read() (Snapshot, error) {
	tables, err := r.src.ListTables()
	if err != nil {
		return Snapshot{}, fmt.Errorf("listing nftables tables: %w", err)
	}
	ipt, nft := map[dataplane.Endpoint]struct{}{}, map[dataplane.Endpoint]struct{}{}
	var sawIPT, sawNFT bool
	seenSEP := map[string]struct{}{}
	for _, fam := range []nftables.TableFamily{nftables.TableFamilyIPv4, nftables.TableFamilyIPv6} {
		var natT, kpT *nftables.Table
		for _, t := range tables {
			if t.Family != fam {
				continue
			}
			switch t.Name {
			case tableIPTables:
				natT = t
			case tableNFTables:
				kpT = t
			}
		}
		if natT == nil && kpT == nil {
			continue
		}
		chains, err := r.src.ListChainsOfTableFamily(fam)
		if err != nil {
			return Snapshot{}, fmt.Errorf("listing chains: %w", err)
		}
		if natT != nil {
			found, err := r.readIPTables(natT, chains, ipt, seenSEP)
			if err != nil {
				return Snapshot{}, err
			}
			sawIPT = sawIPT || found
		}
		if kpT != nil {
			sawNFT = true
			if err := r.readNFTables(kpT, chains, nft); err != nil {
				return Snapshot{}, err
			}
		}
	}
	for name := range r.sepProto {
		if _, ok := seenSEP[name]; !ok {
			delete(r.sepProto, name)
		}
	}
	return merge(ipt, nft, sawIPT, sawNFT), nil
}

// merge makes one Snapshot of the two modes' endpoints.
func merge(ipt, nft map[dataplane.Endpoint]struct{}, sawIPT, sawNFT bool) Snapshot {
	s := Snapshot{Endpoints: nft}
	switch {
	case sawNFT && (!sawIPT || len(nft) >= len(ipt)):
		s.Mode = dataplane.ModeNFTables
	case sawIPT:
		s.Mode = dataplane.ModeIPTables
	}
	for e := range ipt {
		s.Endpoints[e] = struct{}{}
	}
	return s
}

// chainsOf are the chains of table t among chains (which are of t's family).
func chainsOf(t *nftables.Table, chains []*nftables.Chain) []*nftables.Chain {
	var out []*nftables.Chain
	for _, c := range chains {
		if c.Table != nil && c.Table.Name == t.Name {
			out = append(out, c)
		}
	}
	return out
}

// diff is the Changes from old to cur, stamped with at and precision.
func diff(node string, old, cur Snapshot, at time.Time, precision time.Duration) []dataplane.Change {
	var out []dataplane.Change
	for e := range cur.Endpoints {
		if _, ok := old.Endpoints[e]; !ok {
			out = append(out, dataplane.Change{Node: node, Endpoint: e, In: true, At: at,
				Precision: precision, Mode: cur.Mode})
		}
	}
	for e := range old.Endpoints {
		if _, ok := cur.Endpoints[e]; !ok {
			mode := cur.Mode
			if mode == "" {
				mode = old.Mode
			}
			out = append(out, dataplane.Change{Node: node, Endpoint: e, At: at,
				Precision: precision, Mode: mode})
		}
	}
	return out
}
