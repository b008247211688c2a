package ipvs

import (
	"errors"
	"fmt"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlsock"
)

// dumpReader lists the virtual servers and their destinations on its
// own generic netlink socket (destdump.go and svcdump.go say why not
// through moby/ipvs), and makes the Kernel's single reads and the
// timeouts' change there. It is used by one goroutine at a time.
type dumpReader struct {
	s      *nlSocket
	family uint16
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
// empty when k does not exist, as the kernel answers.
func (r *dumpReader) destinations(k Key) ([]Destination, error) {
	body, err := getDestinationsRequest(k)
	if err != nil {
		return nil, err
	}
	var out []Destination
	err = r.s.execute(r.family, unix.NLM_F_DUMP, body, func(msgs []netlink.Message) error {
		ds, err := parseDestinations(msgs, family(k.Address))
		if out == nil {
			out = ds // most virtual servers' answer is one read
		} else {
			out = append(out, ds...)
		}
		return err
	})
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
			out = make([]VirtualServer, 0, len(msgs))
		}
		var err error
		out, err = parseVirtualServers(msgs, out)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (r *dumpReader) Close() { r.s.Close() }

// nlSocket is a blocking netlink socket (generic netlink for IPVS, route
// netlink for the dummy interface's addresses) that makes one request or
// one batch at a time and reads the answer into a buffer it keeps.
type nlSocket struct {
	fd   int
	seq  uint32
	buf  []byte
	req  []byte            // the last request, its buffer reused
	msgs []netlink.Message // one read's messages, reused
	// kernel is the kernel's netlink address, where requests go: the
	// socket's own, since Sendto writes its encoding into it.
	kernel unix.SockaddrNetlink
}

// genlReadBuffer is the read buffer: the kernel sizes a dump's pieces to
// the largest read it has seen, up to 32 KiB (netlink_recvmsg).
const genlReadBuffer = 32 << 10

// genlReadTimeout bounds one read, so a kernel that never answers is an
// error, not a writer stuck for good.
const genlReadTimeout = 30 * time.Second

func openGenlSocket() (*nlSocket, error) { return openNetlinkSocket(unix.NETLINK_GENERIC, "ipvs") }

// openNetlinkSocket opens a socket of netlink protocol proto for what
// (named in its errors).
func openNetlinkSocket(proto int, what string) (*nlSocket, error) {
	fd, err := nlsock.Open(proto, what, genlReadTimeout)
	if err != nil {
		return nil, err
	}
	return &nlSocket{fd: fd, buf: make([]byte, genlReadBuffer)}, nil
}

// execute sends one request (a netlink header of type typ with flags
// besides NLM_F_REQUEST, then body) and hands each read's messages to
// each until the answer is complete. The messages are valid only during
// the call: the next read reuses the buffer.
func (s *nlSocket) execute(typ, flags uint16, body []byte, each func([]netlink.Message) error) error {
	s.seq++
	s.req = nlsock.AppendMessage(s.req[:0], typ, flags|unix.NLM_F_REQUEST, s.seq, body)
	if err := unix.Sendto(s.fd, s.req, 0, &s.kernel); err != nil {
		return fmt.Errorf("netlink send: %w", err)
	}
	return s.receive(each)
}

// receive reads the answer to request s.seq and hands each read's
// messages to each. Whatever fails, it reads the answer to its end, or
// as far as the socket holds one, so that the next request starts clean:
// the kernel refuses a new dump (EBUSY) while an old one is unread.
func (s *nlSocket) receive(each func([]netlink.Message) error) error {
	var failed error
	for {
		n, err := nlsock.Recv(s.fd, s.buf, 0)
		if err != nil {
			return errors.Join(failed, fmt.Errorf("netlink receive: %w", err))
		}
		if n > len(s.buf) && failed == nil {
			failed = fmt.Errorf("netlink receive: a message of %d bytes, more than the %d-byte buffer", n, len(s.buf))
		}
		msgs, done, err := splitAnswer(s.msgs[:0], s.buf[:min(n, len(s.buf))], s.seq)
		s.msgs = msgs
		if err != nil {
			// Where this read's answer ends is unknown: read what the
			// socket holds without waiting. Each read of a dump makes
			// the kernel queue its next piece, so this reads the dump
			// to its end.
			s.discard()
			return errors.Join(failed, err)
		}
		if len(msgs) > 0 && failed == nil {
			failed = each(msgs)
		}
		if done {
			return failed
		}
	}
}

// discard reads and drops whatever the socket holds, without waiting.
func (s *nlSocket) discard() {
	for {
		if _, err := nlsock.Recv(s.fd, s.buf, unix.MSG_DONTWAIT); err != nil {
			return
		}
	}
}

func (s *nlSocket) Close() { unix.Close(s.fd) }

// virtualServer reads virtual server k alone; ESRCH when it does not
// exist, as the kernel answers.
func (r *dumpReader) virtualServer(k Key) (VirtualServer, error) {
	body, err := getServiceRequest(k)
	if err != nil {
		return VirtualServer{}, err
	}
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
