// Package chart owns the plot make bench-plot writes
// (benchmarks/vs-kube-proxy.svg): two panels side by side, IPVS table
// complete and CPU until then, each with kube-proxy's and ours' medians
// as grouped bars per number of services, whiskers from the minimum to
// the maximum over the rounds (none for a single round), and the median
// written above each bar.
//
// It draws what package results selected, with gonum.org/v1/plot's SVG
// canvas only (no raster or PDF backend), and returns the bytes; the
// caller writes them. The same input gives the same bytes, which is what
// make bench-plot's -check compares. It must not import the main
// module's packages.
package chart
