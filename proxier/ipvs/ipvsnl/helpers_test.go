package ipvsnl

import (
	"errors"
	"net/netip"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// key parses "10.96.0.10:80/TCP" or "[fd00::a]:53/UDP".
func key(s string) Key {
	ap, proto, _ := strings.Cut(s, "/")
	a := netip.MustParseAddrPort(ap)
	return Key{Address: a.Addr(), Protocol: policy.Protocol(proto), Port: a.Port()}
}

// errnos renders one answer per request: "ok", the errno's name, or the
// error.
func errnos(errs []error) string {
	var out []string
	for _, err := range errs {
		var errno syscall.Errno
		switch {
		case err == nil:
			out = append(out, "ok")
		case errors.As(err, &errno):
			out = append(out, unix.ErrnoName(errno))
		default:
			out = append(out, err.Error())
		}
	}
	return strings.Join(out, " ")
}
