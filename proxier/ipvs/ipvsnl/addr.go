package ipvsnl

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlattr"
)

// addrRequest is the route netlink request that adds p to the link of
// index index (RTM_NEWADDR with NLM_F_CREATE|NLM_F_EXCL: an address
// already there is EEXIST, as `ip addr add` and vishvananda/netlink's
// AddrAdd make it) or deletes it (RTM_DELADDR: one not there is
// EADDRNOTAVAIL). Its body is what AddrAdd and AddrDel send for a
// host address: an ifaddrmsg of universe scope, then the address as
// both IFA_LOCAL and IFA_ADDRESS, so that the batched and the
// one-request paths make the same address.
func addrRequest(add bool, index int, p netip.Prefix) (request, error) {
	if !p.IsValid() || index <= 0 {
		return request{}, fmt.Errorf("address %s on link index %d: not a valid request", p, index)
	}
	a := p.Addr().Unmap()
	fam := uint8(unix.AF_INET)
	if a.Is6() {
		fam = unix.AF_INET6
	}
	body := make([]byte, unix.SizeofIfAddrmsg, unix.SizeofIfAddrmsg+2*(unix.NLA_HDRLEN+16))
	body[0], body[1] = fam, uint8(p.Bits())
	binary.NativeEndian.PutUint32(body[4:8], uint32(index))
	body = attrAddr(attrAddr(body, unix.IFA_LOCAL, a), unix.IFA_ADDRESS, a)
	r := request{typ: unix.RTM_DELADDR, body: body}
	if add {
		r.typ, r.flags = unix.RTM_NEWADDR, unix.NLM_F_CREATE|unix.NLM_F_EXCL
	}
	return r, nil
}

// addrDumpRequest is the body of the route netlink dump of the
// namespace's addresses (RTM_GETADDR, NLM_F_DUMP): an ifaddrmsg of any
// family. Kernels answer with every link's addresses; the reader keeps
// those of its link, as vishvananda/netlink's AddrList does.
func addrDumpRequest() []byte { return make([]byte, unix.SizeofIfAddrmsg) }

// parseAddrMessage decodes one message of the address dump: the index
// of the link it is on and the address with its prefix length. The
// address is IFA_LOCAL where the kernel sends one (on a point-to-point
// link IFA_ADDRESS is the peer's), otherwise IFA_ADDRESS, as AddrList
// reads it. ok is false for a message that is not an address of IPv4
// or IPv6. Anything malformed is an error, never a panic.
func parseAddrMessage(m netlink.Message) (index int, p netip.Prefix, ok bool, err error) {
	if m.Header.Type != unix.RTM_NEWADDR {
		return 0, netip.Prefix{}, false, nil
	}
	if len(m.Data) < unix.SizeofIfAddrmsg {
		return 0, netip.Prefix{}, false, fmt.Errorf("address message of %d bytes, shorter than an ifaddrmsg", len(m.Data))
	}
	fam, bits := m.Data[0], int(m.Data[1])
	index = int(binary.NativeEndian.Uint32(m.Data[4:8]))
	var local, address []byte
	aw := nlattr.New(m.Data[unix.SizeofIfAddrmsg:])
	for aw.Next() {
		switch aw.Type {
		case unix.IFA_LOCAL:
			local = aw.Data
		case unix.IFA_ADDRESS:
			address = aw.Data
		}
	}
	if aw.Err != nil {
		return 0, netip.Prefix{}, false, fmt.Errorf("address message of link %d: %w", index, aw.Err)
	}
	raw := local
	if raw == nil {
		raw = address
	}
	var a netip.Addr
	switch {
	case fam == unix.AF_INET && len(raw) == 4:
		a = netip.AddrFrom4([4]byte(raw))
	case fam == unix.AF_INET6 && len(raw) == 16:
		a = netip.AddrFrom16([16]byte(raw))
	case fam != unix.AF_INET && fam != unix.AF_INET6:
		return index, netip.Prefix{}, false, nil
	default:
		return 0, netip.Prefix{}, false, fmt.Errorf("address message of link %d: an address of %d bytes in family %d", index, len(raw), fam)
	}
	p = netip.PrefixFrom(a, bits)
	if !p.IsValid() {
		return 0, netip.Prefix{}, false, fmt.Errorf("address message of link %d: prefix length %d for %s", index, bits, a)
	}
	return index, p, true, nil
}
