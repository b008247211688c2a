// Package golden owns the golden-file checks of the tests: comparing a
// test's output with a file under testdata (or examples/plans), and the
// -update flag that rewrites those files instead (`go test ./pkg -update`
// rewrites that package's golden files; review the diff before
// committing).
//
// It registers -update on the standard flag set, so it is imported only
// from _test.go files, and by each test binary at most once in place of a
// package-local -update flag. golden must not import any package of this
// module: it is os, testing and go-cmp only.
package golden
