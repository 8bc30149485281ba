// Package web is readyspan's own view of its traces: a bounded ring of the recent Pod and rollout
// traces, the JSON API over it (/api/v1/rollouts, /api/v1/rollouts/{id}, /api/v1/pods,
// /api/v1/pods/{uid}), and one page (embedded HTML, CSS, SVG and plain JavaScript, no build
// step) that draws a rollout as a Gantt chart and a Pod as a waterfall. The same page, with the
// data inlined, is the self-contained HTML report of `explain -o html` and `replay -o html`.
//
// A rollout's view is computed once, when its trace arrives, and kept as JSON; a Pod's trace is
// kept as its spans and its waterfall encoded when asked for, since nearly all of them leave the
// ring unread. Ring.Bytes is what the ring holds, and bounds it.
package web
