package ipvs

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
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
	ae := netlink.NewAttributeEncoder()
	ae.Bytes(unix.IFA_LOCAL, a.AsSlice())
	ae.Bytes(unix.IFA_ADDRESS, a.AsSlice())
	attrs, err := ae.Encode()
	if err != nil {
		return request{}, fmt.Errorf("encode address %s: %w", p, err)
	}
	r := request{typ: unix.RTM_DELADDR, body: append(body, attrs...)}
	if add {
		r.typ, r.flags = unix.RTM_NEWADDR, unix.NLM_F_CREATE|unix.NLM_F_EXCL
	}
	return r, nil
}
