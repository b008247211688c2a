// Package retained measures, in Go benchmarks, how much memory a value
// keeps alive: the live heap its construction adds, after full
// collections. The writers' benchmarks use it to report their state's
// share of the proxy's RSS (benchmarks/NOTES.md); and, with ReportPeak, the most
// heap a run holds at once, what a cold sync adds to the proxy's peak RSS.
package retained
