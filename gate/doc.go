// Package gate judges Pod startups and rollouts against a service-level objective file, for CI:
// `readyspan gate` waits for a rollout or a window of startups (or reads a recording), hands the
// finished traces to Judge, and prints the Verdict as text, JSON, JUnit XML or the HTML report.
//
// The package is pure: an SLO file in (Parse, then Validate), traces in, a Verdict out. It
// reads no cluster and no clock, so the same traces always give the same verdict. What it
// measures is only what the traces measured: a span's length, a Pod's failure reason, an old
// Pod's removal from the nodes' rules; where a trace did not observe a value, the objective
// says "not observed" rather than passing.
package gate
