package app

import (
	"os"
	"runtime/debug"
)

// coldStartGCPercent is the collector's growth target (GOGC) from start
// until the first sync has applied, unless the environment sets GOGC.
// The cold start holds the whole plan and its kernel batches beside the
// informer caches, and at Go's default (100) the heap grows to twice
// what is live before each collection: the cold start's peak sets the
// memory an operator must give the DaemonSet, while the resident set
// afterwards is a fraction of it. A lower target collects more often,
// during the cold start only (BENCHMARKS.md, "Memory").
const coldStartGCPercent = 50

// coldStartGC sets coldStartGCPercent, unless GOGC is set, and returns
// what puts the previous target back.
func coldStartGC() (restore func()) {
	if _, set := os.LookupEnv("GOGC"); set {
		return func() {}
	}
	old := debug.SetGCPercent(coldStartGCPercent)
	return func() { debug.SetGCPercent(old) }
}
