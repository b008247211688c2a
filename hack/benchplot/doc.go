// Command benchplot is make bench-plot: it renders BENCHMARKS.md's table
// of kube-proxy against ours and the plot benchmarks/vs-kube-proxy.svg
// from the committed results of make bench-vs-kube-proxy
// (benchmarks/vs-kube-proxy/<YYYYMMDD-HHMMSS>.json), so that the figures
// on top of BENCHMARKS.md are always those of files in the repository.
//
//	go run . -results ../../benchmarks/vs-kube-proxy -benchmarks ../../BENCHMARKS.md -svg ../../benchmarks/vs-kube-proxy.svg
//	go run . -check …   # write nothing; exit 1 if either is not what the results render
//
// For each number of services it shows the newest result file that holds
// that number (by the time in the file's name), not a pool of every
// file's rounds: a file is one VM boot with one harness and one commit,
// and a newer run is made to supersede an older one. Within that file,
// each figure is the median over the rounds; the plot's whiskers span the
// minimum to the maximum. A cell without a value says why, from the
// files: "n/a (ours only)" for a measurement of our cold start alone,
// "not measured †" for one taken only after a first sync the run stopped
// waiting for, the † note under the table saying how long it waited and
// citing the newest older file that measured it, as another run; a dash
// only where the files give no reason. The table goes between the lines
// "<!-- begin: make bench-plot -->" and "<!-- end: make bench-plot -->"
// of BENCHMARKS.md, and every other byte of the file stays as it is.
//
// -check is what keeps the two from going stale: this module's test runs
// it over the committed files (make lint runs that test), and it fails
// when someone commits a result without running make bench-plot, or
// edits the generated text by hand.
//
// Packages: results (reading the files, the newest per scale, medians),
// markdown (the table, the splice between the markers), chart (the SVG).
// This is a module of its own so that gonum.org/v1/plot stays out of the
// proxy's module graph; it must not import the proxy's packages (its
// go.mod does not require the main module, so it cannot). The one file it
// shares with the proxy's module, the result files' schema, it shares by
// a link (results/schema.go), not an import.
package main
