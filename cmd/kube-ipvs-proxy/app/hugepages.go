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
// region that still holds one live page back into a whole huge page. At
// 10k services in the VM lab that kept RssAnon at 109–139 MiB for 56–59
// MiB of heap in use; with THP off for the process it was 69–71 MiB, and
// the cold start's CPU stayed within the noise (BENCHMARKS.md,
// "Transparent huge pages").
func hugePagesOff() error {
	if err := unix.Prctl(unix.PR_SET_THP_DISABLE, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_THP_DISABLE): %w", err)
	}
	return nil
}
