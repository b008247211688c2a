package apiconv

import (
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	netutils "k8s.io/utils/net"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// A Service's external and load-balancer IPs and its source ranges are
// normalised here, once, before the engine decides anything: parsed as
// kube-proxy parses them (leniently: clusters upgraded from before the
// API's strict IP validation still hold "010.1.2.3" and "::ffff:a.b.c.d"),
// canonical (one address written two ways is one value), each kept once,
// and without the addresses no Service may take (policy.AddressRefusal).
// What does not parse or is refused drops that address alone, with a
// warning naming the field and its index, never the whole Service: one
// bad entry (a legacy object's, a --dry-run manifest's) must not take the
// ClusterIP and NodePorts with it.

// ParseIPSloppy parses an address as kube-proxy does (k8s.io/utils/net
// ParseIPSloppy): an IPv4 octet with leading zeros is read as decimal
// ("010.1.2.3" is 10.1.2.3), and an IPv4-mapped IPv6 address is that
// IPv4 address. A zoned address is refused. The result is canonical.
func ParseIPSloppy(s string) (netip.Addr, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		if a.Zone() != "" {
			return netip.Addr{}, fmt.Errorf("zoned address %s", policy.Quoted(s))
		}
		return a.Unmap(), nil
	}
	ip := netutils.ParseIPSloppy(s)
	if ip == nil {
		return netip.Addr{}, fmt.Errorf("%s is not an IP address", policy.Quoted(s))
	}
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap(), nil
}

// ParsePrefixSloppy parses a CIDR as kube-proxy parses
// loadBalancerSourceRanges (k8s.io/utils/net ParseCIDRSloppy, surrounding
// spaces trimmed): leading zeros are decimal, host bits are cleared, and
// an IPv4-mapped IPv6 prefix of /96 or longer is its IPv4 prefix (a
// shorter one holds no IPv4 address and is refused).
func ParsePrefixSloppy(s string) (netip.Prefix, error) {
	t := strings.TrimSpace(s)
	p, err := netip.ParsePrefix(t)
	if err != nil {
		_, n, err := netutils.ParseCIDRSloppy(t)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%s is not a CIDR", policy.Quoted(s))
		}
		a, _ := netip.AddrFromSlice(n.IP)
		ones, _ := n.Mask.Size()
		p = netip.PrefixFrom(a, ones)
	}
	if a := p.Addr(); a.Is4In6() {
		if p.Bits() < 96 {
			return netip.Prefix{}, fmt.Errorf("%s is an IPv4-mapped prefix shorter than /96", policy.Quoted(s))
		}
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p.Masked(), nil
}

// serviceAddrs collects a Service's normalised external and
// load-balancer IPs, and the warnings about those it left out.
type serviceAddrs struct {
	obj  string
	key  policy.ServiceKey
	seen map[netip.Addr]string // the field each kept address came from
	ws   []policy.Warning
}

func (b *serviceAddrs) warn(reason, field, format string, args ...any) {
	b.ws = append(b.ws, policy.Warning{Object: b.obj, Field: field, Reason: reason, Service: b.key,
		Message: fmt.Sprintf(format, args...)})
}

// take parses the address at field and reports whether it is kept: it
// parses, may be taken, and was not kept before.
func (b *serviceAddrs) take(field, raw string) (netip.Addr, bool) {
	a, err := ParseIPSloppy(raw)
	if err != nil {
		b.warn(policy.ReasonInvalidAddress, field, "invalid IP: %v; this address left out, the Service's others served", err)
		return netip.Addr{}, false
	}
	if why := policy.AddressRefusal(a); why != "" {
		b.warn(policy.ReasonRefusedAddress, field, "%s is %s, which no Service may take; not served", a, why)
		return netip.Addr{}, false
	}
	if first, dup := b.seen[a]; dup {
		b.warn(policy.ReasonDuplicateAddress, field, "%s is also %s; served once, as that", a, first)
		return netip.Addr{}, false
	}
	if b.seen == nil {
		b.seen = map[netip.Addr]string{}
	}
	b.seen[a] = field
	return a, true
}

