package web

import (
	_ "embed"
	"encoding/json"
	"io"
	"strings"
)

// The page: one HTML file whose style and script are inlined, served by the daemon and written
// as the report. Its data block holds the configuration (served) or every view (the report).
var (
	//go:embed assets/index.html
	pageHTML string
	//go:embed assets/app.css
	pageCSS string
	//go:embed assets/app.js
	pageJS string
)

// reportCSP forbids the report any network access: everything it shows is inline.
const reportCSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"

// pageData is the data block: where the views come from, and how to link to a trace UI.
type pageData struct {
	// API is the JSON API's path relative to the page; empty in the report.
	API string `json:"api,omitempty"`
	// TraceUI is a URL with {trace_id} where the trace's ID goes; empty for no links.
	TraceUI string `json:"traceUI,omitempty"`
	// Report holds every view when the page is the report.
	Report *reportData `json:"report,omitempty"`
}

type reportData struct {
	Title    string                  `json:"title"`
	Rollouts []RolloutSummary        `json:"rollouts"`
	Pods     []PodSummary            `json:"pods"`
	Gantts   map[string]*RolloutView `json:"gantts"`
	Views    map[string]*PodView     `json:"views"`
}

// writePage writes the page with its data block; csp, when set, goes in a meta element.
func writePage(w io.Writer, title, csp string, d pageData) error {
	data, err := json.Marshal(d) // escapes <, > and &: the block cannot end the script element
	if err != nil {
		return err
	}
	meta := ""
	if csp != "" {
		meta = `<meta http-equiv="Content-Security-Policy" content="` + csp + `">`
	}
	page := strings.NewReplacer(
		"{{csp}}", meta,
		"{{title}}", htmlEscape(title),
		"{{css}}", pageCSS,
		"{{data}}", string(data),
		"{{js}}", pageJS,
	).Replace(pageHTML)
	_, err = io.WriteString(w, page)
	return err
}

var htmlEscape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;").Replace
