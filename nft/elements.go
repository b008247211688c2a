package nft

import (
	"net/netip"
	"slices"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// verdict is the value of an empty-services element.
type verdict uint8

const (
	noVerdict   verdict = iota
	rejectGoto          // goto reject-packet
	dropVerdict         // drop
)

// elemID identifies one element of one set. key holds the key bytes and,
// in interval sets, the inclusive end right after them.
type elemID struct {
	set setID
	key string
}

// value is a map element's value: a verdict (empty-services) or data
// (internal-via: the concatenated bytes); set elements have neither.
type value struct {
	verdict verdict
	data    string
}

// contribution is one element a service asks for.
type contribution struct {
	id elemID
	v  value
}

func familyOf(a netip.Addr) *family {
	if a.Is4() {
		return familyV4
	}
	if a.Is6() {
		return familyV6
	}
	return nil
}

// keyBuf builds a concatenated key: every field padded to 4 bytes.
type keyBuf []byte

func (k keyBuf) addr(a netip.Addr) keyBuf { return append(k, a.AsSlice()...) }

func (k keyBuf) proto(p byte) keyBuf { return append(k, p, 0, 0, 0) }

func (k keyBuf) port(p uint16) keyBuf { return append(k, byte(p>>8), byte(p), 0, 0) }

// linearDedup is the number of elements contributions deduplicates by a
// linear scan (most services have a handful) before it builds a map.
const linearDedup = 16

// contributions returns the elements a service's virtual servers need,
// without duplicates, in a stable order. A virtual server with an address
// that is not IP or a protocol that is not TCP, UDP or SCTP has none.
//
// The result is kept by the mirror as long as the service is, so it is
// returned at its length, and elements with equal key bytes (a virtual
// server's key in several sets) share one string.
func contributions(vss []policy.VirtualServer) []contribution {
	var out []contribution
	var seen map[elemID]bool // past linearDedup elements; a linear scan before
	var last string          // the previous element's key
	add := func(id setID, key keyBuf, v value) {
		if string(key) != last {
			last = string(key)
		}
		e := elemID{set: id, key: last}
		if seen == nil && len(out) < linearDedup {
			for _, c := range out {
				if c.id == e {
					return
				}
			}
			out = append(out, contribution{id: e, v: v})
			return
		}
		if seen == nil {
			seen = make(map[elemID]bool, 2*len(out))
			for _, c := range out {
				seen[c.id] = true
			}
		}
		if !seen[e] {
			seen[e] = true
			out = append(out, contribution{id: e, v: v})
		}
	}
	for i := range vss {
		virtualServerElements(&vss[i], add)
	}
	if cap(out) > len(out) {
		out = slices.Clone(out)
	}
	return out
}

// virtualServerElements calls add for every element of one virtual server.
func virtualServerElements(vs *policy.VirtualServer, add func(setID, keyBuf, value)) {
	fam := familyOf(vs.Address)
	proto, ok := vs.Protocol.Number()
	if fam == nil || !ok {
		return
	}
	vsKey := keyBuf(nil).addr(vs.Address).proto(proto).port(vs.Port)
	if !vs.Bound() { // on a node address: recorded, not filtered
		add(idOf(setNodePortServices, fam), vsKey, value{})
	} else {
		add(idOf(setServiceIPs, fam), keyBuf(nil).addr(vs.Address), value{})
		add(idOf(setServicePorts, fam), vsKey, value{})
	}
	if len(vs.Destinations) == 0 {
		switch vs.WhenEmpty {
		case policy.EmptyReject:
			add(idOf(setEmptyServices, fam), vsKey, value{verdict: rejectGoto})
		case policy.EmptyDrop:
			add(idOf(setEmptyServices, fam), vsKey, value{verdict: dropVerdict})
		}
	}
	switch vs.Masquerade {
	case policy.MasqueradeAlways:
		add(idOf(setMasqueradeAlways, fam), vsKey, value{})
	case policy.MasqueradeOffCluster:
		add(idOf(setMasqueradeOff, fam), vsKey, value{})
	}
	if vs.NoTrack {
		add(idOf(setNoTrackServices, fam), vsKey, value{})
	}
	for _, d := range vs.Destinations {
		dfam := familyOf(d.Address)
		if dfam == nil {
			continue
		}
		dKey := keyBuf(nil).addr(d.Address).proto(proto).port(d.Port)
		if vs.NoTrack {
			add(idOf(setNoTrackEndpoints, dfam), dKey, value{})
			add(idOf(setNoTrackPods, dfam), keyBuf(nil).addr(d.Address), value{})
		}
		if d.Local { // only this node's pods can reach themselves through it
			add(idOf(setHairpin, dfam), dKey.addr(d.Address), value{})
		}
	}
	if via := vs.InternalVia; via.IsValid() && familyOf(via.Addr()) == fam {
		add(idOf(setInternalVia, fam), vsKey, value{data: string(keyBuf(nil).addr(via.Addr()).port(via.Port()))})
		add(idOf(setInternalViaKeys, fam), vsKey, value{})
	}
	if vs.Kind == policy.KindLoadBalancer {
		allowed := vs.SourceRanges
		if vs.NodeInSourceRanges {
			// The node's own connections come from the load balancer's
			// address, bound on the dummy interface (kube-proxy's
			// KUBE-LOAD-BALANCER-SOURCE-IP).
			allowed = append(slices.Clip(allowed), netip.PrefixFrom(vs.Address, vs.Address.BitLen()))
		}
		ranges := mergeRanges(allowed, fam)
		if len(ranges) > 0 {
			add(idOf(setLBSourceRanged, fam), vsKey, value{})
		}
		for _, r := range ranges {
			// Concatenated interval: key start, then key end (inclusive).
			k := slices.Concat(vsKey, r.first.AsSlice(), vsKey, r.last.AsSlice())
			add(idOf(setLBSourceAllowed, fam), k, value{})
		}
	}
}

// addrRange is an inclusive range of addresses of one family.
type addrRange struct{ first, last netip.Addr }

// mergeRanges turns prefixes of fam into sorted, disjoint, non-adjacent
// ranges: interval sets reject overlapping elements.
func mergeRanges(prefixes []netip.Prefix, fam *family) []addrRange {
	var rs []addrRange
	for _, p := range prefixes {
		if !p.IsValid() || familyOf(p.Addr()) != fam {
			continue
		}
		p = p.Masked()
		rs = append(rs, addrRange{first: p.Addr(), last: lastAddr(p)})
	}
	slices.SortFunc(rs, func(a, b addrRange) int { return a.first.Compare(b.first) })
	var out []addrRange
	for _, r := range rs {
		if n := len(out); n > 0 {
			prev := &out[n-1]
			next := prev.last.Next()
			if !next.IsValid() || r.first.Compare(next) <= 0 {
				if r.last.Compare(prev.last) > 0 {
					prev.last = r.last
				}
				continue
			}
		}
		out = append(out, r)
	}
	return out
}

// lastAddr is the highest address of a masked prefix.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}
