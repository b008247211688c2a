package netlinkdump

import (
	"errors"
	"fmt"
	"time"

	"github.com/vishvananda/netlink"
)

// Attempts bounds how often Redo runs a dump; attempt k (from 0) waits
// k*Backoff first, so that a burst of changes (a pod's interface coming
// up) can pass, waiting only while every dump is interrupted. Under
// changes that never pause every attempt may fail: callers that must not
// lose the read retry later. Ten, not five: beside frequent address
// changes a large dump is often interrupted, and the chance that every
// attempt is falls with each one.
const (
	Attempts = 10
	Backoff  = 10 * time.Millisecond
)

// Redo runs dump until it returns anything but an interrupted dump, at
// most Attempts times, and returns that. When every attempt was
// interrupted it returns the zero T and an error wrapping
// netlink.ErrDumpInterrupted.
func Redo[T any](dump func() (T, error)) (T, error) {
	return redo(dump, time.Sleep)
}

// redo is Redo, with sleep waiting before each attempt.
func redo[T any](dump func() (T, error), sleep func(time.Duration)) (T, error) {
	var err error
	for k := range Attempts {
		sleep(time.Duration(k) * Backoff)
		var v T
		if v, err = dump(); !errors.Is(err, netlink.ErrDumpInterrupted) {
			return v, err
		}
	}
	var zero T
	return zero, fmt.Errorf("%w (%d attempts)", err, Attempts)
}
