// Package results is the schema of make bench-scale's and make
// bench-vs-kube-proxy's result files (.cache/bench-scale/<time>.json,
// benchmarks/vs-kube-proxy/<YYYYMMDD-HHMMSS>.json): Report, its Scales,
// their Runs and Measurements, the proxies' labels and the names of the
// measurements BENCHMARKS.md's table shows (with which of them a run
// takes only after the proxy's own first sync, and which are ours
// alone), and the two rules every table of them shares, Median and
// Format. integration/benchscale writes the files with it;
// hack/benchplot reads the committed ones with it.
//
// schema.go and its test are compiled by two modules: here, and as part
// of hack/benchplot/results, where hack/benchplot/results/schema.go and
// schema_test.go are symbolic links to them (a test there fails when
// either is a copy). hack/benchplot is a module of its own on purpose
// (gonum.org/v1/plot stays out of the proxy's module graph, and its test
// holds that its go.mod neither requires nor replaces this module:
// requiring it would also let this module's requirements raise the
// versions the plot is built with: tried, it moved golang.org/x/text,
// which the SVG writer's font reading uses). So the schema cannot be
// imported across; a generated copy would still be the same code twice;
// the link keeps one text. Hence schema.go imports the standard library only, and its
// package clause is `package results` in both places.
//
// A change here that the committed result files no longer fit (a field
// renamed or removed) fails hack/benchplot's tests, which decode every
// committed file with unknown fields refused (make lint runs them).
package results
