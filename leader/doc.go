// Package leader decides which readyspan process exports a trace, so that handing over between
// processes neither loses a trace nor exports one twice.
//
// A stopping readyspan exports every Pod that is Ready (tracer.Correlator.Drain). What it
// cannot export are Pods that become Ready after it stopped; the next process sees those as
// already Ready and would skip them. Two mechanisms close that gap:
//
//   - a restart of one process (a state file): the stopping process writes when it stopped and
//     the UIDs it exported last; the next one traces Pods Ready since then, except those UIDs;
//   - leader election: the standby correlates too, and keeps what it would have exported in a
//     short buffer; when it takes over it exports the buffered traces of Pods that became Ready
//     after the previous leader's last renewal (or its release, which a graceful stop does).
//     A stopping leader also leaves the UIDs it exported last on a second Lease
//     (<lease>-handover), the in-cluster counterpart of the state file: a Pod whose Ready
//     second straddles the release is then neither lost nor exported twice.
//
// Gate is the sink between the correlator and the exporter that applies this policy; Run
// campaigns for the Lease and tells the Gate when it leads.
package leader
