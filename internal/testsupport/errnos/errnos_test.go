package errnos

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
)

func TestNamesEachAnswerByItsErrno(t *testing.T) {
	for _, tc := range []struct {
		name string
		errs []error
		want string
	}{
		{"no answers", nil, ""},
		{"nil is ok", []error{nil, nil}, "ok ok"},
		{"an errno by its name", []error{syscall.ENOENT, nil, syscall.EEXIST}, "ENOENT ok EEXIST"},
		{"a wrapped errno by its name, not the wrapping text", []error{fmt.Errorf("add address 10.0.0.1/32: %w", syscall.EADDRNOTAVAIL)}, "EADDRNOTAVAIL"},
		{"an error without an errno by its text", []error{errors.New("short answer")}, "short answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Names(tc.errs); got != tc.want {
				t.Errorf("Names = %q, want %q", got, tc.want)
			}
		})
	}
}
