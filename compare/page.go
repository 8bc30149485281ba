package compare

import (
	"html/template"
	"io"
	"strings"
)

// WriteHTML writes the result as one self-contained page (no script, its style inline, nothing
// fetched), as web.WriteReport writes a replay's. html/template escapes every value.
func WriteHTML(w io.Writer, r *Result) error {
	return pageTemplate.Execute(w, r)
}

var pageTemplate = template.Must(template.New("compare").Funcs(template.FuncMap{
	"signed":  signed,
	"seconds": seconds3,
	"span":    span,
	"share":   shareText,
	"pct":     pct,
	"indent":  func(depth int) string { return strings.Repeat("\u00a0\u00a0", depth) },
	"mark":    func(e Estimate) string { return mark(&e) },
	"mean":    meanText,
	"words":   wordsOf,
	"shown": func(vs []ValueShare) []ValueShare {
		return vs[:min(len(vs), shownValues)]
	},
	"rest": func(vs []ValueShare) int { return max(len(vs)-shownValues, 0) },
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'">
<meta name="referrer" content="no-referrer">
<title>readyspan compare: {{.A.Label}} → {{.B.Label}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#1b1f24}
table{border-collapse:collapse;margin:.5em 0 1.5em}
td,th{padding:2px 10px;text-align:right;white-space:nowrap}
td:first-child,th:first-child{text-align:left;font-family:ui-monospace,monospace}
tr:nth-child(even){background:#f4f6f8}
.sig{color:#b3261e;font-weight:600}.few{color:#8a8f98}
p.sentence{font-size:16px;max-width:60em}
.method{color:#57606a;max-width:60em}
</style></head><body>
<h1>{{.A.Label}} → {{.B.Label}}</h1>
<p>A: {{.A.Label}}, {{.A.Pods}} Pods Ready{{range $k, $v := .A.NotReady}}; {{$v}} {{$k}}{{end}}.
B: {{.B.Label}}, {{.B.Pods}} Pods Ready{{range $k, $v := .B.NotReady}}; {{$v}} {{$k}}{{end}}.</p>
<p class="sentence">{{.Sentence}}</p>
<p class="method">Shift B − A; {{pct .Method.Level}}% intervals: {{.Method.Interval}} ({{.Method.Resamples}} resamples, seed {{.Method.Seed}}).
<span class="sig">*</span> significant; <span class="few">~</span> too few Pods or runs to say.</p>
<table>
<tr><th>span</th><th>Pods A/B</th><th>mean A</th><th>mean B</th><th>mean shift</th><th>interval</th><th>p50 shift</th><th>p90 shift</th><th>p99 shift</th></tr>
{{range .Rows}}{{$m := index .Stats 0}}<tr><td>{{indent .Depth}}{{.Span}}</td><td>{{.WithA}}/{{.WithB}}</td><td>{{seconds $m.A}}</td><td>{{seconds $m.B}}</td>
<td{{if $m.Significant}} class="sig"{{else if or $m.TooFewPods $m.TooFewRuns}} class="few"{{end}}>{{signed $m.Shift.Est}}{{mark $m}}</td><td>{{span $m.Shift}}</td>
{{range $i, $e := .Stats}}{{if $i}}<td{{if $e.Significant}} class="sig"{{else if or $e.TooFewPods $e.TooFewRuns}} class="few"{{end}}>{{signed $e.Shift.Est}}{{mark $e}}</td>{{end}}{{end}}</tr>
{{end}}</table>
{{range .Attribution}}<h2>What explains {{.Span}}'s mean shift of {{signed .Shift.Est}} ({{span .Shift}})</h2>
{{if not .Dims}}<p>The sets differ in none of the dimensions compared.</p>{{end}}
{{range .Dims}}<h3>{{.Words}}: explains {{share .Share}}{{if .ConfoundedWith}}, confounded with {{words .ConfoundedWith}}{{end}}</h3>
<p>Mix {{signed .Mix.Est}} ({{span .Mix}}), rate {{signed .Rate.Est}} ({{span .Rate}}){{if .Separates}}; no value on both sides{{end}}.</p>
<table><tr><th>value</th><th>Pods A</th><th>mean A</th><th>Pods B</th><th>mean B</th><th>rate part</th></tr>
{{range shown .Values}}<tr><td>{{.Value}}</td><td>{{.PodsA}}</td><td>{{mean .MeanA}}</td><td>{{.PodsB}}</td><td>{{mean .MeanB}}</td><td>{{signed .Rate}}</td></tr>
{{end}}{{with rest .Values}}<tr><td>… {{.}} more values</td></tr>{{end}}</table>
{{end}}{{end}}</body></html>
`))
