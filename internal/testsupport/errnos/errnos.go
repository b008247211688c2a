package errnos

import (
	"errors"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Names renders one answer per request, space-separated: "ok" for nil,
// the name of the errno an error wraps, or else the error's text.
func Names(errs []error) string {
	out := make([]string, len(errs))
	for i, err := range errs {
		var errno syscall.Errno
		switch {
		case err == nil:
			out[i] = "ok"
		case errors.As(err, &errno):
			out[i] = unix.ErrnoName(errno)
		default:
			out[i] = err.Error()
		}
	}
	return strings.Join(out, " ")
}
