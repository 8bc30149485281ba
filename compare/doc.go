// Package compare holds the statistics of `readyspan compare`: two sets of Pod startups (each
// Pod reduced to its startup's length, the time of each span name of the catalogue and the
// values of the dimensions a shift may come from), the shift of each phase's and sub-step's
// mean and percentiles with bootstrap confidence intervals, and the attribution of the shift of
// the mean to the dimensions that differ between the sets, split into the part the mix of Pods
// changing explains and the part each value getting slower explains. It reads no files and no
// network (package compare/source does) and prints nothing but what its report functions are
// handed: the same two sets give byte-identical results.
package compare
