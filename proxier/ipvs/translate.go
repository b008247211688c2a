package ipvs

import (
	"fmt"
	"net/netip"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// schedulerFlags maps the plan's scheduler flags to IPVS service flag
// bits: the mh and sh schedulers read fallback from SCHED1 and port from
// SCHED2 (IP_VS_SVC_F_SCHED_{MH,SH}_{FALLBACK,PORT}).
var schedulerFlags = map[string]uint32{
	"mh-fallback": FlagSched1,
	"mh-port":     FlagSched2,
	"sh-fallback": FlagSched1,
	"sh-port":     FlagSched2,
}

// wanted is one planned virtual server in kernel form.
type wanted struct {
	svc   policy.ServiceKey
	kind  policy.Kind
	vs    VirtualServer
	dests map[netip.AddrPort]int // weight
	order []netip.AddrPort       // plan order (sorted)
}

// keyOf returns the kernel key of a planned virtual server.
func keyOf(vs *policy.VirtualServer) Key {
	return Key{Addr: vs.Address.Unmap(), Protocol: vs.Protocol, Port: vs.Port}
}

// translate turns a planned virtual server into its kernel form: NAT
// destinations, the plan's scheduler and flags, and persistence.
func translate(svc policy.ServiceKey, vs *policy.VirtualServer) (*wanted, error) {
	k := keyOf(vs)
	if !k.Addr.IsValid() {
		return nil, fmt.Errorf("virtual server %s: invalid address", k)
	}
	switch k.Protocol {
	case policy.ProtocolTCP, policy.ProtocolUDP, policy.ProtocolSCTP:
	default:
		return nil, fmt.Errorf("virtual server %s: unsupported protocol %q", k, k.Protocol)
	}
	w := &wanted{svc: svc, kind: vs.Kind, vs: VirtualServer{Key: k, Scheduler: vs.Scheduler}}
	if w.vs.Scheduler == "" {
		w.vs.Scheduler = "rr"
	}
	for _, f := range vs.SchedulerFlags {
		bit, ok := schedulerFlags[f]
		if !ok {
			return nil, fmt.Errorf("virtual server %s: unknown scheduler flag %q", k, f)
		}
		w.vs.Flags |= bit
	}
	if vs.PersistenceTimeoutSeconds > 0 {
		w.vs.Flags |= FlagPersistent
		w.vs.Timeout = vs.PersistenceTimeoutSeconds
	}
	w.dests = make(map[netip.AddrPort]int, len(vs.Destinations))
	for _, d := range vs.Destinations {
		ap := netip.AddrPortFrom(d.Address.Unmap(), d.Port)
		if ap.Addr().Is4() != k.Addr.Is4() {
			return nil, fmt.Errorf("virtual server %s: destination %s of another family", k, ap)
		}
		if _, dup := w.dests[ap]; !dup {
			w.order = append(w.order, ap)
		}
		w.dests[ap] = int(d.Weight)
	}
	return w, nil
}

// binds reports whether the virtual server's address belongs on the dummy
// interface: every kind but NodePort, which sits on node addresses.
func (w *wanted) binds() bool { return w.kind != policy.KindNodePort }

// hostPrefix is the /32 or /128 of an address.
func hostPrefix(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, a.BitLen()) }

// gracefulTermination reports whether a destination of this protocol is
// drained (weight 0 until its connections end) rather than deleted at
// once. UDP and SCTP are deleted at once, as kube-proxy does: IPVS drops
// their connections on the next packet (expire_nodest_conn).
func gracefulTermination(p policy.Protocol) bool { return p == policy.ProtocolTCP }
