package ipvsnl

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Conn is the IPVS generic netlink family on sockets of our own: one
// lists (the virtual servers, a virtual server's destinations) and
// makes the single requests (one virtual server, the timeouts), the
// other makes changes in batches. github.com/moby/ipvs is not used: its
// first handle runs `modprobe -va ip_vs` and reports a failure through
// logrus, outside the proxy's logging; here a kernel without IPVS is an
// error naming the module, found by the family lookup. A Conn is used
// by one goroutine at a time.
type Conn struct {
	reader *dumpReader
	writer *opWriter
}

// Open opens the IPVS sockets. The family lookup on the first is the
// module check: a node without ip_vs fails here, with the module named;
// the proxy loads no module itself.
func Open() (*Conn, error) {
	r, err := newDumpReader()
	if err != nil {
		return nil, fmt.Errorf("the kernel has no IPVS generic netlink family (load module ip_vs): %w", err)
	}
	if _, err := r.timeouts(); err != nil {
		r.Close()
		return nil, fmt.Errorf("the IPVS generic netlink family does not answer: %w", err)
	}
	w, err := newOpWriter()
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("ipvs write socket: %w", err)
	}
	return &Conn{reader: r, writer: w}, nil
}

// VirtualServers lists every address-based virtual server, with one
// dump; firewall-mark virtual servers and those of protocols other than
// TCP, UDP and SCTP are left out.
func (c *Conn) VirtualServers() ([]VirtualServer, error) { return c.reader.virtualServers() }

// VirtualServer reads virtual server k alone; ESRCH when it does not
// exist.
func (c *Conn) VirtualServer(k Key) (VirtualServer, error) { return c.reader.virtualServer(k) }

// Destinations lists virtual server k's destinations with their
// connection counts, with one dump; empty when k does not exist. The
// list is valid until the next read of destinations, which refills it.
func (c *Conn) Destinations(k Key) ([]Destination, error) { return c.reader.destinations(k) }

// Timeouts reads the IPVS timeouts.
func (c *Conn) Timeouts() (Timeouts, error) { return c.reader.timeouts() }

// SetTimeouts changes the non-zero IPVS timeouts.
func (c *Conn) SetTimeouts(t Timeouts) error { return c.reader.setTimeouts(t) }

// Write makes the changes ops in order, in as few sendmsgs as the
// socket's buffers allow, and returns one error per op: nil for done,
// the kernel's errno for a refused one, and one wrapping ErrUnanswered
// for an op whose answer was lost. Empty ops is nothing to do.
func (c *Conn) Write(ops []Op) []error {
	if len(ops) == 0 {
		return nil
	}
	return c.writer.write(ops)
}

// Close closes the sockets.
func (c *Conn) Close() {
	c.reader.Close()
	c.writer.Close()
}

// AddrConn changes and lists the addresses of a link on a route netlink
// socket of its own, many changes per sendmsg (batchSender). It is used
// by one goroutine at a time.
type AddrConn struct {
	b *batchSender
	// addrs is the last list, refilled by the next: on a large node the
	// dump is tens of thousands of addresses, and the idle check dumps
	// them every few seconds, so a list made anew each time was most of
	// what a quiet proxy allocated.
	addrs []netip.Prefix
}

// OpenAddrs opens the socket; what names its use in errors.
func OpenAddrs(what string) (*AddrConn, error) {
	s, err := openNetlinkSocket(unix.NETLINK_ROUTE, what)
	if err != nil {
		return nil, err
	}
	b, err := newBatchSender(s, what)
	if err != nil {
		return nil, err
	}
	return &AddrConn{b: b}, nil
}

// Change adds (add) or deletes the host addresses ps on the link of
// index index, in order, and returns one error per address, each as
// `ip addr add` or `ip addr del` would have failed (EEXIST,
// EADDRNOTAVAIL, ENODEV, ...).
func (c *AddrConn) Change(add bool, index int, ps []netip.Prefix) []error {
	errs := make([]error, len(ps))
	reqs := make([]request, 0, len(ps))
	at := make([]int, 0, len(ps))
	for i, p := range ps {
		r, err := addrRequest(add, index, p)
		if err != nil {
			errs[i] = err
			continue
		}
		reqs, at = append(reqs, r), append(at, i)
	}
	c.b.sendAll(reqs, at, errs)
	return errs
}

