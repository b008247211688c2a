package app

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// hugePagesOff keeps transparent huge pages out of the proxy's memory
// (prctl PR_SET_THP_DISABLE, for the whole process from now on).
//
// Where THP is "always" (Debian's kernels), the Go heap that the runtime
// hands back after a sync stays resident: khugepaged folds each 2 MiB
// region that still holds one live page back into a whole huge page, so
// the resident set stays far above the heap in use. With THP off for the
// process it follows the heap, at no measurable CPU cost (benchmarks/NOTES.md,
// "Transparent huge pages").
func hugePagesOff() error {
	if err := unix.Prctl(unix.PR_SET_THP_DISABLE, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_THP_DISABLE): %w", err)
	}
	return nil
}
