//go:build integration

package labnet

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Proto is a transport for the dialers.
type Proto string

const (
	TCP Proto = "tcp"
	UDP Proto = "udp"
)

// lastSourcePort numbers the dialers' source ports. Every dial of the
// test binary gets its own, so no exchange ever lands on an IPVS or
// conntrack entry left by an earlier one: the kernel picks UDP source
// ports at random, and a reused client address:port would be sent to the
// earlier connection's backend without being scheduled.
var lastSourcePort atomic.Int32

const firstSourcePort, sourcePorts = 40000, 20000

// dial connects over a fresh socket from the next numbered source port.
// When the numbers come round again (a long test binary), a port may
// still be held by an earlier connection in TIME_WAIT: the next one is
// tried.
func dial(proto Proto, addr string, d time.Duration) (net.Conn, error) {
	for try := 0; ; try++ {
		port := firstSourcePort + int(lastSourcePort.Add(1))%sourcePorts
		dialer := net.Dialer{Timeout: d, LocalAddr: &net.TCPAddr{Port: port}}
		if proto == UDP {
			dialer.LocalAddr = &net.UDPAddr{Port: port}
		}
		c, err := dialer.Dial(string(proto), addr)
		if errors.Is(err, syscall.EADDRINUSE) && try < 100 {
			continue
		}
		return c, err
	}
}

// Exchange does one echo exchange from `from` (nil: the caller's
// namespace) over a fresh socket, waiting at most d for the connection
// and at most d for the answer, and returns the answering server's name
// and the peer address it saw. A UDP socket is connected, so an ICMP
// error becomes ECONNREFUSED or EHOSTUNREACH on the read; being fresh,
// no earlier error leaks in.
func Exchange(from *Host, proto Proto, addr string, d time.Duration) (name, peer string, err error) {
	err = from.Do(func() error {
		c, err := dial(proto, addr, d)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(d))
		var line string
		if proto == UDP {
			if _, err := c.Write([]byte("ping")); err != nil {
				return err
			}
			buf := make([]byte, 1500)
			n, err := c.Read(buf)
			if err != nil {
				return err
			}
			line = string(buf[:n])
		} else if line, err = bufio.NewReader(c).ReadString('\n'); err != nil {
			return err
		}
		name, peer, err = ParseEcho(line)
		return err
	})
	if err != nil {
		return "", "", fmt.Errorf("%s %s from %s: %w", proto, addr, from, err)
	}
	return name, peer, nil
}

// Session is a TCP connection to an Echo server, open after its first
// line: with Echo.Lines, each line written to it comes back as
// "<Name> <line>" on R.
type Session struct {
	*net.TCPConn
	R          *bufio.Reader
	Name, Peer string // from the first line
}

// Greet connects from `from` (nil: the caller's namespace) to addr,
// waiting at most d for the connection and for the first line, and
// returns the open session; the caller closes it. The connection has no
// deadline left.
func Greet(from *Host, addr string, d time.Duration) (*Session, error) {
	var s *Session
	err := from.Do(func() error {
		c, err := dial(TCP, addr, d)
		if err != nil {
			return err
		}
		s = &Session{TCPConn: c.(*net.TCPConn), R: bufio.NewReader(c)}
		_ = c.SetDeadline(time.Now().Add(d))
		line, err := s.R.ReadString('\n')
		if err == nil {
			s.Name, s.Peer, err = ParseEcho(line)
		}
		if err != nil {
			c.Close()
			return err
		}
		return c.SetDeadline(time.Time{})
	})
	if err != nil {
		return nil, fmt.Errorf("greeting from %s via %s: %w", addr, from, err)
	}
	return s, nil
}

// ParseEcho splits an Echo answer, "<name> peer=<addr>\n".
func ParseEcho(line string) (name, peer string, err error) {
	name, peer, ok := strings.Cut(strings.TrimSpace(line), " peer=")
	if !ok || name == "" {
		return "", "", fmt.Errorf("malformed echo %q", line)
	}
	return name, peer, nil
}

// IsFastFailure reports whether err is an immediate refusal: a TCP reset
// or a fatal ICMP error (port, host or network unreachable,
// administratively prohibited), or a local refusal (EPERM/EACCES from an
// output filter).
func IsFastFailure(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES)
}

// IsRefused reports whether err is a refusal proper: a TCP reset, or an
// ICMP port unreachable.
func IsRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// IsTimeout reports whether err is a dial or read timeout: nothing came
// back at all.
func IsTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}