// List dumps the namespace's addresses and returns those of the link of
// index index, without IPv6 link-local ones. The list is valid until the
// next call, which refills it. A dump the kernel marks as interrupted is
// an error wrapping ErrDumpInterrupted.
func (c *AddrConn) List(index int) ([]netip.Prefix, error) {
	out := c.addrs[:0]
	err := c.b.s.execute(unix.RTM_GETADDR, unix.NLM_F_DUMP, addrDumpRequest(), func(msgs []netlink.Message) error {
		for _, m := range msgs {
			at, p, ok, err := parseAddrMessage(m)
			if err != nil {
				return err
			}
			if ok && at == index && !p.Addr().IsLinkLocalUnicast() {
				out = append(out, p)
			}
		}
		return nil
	})
	if errors.Is(err, ErrDumpInterrupted) {
		return nil, fmt.Errorf("addresses of link %d: %w", index, err)
	}
	if err != nil {
		return nil, fmt.Errorf("dump addresses: %w", err)
	}
	c.addrs = out
	return out, nil
}

// Close closes the socket.
func (c *AddrConn) Close() { c.b.Close() }

// dumpReader lists the virtual servers and their destinations on its
// own generic netlink socket (decode.go says why not through
// moby/ipvs), and makes the single reads and the timeouts' change
// there. It is used by one goroutine at a time.
type dumpReader struct {
	s      *nlSocket
	family uint16
	// body and dests are reused from read to read: a Repair reads every
	// virtual server's destinations, one dump each.
	body  []byte
	dests []Destination
	// lastServices is how many virtual servers the last dump listed: the
	// next one's list is made that large at once, not grown by doubling.
	lastServices int
}

// newDumpReader opens its socket (openIPVSSocket).
func newDumpReader() (*dumpReader, error) {
	s, id, err := openIPVSSocket()
	if err != nil {
		return nil, err
	}
	return &dumpReader{s: s, family: id}, nil
}

// openIPVSSocket opens a generic netlink socket and looks up the IPVS
// family's id on it, which needs the ip_vs module loaded: the proxy
// loads none (the node's modules-load.d does, as kube-proxy's IPVS
// guide asks), so this lookup is its module check.
func openIPVSSocket() (*nlSocket, uint16, error) {
	s, err := openGenlSocket()
	if err != nil {
		return nil, 0, err
	}
	id, err := genlFamily(s, ipvsGenlName)
	if err != nil {
		s.Close()
		return nil, 0, err
	}
	return s, id, nil
}

// genlFamily asks the generic netlink controller for a family's id.
func genlFamily(s *nlSocket, name string) (uint16, error) {
	ae := netlink.NewAttributeEncoder()
	ae.String(unix.CTRL_ATTR_FAMILY_NAME, name)
	attrs, err := ae.Encode()
	if err != nil {
		return 0, fmt.Errorf("encode the lookup of generic netlink family %s: %w", name, err)
	}
	var id uint16
	found := false
	err = s.execute(unix.GENL_ID_CTRL, 0, append([]byte{unix.CTRL_CMD_GETFAMILY, 1, 0, 0}, attrs...),
		func(msgs []netlink.Message) error {
			for _, m := range msgs {
				if len(m.Data) < 4 {
					continue
				}
				ad, err := netlink.NewAttributeDecoder(m.Data[4:])
				if err != nil {
					return err
				}
				for ad.Next() {
					if ad.Type() == unix.CTRL_ATTR_FAMILY_ID {
						id, found = ad.Uint16(), true
					}
				}
				if err := ad.Err(); err != nil {
					return err
				}
			}
			return nil
		})
	if err != nil {
		return 0, fmt.Errorf("look up generic netlink family %s: %w", name, err)
	}
	if !found {
		return 0, fmt.Errorf("generic netlink family %s: no id in the answer", name)
	}
	return id, nil
}

