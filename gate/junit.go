package gate

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
)

// JUnit XML as CI systems read it (Jenkins, GitLab, GitHub's test reporters): one testsuite per
// gate run, one testcase per objective; a broken or unobserved objective is a <failure>, one
// not judged is <skipped>. encoding/xml escapes every string, and writes a character XML does
// not allow (a control in a hostile Pod name) as U+FFFD, so the file parses whatever the
// cluster named things.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Properties []junitProperty `xml:"properties>property,omitempty"`
	Cases      []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Skipped   *junitMessage `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

// JUnitClass is every testcase's classname: CI reporters group by it.
const JUnitClass = "readyspan.gate"

// WriteJUnit writes the verdict as JUnit XML; title names the testsuite (the gate's target).
func WriteJUnit(w io.Writer, title string, v Verdict) error {
	s := junitSuite{Name: "readyspan gate " + title, Properties: []junitProperty{
		{"verdict", v.Word()}, {"pods", fmt.Sprint(v.Pods)}, {"rollouts", fmt.Sprint(v.Rollouts)}}}
	for _, n := range v.Notes {
		s.Properties = append(s.Properties, junitProperty{"note", n})
	}
	for _, r := range v.Results {
		c := junitCase{Name: r.Objective, Classname: JUnitClass, SystemOut: r.Message}
		switch r.Status {
		case StatusBroken, StatusNotObserved:
			c.Failure = &junitMessage{Message: r.Message, Type: string(r.Status), Text: culpritLines(r)}
			s.Failures++
		case StatusNotJudged:
			c.Skipped = &junitMessage{Message: r.Message}
			s.Skipped++
		}
		s.Cases = append(s.Cases, c)
	}
	s.Tests = len(s.Cases)
	doc := junitSuites{Name: "readyspan gate", Tests: s.Tests, Failures: s.Failures, Skipped: s.Skipped, Suites: []junitSuite{s}}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// culpritLines are a failure's text: the message, then a culprit a line.
func culpritLines(r Result) string {
	var b strings.Builder
	b.WriteString(r.Message + "\n")
	for _, c := range r.Culprits {
		b.WriteString(c.Line() + "\n")
	}
	return b.String()
}
