//go:build integration

package benchscale

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/mdlayher/netlink"
	mobyipvs "github.com/moby/ipvs"
	vnl "github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/benchscale/results"
)

// batchedFloor is the kernel's floor for the cold start when requests
// are batched: the table the cold start programmed, programmed again
// into a fresh network namespace (see floor) by a minimal writer that
// hands the kernel many requests per sendmsg. Generic and route netlink
// process every message of a sendmsg in turn; only the last message of
// a batch asks for an acknowledgement (the kernel answers the others
// only if they fail, and any answer fails the floor), so a batch costs
// one sendmsg and one read. What is left is the kernel's own work per
// virtual server, destination and address, and encoding. The encoders
// are written here, on mdlayher/netlink, so that this floor owes
// nothing to the proxy's code.
func (b *bench) batchedFloor(tb table, cold time.Duration) {
	t := b.t
	var took, addrsTook time.Duration
	var batches int
	var got Expected
	err := inFreshNetns(func() error {
		rt, err := netlink.Dial(unix.NETLINK_ROUTE, nil)
		if err != nil {
			return fmt.Errorf("rtnetlink socket: %w", err)
		}
		defer rt.Close()
		gc, err := netlink.Dial(unix.NETLINK_GENERIC, nil)
		if err != nil {
			return fmt.Errorf("generic netlink socket: %w", err)
		}
		defer gc.Close()
		for _, c := range []*netlink.Conn{rt, gc} {
			if err := c.SetWriteBuffer(floorBatchBytes * 2); err != nil {
				return fmt.Errorf("send buffer: %w", err)
			}
		}
		family, err := genlFamily(gc, "IPVS")
		if err != nil {
			return err
		}
		t0 := time.Now()
		// The one link, as the cold start's writer makes it: one request.
		dummy := &vnl.Dummy{LinkAttrs: vnl.LinkAttrs{Name: "kube-ipvs0"}}
		if err := vnl.LinkAdd(dummy); err != nil {
			return fmt.Errorf("add kube-ipvs0: %w", err)
		}
		link, err := vnl.LinkByName("kube-ipvs0")
		if err != nil {
			return fmt.Errorf("kube-ipvs0: %w", err)
		}
		var msgs []netlink.Message
		for _, a := range tb.addrs {
			msgs = append(msgs, newAddrMsg(link.Attrs().Index, a.IPNet))
		}
		n, err := sendBatched(rt, msgs)
		if err != nil {
			return fmt.Errorf("addresses: %w", err)
		}
		batches += n
		addrsTook = time.Since(t0)
		msgs = msgs[:0]
		for i, s := range tb.services {
			m, err := newServiceMsg(family, s)
			if err != nil {
				return err
			}
			msgs = append(msgs, m)
			for _, d := range tb.dests[i] {
				m, err := newDestMsg(family, s, d)
				if err != nil {
					return err
				}
				msgs = append(msgs, m)
			}
		}
		n, err = sendBatched(gc, msgs)
		if err != nil {
			return fmt.Errorf("ipvs: %w", err)
		}
		batches += n
		took = time.Since(t0)
		got, err = countHere()
		return err
	})
	b.floorHolds(t, "batched floor", got, err)
	t.Logf("batched floor: the same table in %d sendmsg batches in %v (the addresses %v); the cold start took %.2f× that",
		batches, took.Round(time.Millisecond), addrsTook.Round(time.Millisecond), cold.Seconds()/took.Seconds())
	b.run.Add("floor: the same table batched, many requests per sendmsg", took.Seconds(), "s")
	b.run.Add(results.ColdOverBatched, cold.Seconds()/took.Seconds(), "")
}

// floorBatchBytes bounds one sendmsg: under the send buffer the socket
// gets without privilege (net.core.wmem_max, doubled by the kernel), which
// netlink_sendmsg refuses to exceed.
const floorBatchBytes = 128 << 10