// destinations lists virtual server k's destinations with one dump;
// empty when k does not exist, as the kernel answers. The list is valid
// until the next read, which refills it.
func (r *dumpReader) destinations(k Key) ([]Destination, error) {
	body, err := appendDestinationsRequest(r.body[:0], k)
	if err != nil {
		return nil, err
	}
	r.body = body
	out := r.dests[:0]
	err = r.s.execute(r.family, unix.NLM_F_DUMP, body, func(msgs []netlink.Message) error {
		var err error
		out, err = parseDestinations(msgs, family(k.Address), out)
		return err
	})
	r.dests = out
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = []Destination{}
	}
	return out, nil
}

// virtualServers lists every virtual server the Kernel lists, with one
// dump.
func (r *dumpReader) virtualServers() ([]VirtualServer, error) {
	var out []VirtualServer
	err := r.s.execute(r.family, unix.NLM_F_DUMP, getServicesRequest(), func(msgs []netlink.Message) error {
		if out == nil {
			out = make([]VirtualServer, 0, max(len(msgs), r.lastServices+r.lastServices/8))
		}
		var err error
		out, err = parseVirtualServers(msgs, out)
		return err
	})
	r.lastServices = len(out)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (r *dumpReader) Close() { r.s.Close() }

// virtualServer reads virtual server k alone; ESRCH when it does not
// exist, as the kernel answers.
func (r *dumpReader) virtualServer(k Key) (VirtualServer, error) {
	body, err := appendServiceRequest(r.body[:0], k)
	if err != nil {
		return VirtualServer{}, err
	}
	r.body = body
	var out []VirtualServer
	err = r.s.execute(r.family, 0, body, func(msgs []netlink.Message) error {
		var err error
		out, err = parseVirtualServers(msgs, out)
		return err
	})
	if err != nil {
		return VirtualServer{}, err
	}
	if len(out) != 1 || out[0].Key != k {
		return VirtualServer{}, fmt.Errorf("virtual server %s: the kernel answered with %d others", k, len(out))
	}
	return out[0], nil
}

// timeouts reads the IPVS timeouts.
func (r *dumpReader) timeouts() (Timeouts, error) {
	var t Timeouts
	err := r.s.execute(r.family, 0, getConfigRequest(), func(msgs []netlink.Message) error {
		var err error
		t, err = parseTimeouts(msgs)
		return err
	})
	return t, err
}

// setTimeouts changes the non-zero IPVS timeouts, and waits for the
// kernel's acknowledgement.
func (r *dumpReader) setTimeouts(t Timeouts) error {
	body, err := setConfigRequest(t)
	if err != nil {
		return err
	}
	return r.s.execute(r.family, unix.NLM_F_ACK, body, func([]netlink.Message) error { return nil })
}

// opWriter makes Conn.Write's changes in batches (batchSender) on a
// generic netlink socket of its own (encode.go says why not through
// moby/ipvs).
type opWriter struct {
	b      *batchSender
	family uint16
}

func newOpWriter() (*opWriter, error) {
	s, id, err := openIPVSSocket()
	if err != nil {
		return nil, err
	}
	b, err := newBatchSender(s, "ipvs write")
	if err != nil {
		return nil, err
	}
	return &opWriter{b: b, family: id}, nil
}

// write implements Conn.Write. Every request body is appended to one
// buffer (appendOp), each request a slice of it, taken once all are in.
func (w *opWriter) write(ops []Op) []error {
	errs := make([]error, len(ops))
	buf := make([]byte, 0, len(ops)*opBodyBytes)
	ends := make([]int, 0, len(ops))
	index := make([]int, 0, len(ops)) // reqs[j] is ops[index[j]]
	for i, o := range ops {
		start := len(buf)
		var err error
		if buf, err = appendOp(buf, o); err != nil {
			errs[i], buf = err, buf[:start]
			continue
		}
		ends, index = append(ends, len(buf)), append(index, i)
	}
	reqs := make([]request, len(index))
	start := 0
	for j, end := range ends {
		reqs[j] = request{typ: w.family, body: buf[start:end:end]}
		start = end
	}
	w.b.sendAll(reqs, index, errs)
	return errs
}

func (w *opWriter) Close() { w.b.Close() }
