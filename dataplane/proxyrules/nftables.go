package proxyrules

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"

	"github.com/readyspan/readyspan/dataplane"
)

// readNFTables adds to eps the endpoints of kube-proxy's nftables-mode service chains in table
// t. External chains (external-…) only jump to a service or local chain, so those two kinds
// hold every endpoint.
func (r *reader) readNFTables(t *nftables.Table, chains []*nftables.Chain, eps map[dataplane.Endpoint]struct{}) error {
	byName := map[string]*nftables.Chain{}
	for _, c := range chainsOf(t, chains) {
		byName[c.Name] = c
	}
	for name, c := range byName {
		sp, ok := nftServiceChain(name)
		if !ok {
			continue
		}
		rules, err := r.src.GetRules(t, c)
		if err != nil {
			return fmt.Errorf("reading chain %s of table %s: %w", name, t.Name, err)
		}
		var ends []netip.AddrPort
		for _, rule := range rules {
			got, err := r.ruleEndpoints(t, rule, byName, true)
			if err != nil {
				return err
			}
			ends = append(ends, got...)
		}
		for _, ap := range ends {
			eps[sp.endpoint(ap)] = struct{}{}
		}
	}
	return nil
}

// ruleEndpoints evaluates one rule as far as kube-proxy's shapes need, following the registers:
//
//	meta l4proto tcp dnat to 10.88.77.5:80                                   (one endpoint)
//	meta l4proto tcp dnat ip to numgen random mod 3 map { 0 : 10.88.77.5 . 80, … }
//	numgen random mod 3 vmap { 0 : goto endpoint-HASH-…__10.88.77.5/80, … }  (affinity)
//	ip saddr @affinity-… goto endpoint-HASH-…                                (affinity)
//
// and returns the endpoints it can DNAT to. follow says whether a jump to an endpoint chain is
// followed (one level: an endpoint chain's own rules are evaluated without following).
func (r *reader) ruleEndpoints(t *nftables.Table, rule *nftables.Rule, chains map[string]*nftables.Chain, follow bool) ([]netip.AddrPort, error) {
	var regs registers
	var m *expr.Lookup // a map lookup whose data is in the registers: one value per element
	var out []netip.AddrPort
	for _, e := range rule.Exprs {
		switch e := e.(type) {
		case *expr.Immediate:
			regs.set(e.Register, e.Data)
		case *expr.Lookup:
			if !e.IsDestRegSet {
				continue
			}
			if e.DestRegister == 0 { // a verdict map: its elements' verdicts
				if !follow {
					continue
				}
				elems, err := r.elements(t, e.SetName)
				if err != nil {
					return nil, err
				}
				for _, el := range elems {
					got, err := r.endpointChain(t, chains, elementChain(el))
					if err != nil {
						return nil, err
					}
					out = append(out, got...)
				}
				continue
			}
			m = e
		case *expr.NAT:
			if e.Type != expr.NATTypeDestNAT {
				continue
			}
			got, err := r.natTargets(t, e, regs, m)
			if err != nil {
				return nil, err
			}
			out = append(out, got...)
		case *expr.Verdict:
			if follow && (e.Kind == expr.VerdictGoto || e.Kind == expr.VerdictJump) {
				got, err := r.endpointChain(t, chains, e.Chain)
				if err != nil {
					return nil, err
				}
				out = append(out, got...)
			}
		}
	}
	return out, nil
}

// natTargets are the addresses a DNAT expression translates to: from the registers as they are,
// or, after a map lookup into its destination register, once per element of the map.
func (r *reader) natTargets(t *nftables.Table, n *expr.NAT, regs registers, m *expr.Lookup) ([]netip.AddrPort, error) {
	if m == nil {
		if ap, ok := regs.addrPort(t.Family, n); ok {
			return []netip.AddrPort{ap}, nil
		}
		return nil, nil
	}
	elems, err := r.elements(t, m.SetName)
	if err != nil {
		return nil, err
	}
	var out []netip.AddrPort
	for _, el := range elems {
		rr := regs
		rr.set(m.DestRegister, el.Val)
		if ap, ok := rr.addrPort(t.Family, n); ok {
			out = append(out, ap)
		}
	}
	return out, nil
}

