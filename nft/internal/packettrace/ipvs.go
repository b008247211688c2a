package packettrace

import (
	"fmt"
	"net/netip"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/ipvs"
)

// IPVS reads the virtual servers and destinations of IPVS:
// *ipvs.FakeKernel implements it (any ipvs.Kernel does).
type IPVS interface {
	VirtualServers() ([]ipvs.VirtualServer, error)
	Destinations(k ipvs.Key) ([]ipvs.Destination, error)
}

// vsKey is a virtual server's identity as a packet meets it.
type vsKey struct {
	addr  netip.Addr
	proto uint8
	port  uint16
}

// ipvsDest is a destination and its weight: a weight of 0 (draining)
// keeps the connections it has, and gets no new one.
type ipvsDest struct {
	to     netip.AddrPort
	weight int
}

// readIPVS snapshots every virtual server's destinations, in the order
// the kernel lists them (by address and port). It is the only code that
// reads ipvs.Key's fields.
func readIPVS(k IPVS) (map[vsKey][]ipvsDest, error) {
	vss, err := k.VirtualServers()
	if err != nil {
		return nil, fmt.Errorf("list ipvs virtual servers: %w", err)
	}
	out := make(map[vsKey][]ipvsDest, len(vss))
	for _, vs := range vss {
		n, ok := policy.Protocol(vs.Protocol).Number()
		if !ok {
			return nil, fmt.Errorf("ipvs virtual server %s: unknown protocol", vs.Key)
		}
		dests, err := k.Destinations(vs.Key)
		if err != nil {
			return nil, fmt.Errorf("list destinations of %s: %w", vs.Key, err)
		}
		key := vsKey{addr: vs.Address.Unmap(), proto: n, port: vs.Port}
		out[key] = []ipvsDest{}
		for _, d := range dests {
			out[key] = append(out[key], ipvsDest{to: netip.AddrPortFrom(d.Addr.Unmap(), d.Port), weight: int(d.Weight)})
		}
	}
	return out, nil
}
