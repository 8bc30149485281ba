package proxyrules

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"
)

// Capture reads the host's rules once, as Read, and writes what the kernel answered to w as JSON:
// the tables, chains, rules and map elements the reading asked for. It is for bug reports and for
// this package's tests, which read such captures back (testdata/) instead of a kernel.
func Capture(w io.Writer) (Snapshot, error) {
	c, err := nftables.New(nftables.AsLasting())
	if err != nil {
		return Snapshot{}, fmt.Errorf("nftables netlink: %w", err)
	}
	defer func() { _ = c.CloseLasting() }()
	rec := &recording{src: c, Chains: map[string][]capChain{}, Rules: map[string][]capRule{},
		Elements: map[string][]nftables.SetElement{}}
	s, err := newReader(rec).read()
	if err != nil {
		return s, err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return s, enc.Encode(rec)
}

// recording is a source that records another's answers (src set) or answers from a record.
type recording struct {
	src      source
	Tables   []capTable                       `json:"tables"`
	Chains   map[string][]capChain            `json:"chains"`   // by family
	Rules    map[string][]capRule             `json:"rules"`    // by family/table/chain
	Elements map[string][]nftables.SetElement `json:"elements"` // by family/table/set
}

type capTable struct {
	Family nftables.TableFamily `json:"family"`
	Name   string               `json:"name"`
}

type capChain struct {
	Table string `json:"table"`
	Name  string `json:"name"`
}

type capRule struct {
	Handle   uint64    `json:"handle"`
	UserData []byte    `json:"userdata,omitempty"`
	Exprs    []capExpr `json:"exprs"`
}

// capExpr is one expression: its kind (a key of exprKinds) and its fields as google/nftables
// decoded them. An xt match keeps only a comment's text, an xt target only its name; a kind
// this package does not know is kept by name, as a match that nothing here interprets.
type capExpr struct {
	Kind    string          `json:"kind"`
	Expr    json.RawMessage `json:"expr,omitempty"`
	Name    string          `json:"name,omitempty"`
	Comment *string         `json:"comment,omitempty"`
}

var exprKinds = map[string]func() expr.Any{
	"meta": func() expr.Any { return &expr.Meta{} }, "cmp": func() expr.Any { return &expr.Cmp{} },
	"payload": func() expr.Any { return &expr.Payload{} }, "counter": func() expr.Any { return &expr.Counter{} },
	"immediate": func() expr.Any { return &expr.Immediate{} }, "nat": func() expr.Any { return &expr.NAT{} },
	"numgen": func() expr.Any { return &expr.Numgen{} }, "lookup": func() expr.Any { return &expr.Lookup{} },
	"verdict": func() expr.Any { return &expr.Verdict{} }, "bitwise": func() expr.Any { return &expr.Bitwise{} },
	"masq": func() expr.Any { return &expr.Masq{} },
}

func fkey(f nftables.TableFamily, parts ...string) string {
	k := fmt.Sprint(uint8(f))
	for _, p := range parts {
		k += "/" + p
	}
	return k
}

func (r *recording) ListTables() ([]*nftables.Table, error) {
	if r.src == nil {
		var out []*nftables.Table
		for _, t := range r.Tables {
			out = append(out, &nftables.Table{Family: t.Family, Name: t.Name})
		}
		return out, nil
	}
	ts, err := r.src.ListTables()
	for _, t := range ts {
		r.Tables = append(r.Tables, capTable{Family: t.Family, Name: t.Name})
	}
	return ts, err
}

func (r *recording) ListChainsOfTableFamily(f nftables.TableFamily) ([]*nftables.Chain, error) {
	if r.src == nil {
		var out []*nftables.Chain
		for _, c := range r.Chains[fkey(f)] {
			out = append(out, &nftables.Chain{Name: c.Name, Table: &nftables.Table{Family: f, Name: c.Table}})
		}
		return out, nil
	}
	cs, err := r.src.ListChainsOfTableFamily(f)
	for _, c := range cs {
		// Only the tables reading looks at: the host's other tables are not the captures' business.
		if c.Table != nil && (c.Table.Name == tableIPTables || c.Table.Name == tableNFTables) {
			r.Chains[fkey(f)] = append(r.Chains[fkey(f)], capChain{Table: c.Table.Name, Name: c.Name})
		}
	}
	return cs, err
}

func (r *recording) GetRules(t *nftables.Table, c *nftables.Chain) ([]*nftables.Rule, error) {
	k := fkey(t.Family, t.Name, c.Name)
	if r.src == nil {
		var out []*nftables.Rule
		for _, cr := range r.Rules[k] {
			rule := &nftables.Rule{Table: t, Chain: c, Handle: cr.Handle, UserData: cr.UserData}
			for _, ce := range cr.Exprs {
				e, err := ce.decode()
				if err != nil {
					return nil, fmt.Errorf("capture of %s: %w", k, err)
				}
				rule.Exprs = append(rule.Exprs, e)
			}
			out = append(out, rule)
		}
		return out, nil
	}
	rules, err := r.src.GetRules(t, c)
	for _, rule := range rules {
		cr := capRule{Handle: rule.Handle, UserData: rule.UserData}
		for _, e := range rule.Exprs {
			cr.Exprs = append(cr.Exprs, encodeExpr(e))
		}
		r.Rules[k] = append(r.Rules[k], cr)
	}
	return rules, err
}

func (r *recording) GetSetElements(s *nftables.Set) ([]nftables.SetElement, error) {
	k := fkey(s.Table.Family, s.Table.Name, s.Name)
	if r.src == nil {
		return r.Elements[k], nil
	}
	els, err := r.src.GetSetElements(s)
	r.Elements[k] = els
	return els, err
}

func encodeExpr(e expr.Any) capExpr {
	switch e := e.(type) {
	case *expr.Match:
		ce := capExpr{Kind: "match", Name: e.Name}
		if c, ok := e.Info.(*xt.Comment); ok {
			s := string(*c)
			ce.Comment = &s
		}
		return ce
	case *expr.Target:
		return capExpr{Kind: "target", Name: e.Name}
	}
	for kind, mk := range exprKinds {
		if reflect.TypeOf(mk()) == reflect.TypeOf(e) {
			b, err := json.Marshal(e)
			if err == nil {
				return capExpr{Kind: kind, Expr: b}
			}
		}
	}
	return capExpr{Kind: "other", Name: reflect.TypeOf(e).String()}
}

func (ce capExpr) decode() (expr.Any, error) {
	switch ce.Kind {
	case "match":
		m := &expr.Match{Name: ce.Name}
		if ce.Comment != nil {
			c := xt.Comment(*ce.Comment)
			m.Info = &c
		}
		return m, nil
	case "target":
		return &expr.Target{Name: ce.Name}, nil
	case "other":
		return &expr.Match{Name: ce.Name}, nil
	}
	mk, ok := exprKinds[ce.Kind]
	if !ok {
		return nil, fmt.Errorf("unknown expression kind %q", ce.Kind)
	}
	e := mk()
	if err := json.Unmarshal(ce.Expr, e); err != nil {
		return nil, fmt.Errorf("%s expression: %w", ce.Kind, err)
	}
	return e, nil
}