// sendBatched sends msgs in order, as many per sendmsg as floorBatchBytes
// allows, the last of each asking for an acknowledgement; it returns the
// number of batches, or the first answer that is an error.
func sendBatched(c *netlink.Conn, msgs []netlink.Message) (int, error) {
	batches := 0
	for len(msgs) > 0 {
		n, size := 0, 0
		for n < len(msgs) && size+unix.NLMSG_HDRLEN+len(msgs[n].Data)+4 <= floorBatchBytes {
			size += unix.NLMSG_HDRLEN + (len(msgs[n].Data)+3)&^3
			n++
		}
		if n == 0 {
			return batches, errors.New("a message larger than a batch")
		}
		batch := msgs[:n]
		batch[n-1].Header.Flags |= netlink.Acknowledge
		sent, err := c.SendMessages(batch)
		if err != nil {
			return batches, err
		}
		last := sent[n-1].Header.Sequence
		for done := false; !done; {
			answers, err := c.Receive()
			if err != nil { // an error answer: some request failed
				return batches, err
			}
			for _, a := range answers {
				done = done || a.Header.Sequence == last
			}
		}
		batches++
		msgs = msgs[n:]
	}
	return batches, nil
}

// Generic netlink's controller and IPVS's commands and attributes
// (linux/genetlink.h, linux/ip_vs.h).
const (
	genlIDCtrl         = 0x10
	ctrlCmdGetFamily   = 3
	ctrlAttrFamilyID   = 1
	ctrlAttrFamilyName = 2

	ipvsGenlVersion    = 1
	ipvsCmdNewService  = 1
	ipvsCmdNewDest     = 5
	ipvsCmdAttrService = 1
	ipvsCmdAttrDest    = 2

	ipvsSvcAttrAF       = 1
	ipvsSvcAttrProtocol = 2
	ipvsSvcAttrAddr     = 3
	ipvsSvcAttrPort     = 4
	ipvsSvcAttrSchedNm  = 6
	ipvsSvcAttrFlags    = 7
	ipvsSvcAttrTimeout  = 8
	ipvsSvcAttrNetmask  = 9

	ipvsDestAttrAddr      = 1
	ipvsDestAttrPort      = 2
	ipvsDestAttrFwdMethod = 3
	ipvsDestAttrWeight    = 4
	ipvsDestAttrUThresh   = 5
	ipvsDestAttrLThresh   = 6
	ipvsDestAttrAF        = 11
)

// genlFamily asks generic netlink's controller for a family's id.
func genlFamily(c *netlink.Conn, name string) (uint16, error) {
	ae := netlink.NewAttributeEncoder()
	ae.String(ctrlAttrFamilyName, name)
	attrs, err := ae.Encode()
	if err != nil {
		return 0, err
	}
	answers, err := c.Execute(netlink.Message{
		Header: netlink.Header{Type: genlIDCtrl, Flags: netlink.Request},
		Data:   append([]byte{ctrlCmdGetFamily, 1, 0, 0}, attrs...),
	})
	if err != nil {
		return 0, fmt.Errorf("generic netlink family %s: %w", name, err)
	}
	for _, a := range answers {
		if len(a.Data) < 4 {
			continue
		}
		ad, err := netlink.NewAttributeDecoder(a.Data[4:])
		if err != nil {
			return 0, err
		}
		for ad.Next() {
			if ad.Type() == ctrlAttrFamilyID {
				return ad.Uint16(), nil
			}
		}
	}
	return 0, fmt.Errorf("generic netlink family %s: no id in the answer", name)
}

// ipvsMsg is one IPVS request: the generic netlink header and attrs.
func ipvsMsg(family uint16, cmd uint8, ae *netlink.AttributeEncoder) (netlink.Message, error) {
	attrs, err := ae.Encode()
	if err != nil {
		return netlink.Message{}, err
	}
	return netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(family), Flags: netlink.Request},
		Data:   append([]byte{cmd, ipvsGenlVersion, 0, 0}, attrs...),
	}, nil
}

