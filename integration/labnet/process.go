//go:build integration

package labnet

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// AsAnotherProcess runs fn on a thread renamed name (prctl PR_SET_NAME):
// the kernel names an nftables transaction's committer by its thread's
// command name, so fn's edits look like another program's, as a hand
// edit with nft does, while the proxy under test runs in this process.
func AsAnotherProcess(name string, fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	own := make([]byte, 16)
	if err := unix.Prctl(unix.PR_GET_NAME, uintptr(unsafe.Pointer(&own[0])), 0, 0, 0); err != nil {
		return fmt.Errorf("prctl PR_GET_NAME: %w", err)
	}
	set := func(b []byte) error {
		return unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&b[0])), 0, 0, 0)
	}
	if err := set(append([]byte(name), 0)); err != nil {
		return fmt.Errorf("prctl PR_SET_NAME %s: %w", name, err)
	}
	defer func() { _ = set(own) }()
	return fn()
}
