package web

import (
	"html/template"
	"io"
	"strings"

	"github.com/readyspan/readyspan/node"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
)

// Verdict is a gate's verdict as the report shows it above the views: its outcome, a headline,
// and one row per objective.
type Verdict struct {
	// Outcome is pass, fail or no-verdict (the banner's colour).
	Outcome  string
	Headline string
	Rows     []VerdictRow
	Notes    []string
}

// VerdictRow is one objective: its status in words, its name, the measure against its limit,
// and the Pods responsible, one line each.
type VerdictRow struct {
	Status, Objective, Message string
	Broken                     bool
	Pods                       []string
}

// verdictHTML is the banner. html/template escapes every string in it for where it stands:
// Pod names come from the cluster.
var verdictHTML = template.Must(template.New("verdict").Parse(`<section class="verdict v-{{.Outcome}}" aria-label="Gate verdict">
<h1>Gate: {{.Headline}}</h1>
<table class="list"><thead><tr><th>status</th><th>objective</th><th>measured</th></tr></thead><tbody>
{{range .Rows}}<tr{{if .Broken}} class="v-broken"{{end}}><td>{{.Status}}</td><td>{{.Objective}}</td><td>{{.Message}}{{range .Pods}}<br><span class="meta">{{.}}</span>{{end}}</td></tr>
{{end}}</tbody></table>
{{range .Notes}}<p class="note">{{.}}</p>
{{end}}</section>
`))

// WriteVerdictReport is WriteReport with the gate's verdict at the top.
func WriteVerdictReport(w io.Writer, title, traceUI string, v Verdict, pods []*phases.Trace, rollouts []*rollout.Trace, nodes []*node.Trace) error {
	var b strings.Builder
	if err := verdictHTML.Execute(&b, v); err != nil {
		return err
	}
	return writeReport(w, title, traceUI, pods, rollouts, nodes, b.String())
}