// serviceKey encodes what names a virtual server.
func serviceKey(ae *netlink.AttributeEncoder, s *mobyipvs.Service) {
	ae.Uint16(ipvsSvcAttrAF, s.AddressFamily)
	ae.Uint16(ipvsSvcAttrProtocol, s.Protocol)
	ae.Bytes(ipvsSvcAttrAddr, inetAddr(s.Address))
	ae.Bytes(ipvsSvcAttrPort, binary.BigEndian.AppendUint16(nil, s.Port))
}

func newServiceMsg(family uint16, s *mobyipvs.Service) (netlink.Message, error) {
	const hashed = 0x2 // IP_VS_SVC_F_HASHED: reported by the kernel, refused back
	ae := netlink.NewAttributeEncoder()
	ae.Nested(ipvsCmdAttrService, func(nae *netlink.AttributeEncoder) error {
		serviceKey(nae, s)
		nae.String(ipvsSvcAttrSchedNm, s.SchedName)
		flags := binary.NativeEndian.AppendUint32(nil, s.Flags&^hashed)
		nae.Bytes(ipvsSvcAttrFlags, binary.NativeEndian.AppendUint32(flags, ^uint32(0)))
		nae.Uint32(ipvsSvcAttrTimeout, s.Timeout)
		nae.Uint32(ipvsSvcAttrNetmask, s.Netmask)
		return nil
	})
	return ipvsMsg(family, ipvsCmdNewService, ae)
}

func newDestMsg(family uint16, s *mobyipvs.Service, d *mobyipvs.Destination) (netlink.Message, error) {
	ae := netlink.NewAttributeEncoder()
	ae.Nested(ipvsCmdAttrService, func(nae *netlink.AttributeEncoder) error {
		serviceKey(nae, s)
		return nil
	})
	ae.Nested(ipvsCmdAttrDest, func(nae *netlink.AttributeEncoder) error {
		nae.Bytes(ipvsDestAttrAddr, inetAddr(d.Address))
		nae.Bytes(ipvsDestAttrPort, binary.BigEndian.AppendUint16(nil, d.Port))
		nae.Uint32(ipvsDestAttrFwdMethod, d.ConnectionFlags&mobyipvs.ConnectionFlagFwdMask)
		nae.Uint32(ipvsDestAttrWeight, uint32(d.Weight))
		nae.Uint32(ipvsDestAttrUThresh, d.UpperThreshold)
		nae.Uint32(ipvsDestAttrLThresh, d.LowerThreshold)
		if d.AddressFamily != 0 {
			nae.Uint16(ipvsDestAttrAF, d.AddressFamily)
		}
		return nil
	})
	return ipvsMsg(family, ipvsCmdNewDest, ae)
}

// inetAddr is an address as IPVS's union nf_inet_addr: 16 bytes, an
// IPv4 address in the first four.
func inetAddr(ip net.IP) []byte {
	b := make([]byte, 16)
	if v4 := ip.To4(); v4 != nil {
		copy(b, v4)
	} else {
		copy(b, ip.To16())
	}
	return b
}

// newAddrMsg is RTM_NEWADDR for one address on the link.
func newAddrMsg(index int, a *net.IPNet) netlink.Message {
	ones, _ := a.Mask.Size()
	ifa := make([]byte, unix.SizeofIfAddrmsg)
	ifa[0], ifa[1] = unix.AF_INET, byte(ones) // flags and scope (universe) 0
	binary.NativeEndian.PutUint32(ifa[4:], uint32(index))
	ae := netlink.NewAttributeEncoder()
	ae.Bytes(unix.IFA_LOCAL, a.IP.To4())
	ae.Bytes(unix.IFA_ADDRESS, a.IP.To4())
	attrs, _ := ae.Encode() // fixed-size attributes: cannot fail
	return netlink.Message{
		Header: netlink.Header{Type: unix.RTM_NEWADDR, Flags: netlink.Request | netlink.Create | netlink.Excl},
		Data:   append(ifa, attrs...),
	}
}