// addresses normalises svc's load-balancer IPs, source ranges and
// external IPs into s, and returns the warnings about what it left out.
// Load-balancer IPs come first, so that an address that is also an
// external IP is served as a load-balancer IP, which the source ranges
// hold, never as an external IP, which they do not.
func addresses(obj string, svc *corev1.Service, s *policy.Service) []policy.Warning {
	b := &serviceAddrs{obj: obj, key: s.Key}
	ranges, bad := sourceRanges(b, svc.Spec.LoadBalancerSourceRanges)
	s.LoadBalancerSourceRanges = ranges
	for i, ing := range svc.Status.LoadBalancer.Ingress {
		if ing.IP == "" || (ing.IPMode != nil && *ing.IPMode == corev1.LoadBalancerIPModeProxy) {
			continue
		}
		field := fmt.Sprintf("status.loadBalancer.ingress[%d].ip", i)
		a, ok := b.take(field, ing.IP)
		if ok && bad && !hasFamily(ranges, a.Is4()) {
			// Without its family's ranges the address would be open to
			// every client, which the invalid entry may have meant to
			// prevent: fail closed.
			b.warn(policy.ReasonInvalidAddress, field, "%s not served: spec.loadBalancerSourceRanges has an invalid entry and no valid %s one, so it is served to no client rather than to every client",
				a, familyName(a.Is4()))
			continue
		}
		if ok {
			s.LoadBalancerIPs = append(s.LoadBalancerIPs, a)
		}
	}
	for i, raw := range svc.Spec.ExternalIPs {
		if a, ok := b.take(fmt.Sprintf("spec.externalIPs[%d]", i), raw); ok {
			s.ExternalIPs = append(s.ExternalIPs, a)
		}
	}
	return b.ws
}

// sourceRanges parses loadBalancerSourceRanges leniently, as kube-proxy
// does; an entry that does not parse is left out with a warning, and bad
// says there was one.
func sourceRanges(b *serviceAddrs, raw []string) (out []netip.Prefix, bad bool) {
	for i, r := range raw {
		p, err := ParsePrefixSloppy(r)
		if err != nil {
			b.warn(policy.ReasonInvalidAddress, fmt.Sprintf("spec.loadBalancerSourceRanges[%d]", i),
				"invalid CIDR: %v; left out, and a load-balancer IP of a family no valid entry is of is not served", err)
			bad = true
			continue
		}
		out = append(out, p)
	}
	return out, bad
}

func hasFamily(ranges []netip.Prefix, v4 bool) bool {
	for _, p := range ranges {
		if p.Addr().Is4() == v4 {
			return true
		}
	}
	return false
}

func familyName(v4 bool) string {
	if v4 {
		return "IPv4"
	}
	return "IPv6"
}

// DropExternalIPs leaves s's external IPs out, with the warnings about
// them, as kube-proxy does with the feature gate
// AllowServiceExternalIPs=false.
func DropExternalIPs(s *policy.Service) {
	s.ExternalIPs = nil
	var ws []policy.Warning
	for _, w := range s.Warnings {
		if !strings.HasPrefix(w.Field, "spec.externalIPs") {
			ws = append(ws, w)
		}
	}
	s.Warnings = ws
}

// refusedEndpoints counts a slice's endpoints left out for their
// address's class, to warn once per class, not once per endpoint.
type refusedEndpoints struct {
	order []string // classes, in the order first seen
	first map[string]refusedEndpoint
}

type refusedEndpoint struct {
	field string
	addr  netip.Addr
	n     int
}

func (r *refusedEndpoints) add(why, field string, a netip.Addr) {
	if r.first == nil {
		r.first = map[string]refusedEndpoint{}
	}
	e, ok := r.first[why]
	if !ok {
		r.order = append(r.order, why)
		e = refusedEndpoint{field: field, addr: a}
	}
	e.n++
	r.first[why] = e
}

// warnings are the slice's warnings: one per class.
func (r *refusedEndpoints) warnings(obj string, svc policy.ServiceKey) []policy.Warning {
	var ws []policy.Warning
	for _, why := range r.order {
		e := r.first[why]
		msg := fmt.Sprintf("%s is %s, which no Service may take; endpoint left out", e.addr, why)
		if e.n > 1 {
			msg += fmt.Sprintf(", and %d more of this slice's for being %s", e.n-1, why)
		}
		ws = append(ws, policy.Warning{Object: obj, Field: e.field, Reason: policy.ReasonRefusedAddress, Service: svc, Message: msg})
	}
	return ws
}
