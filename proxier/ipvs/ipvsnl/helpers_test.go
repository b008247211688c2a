package ipvsnl

import (
	"net/netip"
	"strings"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// key parses "10.96.0.10:80/TCP" or "[fd00::a]:53/UDP".
func key(s string) Key {
	ap, proto, _ := strings.Cut(s, "/")
	a := netip.MustParseAddrPort(ap)
	return Key{Address: a.Addr(), Protocol: policy.Protocol(proto), Port: a.Port()}
}
