package compare

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
)

// hostileResult compares two sets whose labels and values carry markup and terminal controls.
func hostileResult(t *testing.T) *Result {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	mk := func(ns string, base float64) []Pod {
		return synth(rng, 12, func(int) float64 { return base + rng.Float64() }, func(i int, p *Pod) {
			p.Dims[DimNamespace] = ns
			p.Uncertain = map[string]time.Duration{}
		})
	}
	res, err := Compare(Set{Label: "<b>a</b>", Pods: mk("<script>alert(1)</script>", 1)},
		Set{Label: "b\x1b]0;pwned\x07", Pods: mk("ns\x1b[2J", 3)}, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestReportsEscape: the page holds no element the sets wrote, the text no control character,
// the JSON its documented fields.
func TestReportsEscape(t *testing.T) {
	res := hostileResult(t)
	var page bytes.Buffer
	if err := WriteHTML(&page, res); err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(bytes.NewReader(page.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && (n.Data == "script" || n.Data == "b") {
			t.Errorf("the page holds a <%s> element", n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	if !strings.Contains(page.String(), "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("the namespace is not shown escaped")
	}
	var text bytes.Buffer
	if err := WriteText(&text, res); err != nil {
		t.Fatal(err)
	}
	for _, c := range text.String() {
		if c < 0x20 && c != '\n' || c == 0x7f {
			t.Fatalf("control %q in the text output", c)
		}
	}
	if !strings.Contains(text.String(), `b\x1b]0;pwned\x07`) {
		t.Errorf("the label is not shown escaped:\n%s", text.String())
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, res); err != nil {
		t.Fatal(err)
	}
	var doc2 struct {
		Schema string `json:"schema"`
		Rows   []struct {
			Span  string `json:"span"`
			Stats []struct {
				Stat  string                                 `json:"stat"`
				Shift struct{ Estimate, Low, High *float64 } `json:"shift_seconds"`
			} `json:"stats"`
		} `json:"rows"`
		Attribution []struct {
			Dimensions []struct {
				Dimension string                      `json:"dimension"`
				Share     struct{ Estimate *float64 } `json:"explained_share"`
			} `json:"dimensions"`
		} `json:"attribution"`
		Sentence string `json:"sentence"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc2); err != nil {
		t.Fatal(err)
	}
	if doc2.Schema != Schema || doc2.Rows[0].Span != "pod.startup" || doc2.Rows[0].Stats[3].Stat != "p99" ||
		doc2.Rows[0].Stats[0].Shift.Low == nil || doc2.Attribution[0].Dimensions[0].Dimension != "namespace" || doc2.Sentence == "" {
		t.Fatalf("%s", js.String())
	}
}
