package web

import (
	"bytes"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// TestVerdictBannerEscapes: the gate's verdict at the top of the report, with Pod names that
// try to close the table, open a script or an attribute, adds no element and no attribute of
// its own: html/template escapes each for where it stands, and the page's policy still holds.
func TestVerdictBannerEscapes(t *testing.T) {
	evil := []string{`</td></tr></table><script>alert(1)</script>`, `"><img src=x onerror=alert(2)>`, "\x1b]0;t\x07", "]]>"}
	v := Verdict{Outcome: "fail", Headline: "FAIL: 1 objectives met, 1 broken " + evil[0], Notes: []string{evil[1]},
		Rows: []VerdictRow{{Status: "BROKEN", Objective: "container.readiness max", Message: "12.3s > 6s " + evil[1], Broken: true, Pods: evil}}}
	var buf bytes.Buffer
	if err := WriteVerdictReport(&buf, "gate "+evil[0], "", v, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	if !strings.Contains(page, `class="verdict v-fail"`) || !strings.Contains(page, "container.readiness max") {
		t.Fatal("no verdict banner in the report")
	}
	z := html.NewTokenizer(strings.NewReader(page))
	scripts, imgs := 0, 0
	for tt := z.Next(); tt != html.ErrorToken; tt = z.Next() {
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		name, hasAttr := z.TagName()
		switch string(name) {
		case "script":
			scripts++
		case "img":
			imgs++
		}
		for hasAttr {
			var k []byte
			k, _, hasAttr = z.TagAttr()
			if strings.HasPrefix(string(k), "on") {
				t.Errorf("an event handler attribute %q on <%s>", k, name)
			}
		}
	}
	if scripts != 2 || imgs != 0 {
		t.Errorf("%d script and %d img elements; the page has its data block and its script, no more", scripts, imgs)
	}
	if !strings.Contains(page, "&lt;/td&gt;&lt;/tr&gt;&lt;/table&gt;&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("the hostile Pod name is not shown escaped")
	}
}
