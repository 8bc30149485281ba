package proxyrules

import (
	"bytes"
	"fmt"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"github.com/google/nftables/xt"
	"golang.org/x/sys/unix"

	"github.com/readyspan/readyspan/dataplane"
)

// readIPTables adds to eps the endpoints of kube-proxy's iptables-mode chains in table t (an
// iptables-nft nat table). found is whether kube-proxy's KUBE-SERVICES chain is there, i.e.
// whether kube-proxy runs in iptables mode (with no endpoint yet, possibly). seenSEP collects the
// KUBE-SEP chains referred to, for pruning the protocol memory.
func (r *reader) readIPTables(t *nftables.Table, chains []*nftables.Chain,
	eps map[dataplane.Endpoint]struct{}, seenSEP map[string]struct{}) (found bool, err error) {
	byName := map[string]*nftables.Chain{}
	for _, c := range chainsOf(t, chains) {
		byName[c.Name] = c
		found = found || c.Name == "KUBE-SERVICES"
	}
	for name, c := range byName {
		if !iptChain(name, "SVC") && !iptChain(name, "SVL") {
			continue
		}
		rules, err := r.src.GetRules(t, c)
		if err != nil {
			return found, fmt.Errorf("reading chain %s of table %s: %w", name, t.Name, err)
		}
		for _, rule := range rules {
			sep := jumpTarget(rule)
			if !iptChain(sep, "SEP") {
				continue
			}
			sp, ap, ok := iptComment(ruleComment(rule))
			if !ok || (t.Family == nftables.TableFamilyIPv4) != ap.Addr().Is4() {
				continue
			}
			seenSEP[sep] = struct{}{}
			proto, err := r.sepProtocol(t, byName[sep])
			if err != nil {
				return found, err
			}
			if proto == "" {
				continue
			}
			sp.Protocol = proto
			eps[sp.endpoint(ap)] = struct{}{}
		}
	}
	return found, nil
}

// sepProtocol is the protocol of a KUBE-SEP chain's DNAT rule (`-p tcp … -j DNAT`), from memory
// when the chain was read before; "" when the chain is missing or has no such rule.
func (r *reader) sepProtocol(t *nftables.Table, c *nftables.Chain) (string, error) {
	if c == nil {
		return "", nil
	}
	if p, ok := r.sepProto[c.Name]; ok {
		return p, nil
	}
	rules, err := r.src.GetRules(t, c)
	if err != nil {
		return "", fmt.Errorf("reading chain %s of table %s: %w", c.Name, t.Name, err)
	}
	p := ""
	for _, rule := range rules {
		if isDNAT(rule) {
			p = l4proto(rule.Exprs)
			break
		}
	}
	if p != "" {
		r.sepProto[c.Name] = p
	}
	return p, nil
}

// isDNAT reports whether a rule translates the destination: iptables-nft writes `-j DNAT` as the
// xt target, or as a native nat expression.
func isDNAT(rule *nftables.Rule) bool {
	for _, e := range rule.Exprs {
		switch e := e.(type) {
		case *expr.Target:
			if e.Name == "DNAT" {
				return true
			}
		case *expr.NAT:
			if e.Type == expr.NATTypeDestNAT {
				return true
			}
		}
	}
	return false
}

// l4proto is the protocol a rule matches with `meta l4proto X` (iptables' -p), "" if none.
func l4proto(exprs []expr.Any) string {
	for i, e := range exprs {
		m, ok := e.(*expr.Meta)
		if !ok || m.Key != expr.MetaKeyL4PROTO || m.SourceRegister || i+1 >= len(exprs) {
			continue
		}
		c, ok := exprs[i+1].(*expr.Cmp)
		if !ok || c.Op != expr.CmpOpEq || c.Register != m.Register || len(c.Data) != 1 {
			continue
		}
		switch c.Data[0] {
		case unix.IPPROTO_TCP:
			return "tcp"
		case unix.IPPROTO_UDP:
			return "udp"
		case unix.IPPROTO_SCTP:
			return "sctp"
		}
	}
	return ""
}

// jumpTarget is the chain a rule ends by jumping to or going to, "" if it does not.
func jumpTarget(rule *nftables.Rule) string {
	if len(rule.Exprs) == 0 {
		return ""
	}
	v, ok := rule.Exprs[len(rule.Exprs)-1].(*expr.Verdict)
	if !ok || (v.Kind != expr.VerdictJump && v.Kind != expr.VerdictGoto) {
		return ""
	}
	return v.Chain
}

// ruleComment is a rule's comment: iptables-nft 1.8 keeps `-m comment` as an xt match (as on a
// Debian 12 host), later versions and nft keep it in the rule's UserData.
func ruleComment(rule *nftables.Rule) string {
	for _, e := range rule.Exprs {
		if m, ok := e.(*expr.Match); ok && m.Name == "comment" {
			if c, ok := m.Info.(*xt.Comment); ok {
				return string(*c)
			}
		}
	}
	return udataComment(rule.UserData)
}

// udataComment is the comment in a rule's UserData (type-length-value records). It is parsed
// here, not by userdata.GetString, which slices a record's value before checking its length
// and so panics on a truncated one.
func udataComment(u []byte) string {
	for len(u) >= 2 {
		typ, n := userdata.Type(u[0]), int(u[1])
		if len(u) < 2+n {
			return ""
		}
		if typ == userdata.TypeComment {
			v := u[2 : 2+n]
			if i := bytes.IndexByte(v, 0); i >= 0 {
				v = v[:i]
			}
			return string(v)
		}
		u = u[2+n:]
	}
	return ""
}
