package ipvs

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// Reasons of a ServiceError: what of the service could not be programmed.
const (
	ReasonInvalid     = "Invalid"     // a virtual server the kernel form cannot express
	ReasonConflict    = "Conflict"    // a virtual server claimed by another service first
	ReasonKernelError = "KernelError" // the kernel refused a change (e.g. a scheduler module it cannot load)
)

// ErrNotDummy is returned when Config.Interface names an existing link
// that is not a dummy interface: the Writer never changes or deletes the
// addresses of another link (lo, eth0, ...), nor the link itself.
var ErrNotDummy = errors.New("not a dummy interface")

// ErrForeignLink is returned when Config.Interface names a dummy interface
// that this proxy did not create (no LinkAlias) and that is not named
// DefaultInterface: another agent's (NodeLocal DNSCache's nodelocaldns,
// say), whose addresses the Writer must not strip nor Cleanup delete.
var ErrForeignLink = errors.New("a dummy interface this proxy did not create")

// ErrDrift is returned by Check when one of our virtual servers or one of
// the dummy interface's addresses is gone from the kernel (deleted by
// hand); NeedsResync is true until a Resync has restored it.
var ErrDrift = errors.New("kernel state changed behind our back")

// ErrLinkChanged is returned by Apply when the dummy interface was deleted
// or replaced behind our back: its addresses are gone, and NeedsResync is
// true until a Resync has restored them.
var ErrLinkChanged = errors.New("dummy interface deleted or replaced")

// ServiceError is a failure confined to one service: its virtual servers
// (or one of them) could not be programmed, while the rest of the Apply
// or Resync went on. The service is retried by later Applies with
// backoff (NextRetry); NeedsResync stays false for it.
type ServiceError struct {
	Service policy.ServiceKey
	Reason  string // ReasonInvalid, ReasonConflict or ReasonKernelError
	Err     error  // names the virtual server and the operation
}

func (e *ServiceError) Error() string { return e.Err.Error() }
func (e *ServiceError) Unwrap() error { return e.Err }

// SplitErrors separates an error of Apply or Resync into the per-service
// failures and the rest, the failures of the whole data plane (nil when
// there are none). Other errors are returned whole as the rest.
func SplitErrors(err error) ([]*ServiceError, error) {
	if err == nil {
		return nil, nil
	}
	list := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		list = j.Unwrap()
	}
	var svcErrs []*ServiceError
	var rest []error
	for _, e := range list {
		if se, ok := e.(*ServiceError); ok {
			svcErrs = append(svcErrs, se)
		} else {
			rest = append(rest, e)
		}
	}
	return svcErrs, errors.Join(rest...)
}

// planeErrnos are the errors after which the whole data plane's state is
// unknown: the dummy interface is gone, or the netlink socket is dead or
// lost messages. Any other kernel error is the one operation's.
var planeErrnos = []syscall.Errno{
	syscall.ENODEV, syscall.EBADF, syscall.ENOTSOCK, syscall.ENOBUFS,
	syscall.ECONNREFUSED, syscall.EPIPE, syscall.ESHUTDOWN, syscall.ENOTCONN,
}

// planeWide reports whether err leaves the whole data plane unknown.
func planeWide(err error) bool {
	if errors.Is(err, ErrLinkChanged) || errors.Is(err, ErrUnanswered) || errors.Is(err, ErrNotDummy) || errors.Is(err, ErrForeignLink) || errors.Is(err, ErrDrift) {
		return true
	}
	for _, e := range planeErrnos {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// serviceError wraps err as svc's failure.
func serviceError(svc policy.ServiceKey, reason string, err error) error {
	return &ServiceError{Service: svc, Reason: reason, Err: err}
}

// notDummy is the error for a link of another kind.
func notDummy(name, kind string) error {
	return fmt.Errorf("link %s is a %q link: %w; choose another --ipvs-interface", name, kind, ErrNotDummy)
}

// checkLink refuses a link that is not ours to manage: not a dummy
// interface, or a dummy interface without LinkAlias under a name other
// than DefaultInterface.
func checkLink(name string, info LinkInfo) error {
	switch {
	case info.Kind != dummyKind:
		return notDummy(name, info.Kind)
	case info.Alias != LinkAlias && name != DefaultInterface:
		return fmt.Errorf("link %s (alias %q): %w; its addresses are left alone and it is never deleted: choose another --ipvs-interface, or %s",
			name, info.Alias, ErrForeignLink, DefaultInterface)
	}
	return nil
}
