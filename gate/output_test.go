package gate_test

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	junit "github.com/joshdk/go-junit"

	"github.com/readyspan/readyspan/gate"
)

// hostile are Pod names and namespaces no apiserver would admit, but a recording, a fake
// apiserver or a future field could carry: terminal escapes, XML's own syntax, a NUL, bytes that
// are not UTF-8, a bidi override.
var hostile = []string{
	"web-\x1b]0;pwned\x07-1", "</failure><testcase name=\"fake\">", "]]><!--", "nul\x00byte",
	"bad\xff\xfeutf8", "rtl\u202eexe.txt", "cr\rline\nbreak",
}

// brokenVerdict is run3-always-pull judged on a pull objective both Pods break, with the Pods
// renamed hostile.
func brokenVerdict(t *testing.T) gate.Verdict {
	t.Helper()
	in := replayed(t, "run3-always-pull")
	for i, tr := range in.Pods {
		tr.Pod.Name, tr.Pod.Namespace = hostile[i%len(hostile)], hostile[(i+3)%len(hostile)]
	}
	v := gate.Judge(slo(t, "version: 1\nspans:\n  container.image_pull: {max: 1ms}\n  pod.startup: {max: 1h}\n"), in)
	if v.Exit != gate.ExitBroken {
		t.Fatalf("exit %d", v.Exit)
	}
	return v
}

// TestJUnitParsesBack: the JUnit file, read by go-junit (a real JUnit reader) and by
// encoding/xml's strict decoder, has one testsuite, the broken objective as its one failure
// naming both Pods' trace IDs, the met ones passed, whatever the Pods are named.
func TestJUnitParsesBack(t *testing.T) {
	v := brokenVerdict(t)
	var buf bytes.Buffer
	if err := gate.WriteJUnit(&buf, "deployment/web -n \x1b[31mred", v); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(buf.Bytes()))
	for {
		_, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, buf.String())
		}
	}
	suites, err := junit.Ingest(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if len(suites) != 1 {
		t.Fatalf("%d suites", len(suites))
	}
	status := map[string]junit.Status{}
	var failure junit.Test
	for _, tc := range suites[0].Tests {
		status[tc.Name] = tc.Status
		if tc.Status == junit.StatusFailed {
			failure = tc
		}
	}
	want := map[string]junit.Status{"container.image_pull max": junit.StatusFailed, "pod.startup max": junit.StatusPassed,
		"failures other": junit.StatusPassed, "workload.rollout outcome": junit.StatusPassed}
	if len(status) != len(want) {
		t.Errorf("testcases %v, want %v", status, want)
	}
	for name, s := range want {
		if status[name] != s {
			t.Errorf("testcase %q: %q, want %q", name, status[name], s)
		}
	}
	r := result(t, v, "container.image_pull max")
	for _, c := range r.Culprits {
		if failure.Error == nil || !strings.Contains(failure.Error.Error(), c.TraceID) {
			t.Errorf("the failure does not name trace %s: %v", c.TraceID, failure.Error)
		}
	}
	if strings.Contains(buf.String(), `<testcase name="fake">`) {
		t.Error("a Pod name opened a testcase")
	}
}

// TestTextIsSafe: the text output names the broken objective and its Pods with every control,
// bidi override and invalid byte escaped; the JSON output is valid JSON with the same Pods.
func TestTextIsSafe(t *testing.T) {
	v := brokenVerdict(t)
	var text bytes.Buffer
	if err := gate.WriteText(&text, "deployment/web", v); err != nil {
		t.Fatal(err)
	}
	out := text.String()
	if !utf8.ValidString(out) {
		t.Error("text output is not UTF-8")
	}
	for _, r := range out {
		if (r < 0x20 && r != '\n') || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == '\u202e' {
			t.Fatalf("raw %U in the text output:\n%q", r, out)
		}
	}
	if !strings.Contains(out, "BROKEN") || !strings.Contains(out, "container.image_pull max") || !strings.Contains(out, `web-\x1b]0;pwned\x07-1`) {
		t.Errorf("text output does not name the objective and the Pod, escaped:\n%s", out)
	}
	var js bytes.Buffer
	if err := gate.WriteJSON(&js, "deployment/web", v); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Verdict string `json:"verdict"`
		Exit    int    `json:"exit"`
		Results []struct {
			Objective string `json:"objective"`
			Culprits  []struct {
				Name string `json:"name"`
			} `json:"culprits"`
		} `json:"results"`
	}
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatalf("JSON output: %v\n%s", err, js.String())
	}
	if back.Verdict != "fail" || back.Exit != gate.ExitBroken || back.Results[0].Objective != "container.image_pull max" ||
		back.Results[0].Culprits[0].Name != hostile[0] && back.Results[0].Culprits[0].Name != hostile[1] {
		t.Errorf("JSON output: %+v", back)
	}
}
