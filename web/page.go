package web

import (
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"io"
	"strings"
)

// The page: one HTML file, its style and its script. The daemon serves the three as files
// (the page's policy then allows scripts from the server only); the report inlines them and
// allows exactly these bytes by their hashes. Its data block holds the configuration (served)
// or every view (the report). The style and the script each begin with the part generated from
// phases/conventions.yaml (the rollout's categories, their colours and words), so the page
// stays one style and one script, and works offline.
var (
	//go:embed assets/index.html
	pageHTML string
	//go:embed assets/generated_categories.css
	categoriesCSS string
	//go:embed assets/app.css
	appCSS string
	//go:embed assets/generated_categories.js
	categoriesJS string
	//go:embed assets/app.js
	appJS string

	pageCSS = categoriesCSS + appCSS
	pageJS  = categoriesJS + appJS
)

// cspHash is the CSP source that allows one inline script or style element: the hash of its
// exact text, so the report's own script runs and any other inline script (were escaping ever
// to fail) does not.
func cspHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// reportCSP forbids the report any network access and any script but its own: everything it
// shows is inline. A policy in a meta element cannot say frame-ancestors (browsers ignore it
// there) and a file has no headers: a web page cannot frame a file:// URL, and whoever serves the
// report over HTTP sets the framing headers (the daemon's UI sends them).
var reportCSP = "default-src 'none'; script-src " + cspHash(pageJS) + "; style-src " + cspHash(pageCSS) +
	"; img-src data:; base-uri 'none'; form-action 'none'"

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
	Title     string                  `json:"title"`
	Rollouts  []RolloutSummary        `json:"rollouts"`
	Pods      []PodSummary            `json:"pods"`
	Nodes     []NodeSummary           `json:"nodes"`
	Gantts    map[string]*RolloutView `json:"gantts"`
	Views     map[string]*PodView     `json:"views"`
	NodeViews map[string]*NodeView    `json:"nodeViews"`
}

// writePage writes the page with its data block. inline puts the style and the script in the
// page (the report), else the page links to app.css and app.js beside it (served). csp, when set,
// goes in a meta element.
func writePage(w io.Writer, title, csp string, inline bool, d pageData) error {
	return writePageBanner(w, title, csp, inline, d, "")
}

// writePageBanner is writePage with banner, HTML the caller escaped (html/template), above the
// views: a gate's verdict.
func writePageBanner(w io.Writer, title, csp string, inline bool, d pageData, banner string) error {
	data, err := json.Marshal(d) // escapes <, > and &: the block cannot end the script element
	if err != nil {
		return err
	}
	meta := ""
	if csp != "" {
		meta = `<meta http-equiv="Content-Security-Policy" content="` + csp + `">` // readyspan's own constant: no quote in it
	}
	style, script := `<link rel="stylesheet" href="app.css">`, `<script src="app.js"></script>`
	if inline {
		// Exactly the hashed bytes between the tags: one more byte and the browser refuses them.
		style, script = "<style>"+pageCSS+"</style>", "<script>"+pageJS+"</script>"
	}
	page := strings.NewReplacer(
		"{{csp}}", meta,
		"{{title}}", htmlEscape(title),
		"{{style}}", style,
		"{{data}}", string(data),
		"{{script}}", script,
		"{{banner}}", banner,
	).Replace(pageHTML)
	_, err = io.WriteString(w, page)
	return err
}

var htmlEscape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;").Replace
