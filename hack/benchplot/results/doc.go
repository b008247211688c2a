// Package results owns reading the committed results of make
// bench-vs-kube-proxy (benchmarks/vs-kube-proxy/<YYYYMMDD-HHMMSS>.json,
// the report integration/benchscale writes) and the one decision of what
// the table and the plot show: for each number of services, the newest
// file that holds that scale, and per measurement and proxy the median,
// minimum and maximum over that file's rounds. Format and Thousands print
// numbers as the table and the plot both show them.
//
// It reads through an fs.FS and does no other I/O. It must not import the
// main module's packages (hack/benchplot is a module of its own): the JSON
// schema is restated here, in Report, rather than shared with
// integration/benchscale, so that a change there that breaks the committed
// files fails this module's tests instead of silently reading zeros.
package results
