// Package phases is the pure model of one Pod's startup: what was observed of it (Pod, with
// every observation of each boundary and its source) and how that becomes a trace (Build): the
// root span, the six phases in causal order (submit, apiserver, controllers, scheduling,
// kubelet, status) and the spans below them, named in the span catalogue (catalogue.go).
//
// Build picks, for each boundary, the most precise observation consistent with the others
// (stamp.go, narrow.go), corrects components whose clocks run ahead (skew.go), keeps children
// inside their parents and records every clamp, and marks impossible orders (order.go) rather
// than hiding them. It reads no informer and knows no exporter, so the same observations always
// give the same trace, byte for byte.
package phases
