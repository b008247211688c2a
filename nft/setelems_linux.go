package nft

import (
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlsock"
)

// linuxConn is the Conn of NewLinux: google/nftables for everything but
// the set element reads, which its elementReader makes, and the rule
// reads, which go through NewRuleReader.
type linuxConn struct {
	*nftables.Conn
	rules *RuleReader // for GetRules
	elems *elementReader
}

// GetRules reads a chain's rules with the rule reader, which decodes the
// ct expressions google/nftables alone cannot.
func (c *linuxConn) GetRules(t *nftables.Table, ch *nftables.Chain) ([]*nftables.Rule, error) {
	return c.rules.GetRules(t, ch)
}

// EachSetElement reads a set's elements with one dump on the reader's
// socket (Conn).
func (c *linuxConn) EachSetElement(s *nftables.Set, each func(nftables.SetElement) error) error {
	return c.elems.each(s, each)
}

// elementReader reads sets' elements (setelems.go says why by hand) on a
// NETLINK_NETFILTER socket of its own, kept from read to read, where
// google/nftables opens one per read. It is a plain socket, not
// mdlayher/netlink's Conn, whose Receive copies every message out of its
// buffer; and it blocks in its reads, as the IPVS writer's readers' do
// (proxier/ipvs/ipvsnl/socket_linux.go): on Go's network poller a
// goroutine parks in each read of a dump. It is opened at the first
// read, in the network namespace of the thread that makes it, opened
// again after a read that failed on the socket, and closed
// once the reader is unreachable (the Writer has no Close). Safe for
// concurrent use; reads are made one at a time.
type elementReader struct {
	mu  sync.Mutex
	s   *elemSocket
	seq uint32
	req []byte
	buf []byte
}

// elemSocket holds the reader's socket apart from the reader, for the
// cleanup that closes it.
type elemSocket struct{ fd int } // -1: not open

// elemReadBuffer is the read buffer: the kernel cuts a dump into pieces
// of at most the largest read it has seen, up to 32 KiB (netlink_recvmsg),
// so a piece always fits, and a read that does not is an error.
const elemReadBuffer = 64 << 10

// elemReadTimeout bounds one read, so that a kernel that never answers
// is an error, not a repair stuck for good.
const elemReadTimeout = 30 * time.Second

func newElementReader() *elementReader {
	r := &elementReader{s: &elemSocket{fd: -1}}
	runtime.AddCleanup(r, (*elemSocket).close, r.s)
	return r
}

// each makes one GETSETELEM dump of set s and hands its elements to
// each (Conn.EachSetElement). An error of the socket closes it.
func (r *elementReader) each(s *nftables.Set, each func(nftables.SetElement) error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	fail := func(err error) error {
		return fmt.Errorf("list elements of set %s of table %s: %w", s.Name, tableText(s.Table), err)
	}
	if r.s.fd < 0 {
		if err := r.open(); err != nil {
			return fail(err)
		}
	}
	r.seq++
	req, err := setElemRequest(r.req[:0], r.seq, s)
	if err != nil {
		return fail(err)
	}
	r.req = req
	if _, err := unix.Write(r.s.fd, r.req); err != nil {
		r.s.close()
		return fail(fmt.Errorf("netlink send: %w", err))
	}
	d := setElemDump{seq: r.seq, each: each}
	for !d.done {
		n, err := nlsock.Recv(r.s.fd, r.buf, 0)
		if err == nil && n > len(r.buf) {
			err = fmt.Errorf("a message of %d bytes, more than the %d-byte buffer", n, len(r.buf))
		}
		if err == nil {
			err = d.read(r.buf[:n])
		}
		if err != nil {
			r.s.close()
			return fail(fmt.Errorf("netlink receive: %w", err))
		}
	}
	switch {
	case d.err == nil:
		return nil
	case d.fromEach:
		return d.err
	}
	return fail(d.err)
}

// open opens the socket (nlsock.Open), with elemReadTimeout.
func (r *elementReader) open() error {
	fd, err := nlsock.Open(unix.NETLINK_NETFILTER, "nftables set elements", elemReadTimeout)
	if err != nil {
		return err
	}
	r.s.fd = fd
	if r.buf == nil {
		r.buf = make([]byte, elemReadBuffer)
	}
	return nil
}

func (s *elemSocket) close() {
	if s.fd >= 0 {
		unix.Close(s.fd)
		s.fd = -1
	}
}