// endpointChain is the DNAT targets of an endpoint chain (endpoint-HASH-…), none for any other
// chain. The target is read from the chain's rules rather than from its name, which kube-proxy
// truncates when it is too long.
func (r *reader) endpointChain(t *nftables.Table, chains map[string]*nftables.Chain, name string) ([]netip.AddrPort, error) {
	c := chains[name]
	if c == nil || !strings.HasPrefix(name, "endpoint-") {
		return nil, nil
	}
	rules, err := r.src.GetRules(t, c)
	if err != nil {
		return nil, fmt.Errorf("reading chain %s of table %s: %w", name, t.Name, err)
	}
	var out []netip.AddrPort
	for _, rule := range rules {
		got, err := r.ruleEndpoints(t, rule, chains, false)
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	return out, nil
}

// elements are an anonymous map's elements. Only kube-proxy's anonymous maps (__mapN, local to
// the table) are read: a named map is shared state, not one rule's list of endpoints.
func (r *reader) elements(t *nftables.Table, set string) ([]nftables.SetElement, error) {
	if !strings.HasPrefix(set, "__map") {
		return nil, nil
	}
	elems, err := r.src.GetSetElements(&nftables.Set{Table: t, Name: set, Anonymous: true, IsMap: true})
	if err != nil {
		return nil, fmt.Errorf("reading map %s of table %s: %w", set, t.Name, err)
	}
	return elems, nil
}

// elementChain is the chain a verdict map element goes to or jumps to, "" for any other verdict.
// google/nftables leaves a verdict element's data undecoded (the nested NFTA_VERDICT_CODE and
// NFTA_VERDICT_CHAIN attributes), so it is decoded here.
func elementChain(el nftables.SetElement) string {
	if v := el.VerdictData; v != nil {
		if v.Kind == expr.VerdictGoto || v.Kind == expr.VerdictJump {
			return v.Chain
		}
		return ""
	}
	ad, err := netlink.NewAttributeDecoder(el.Val)
	if err != nil {
		return ""
	}
	ad.ByteOrder = binary.BigEndian
	var code int32
	var chain string
	for ad.Next() {
		switch ad.Type() {
		case 1: // NFTA_VERDICT_CODE
			code = int32(ad.Uint32())
		case 2: // NFTA_VERDICT_CHAIN
			chain = ad.String()
		}
	}
	if ad.Err() != nil || (expr.VerdictKind(code) != expr.VerdictGoto && expr.VerdictKind(code) != expr.VerdictJump) {
		return ""
	}
	return chain
}

// registers models nf_tables' register file as bytes: the 16-byte registers NFT_REG_1…4 (1–4)
// overlay the 4-byte NFT_REG32_00…15 (8–23), as in the kernel's nft_parse_register. A map lookup
// of `ip addr . port` data writes the address to NFT_REG_1 and the port right after it, where
// the DNAT expression reads it as NFT_REG32_01.
type registers [80]byte

func regOffset(reg uint32) (int, bool) {
	switch {
	case reg >= 1 && reg <= 4:
		return int(reg) * 16, true
	case reg >= 8 && reg <= 23:
		return int(reg-8)*4 + 16, true
	}
	return 0, false
}

func (r *registers) set(reg uint32, data []byte) {
	if off, ok := regOffset(reg); ok && off+len(data) <= len(r) {
		copy(r[off:], data)
	}
}

func (r *registers) get(reg uint32, n int) ([]byte, bool) {
	off, ok := regOffset(reg)
	if !ok || off+n > len(r) {
		return nil, false
	}
	return r[off : off+n], true
}

// addrPort is a DNAT's address and port from the registers, for a table of family fam.
func (r *registers) addrPort(fam nftables.TableFamily, n *expr.NAT) (netip.AddrPort, bool) {
	size := 4
	if fam == nftables.TableFamilyIPv6 {
		size = 16
	}
	a, ok := r.get(n.RegAddrMin, size)
	if !ok || n.RegProtoMin == 0 {
		return netip.AddrPort{}, false
	}
	p, ok := r.get(n.RegProtoMin, 2)
	if !ok {
		return netip.AddrPort{}, false
	}
	addr, _ := netip.AddrFromSlice(a)
	port := binary.BigEndian.Uint16(p)
	if !addr.IsValid() || addr.IsUnspecified() || port == 0 {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(addr, port), true
}
