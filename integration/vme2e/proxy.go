//go:build integration && linux

package vme2e

import (
	"context"
	"io"
	"os"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/cmd/kube-ipvs-proxy/app"
)

// StartProxy runs the command's real mode, inside the VM, with the given
// command line (parsed and validated as main does); its plans go to
// stdout. The returned stop cancels it and waits for a clean exit; it
// also runs when the test ends.
func StartProxy(t testing.TB, stdout io.Writer, args ...string) (stop func()) {
	t.Helper()
	opts := MustParse(t, args...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- app.Run(ctx, opts, stdout, os.Stderr) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if code := <-done; code != app.ExitOK {
			t.Errorf("the proxy exited %d", code)
		}
	}
	t.Cleanup(stop)
	return stop
}

// MustParse parses and validates a command line as main does.
func MustParse(t testing.TB, args ...string) *app.Options {
	t.Helper()
	opts, err := app.ParseFlags(args, io.Discard)
	if err == nil {
		err = opts.Validate()
	}
	if err != nil {
		t.Fatalf("flags %v: %v", args, err)
	}
	return opts
}
