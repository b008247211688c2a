// Package results owns reading the committed results of make
// bench-vs-kube-proxy (benchmarks/vs-kube-proxy/<YYYYMMDD-HHMMSS>.json,
// the report integration/benchscale writes) and the one decision of what
// the table and the plot show: for each number of services, the newest
// file that holds that scale, and per measurement and proxy the median,
// minimum and maximum over that file's rounds, and why rounds lack it
// (Stat's NotYet and NotApplicable; gaps.go: how long a run waited for a
// first sync that had not ended, and the newest older file that measured
// what the selected one lacks, to cite, never to pool). Format and
// Thousands print numbers as the table and the plot both show them.
//
// It reads through an fs.FS and does no other I/O. It must not import the
// main module's packages (hack/benchplot is a module of its own). The
// files' schema (Report, Scale, Run, Measurement) and the two rules every
// table of them shares (Median, Format) are schema.go, a link to
// integration/benchscale/results/schema.go, the file integration/benchscale
// writes the results with: one text compiled by both modules, neither
// importing the other (that package's doc.go says why not an import, and
// why not a generated copy). Load refuses unknown fields, so a change
// there that the committed files no longer fit fails this module's tests
// instead of silently reading zeros.
package results
