//go:build integration

package traffic

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Echo servers answer every TCP connection and every UDP datagram with
// one line, "<name> peer=<address:port they saw>", so a test learns which
// backend served it and whether the source was NATed.

// serve starts TCP and UDP echo servers in x on the given ports, for
// IPv4 and (when x has an IPv6 address) IPv6, closed at cleanup. The
// listeners are created on x's thread, so they live in x's namespace.
func (h *harness) serve(x *host, name string, tcpPort, udpPort int) {
	h.t.Helper()
	fams := []string{"4"}
	if x.v6.IsValid() {
		fams = append(fams, "6")
	}
	for _, fam := range fams {
		var ln net.Listener
		var pc net.PacketConn
		err := x.do(func() error {
			var err error
			if ln, err = net.Listen("tcp"+fam, ":"+strconv.Itoa(tcpPort)); err != nil {
				return err
			}
			if pc, err = net.ListenPacket("udp"+fam, ":"+strconv.Itoa(udpPort)); err != nil {
				ln.Close()
			}
			return err
		})
		if err != nil {
			h.t.Fatalf("lab setup: %s: listen: %v", x.name, err)
		}
		h.t.Cleanup(func() { ln.Close(); pc.Close() })
		go serveTCP(ln, name)
		go serveUDP(pc, name)
	}
}

func serveTCP(ln net.Listener, name string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		fmt.Fprintf(c, "%s peer=%s\n", name, c.RemoteAddr())
		c.Close()
	}
}

func serveUDP(pc net.PacketConn, name string) {
	buf := make([]byte, 1500)
	for {
		_, addr, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		_, _ = pc.WriteTo([]byte(fmt.Sprintf("%s peer=%s\n", name, addr)), addr)
	}
}

// Proto is a transport for the dialers.
type Proto string

const (
	TCP Proto = "tcp"
	UDP Proto = "udp"
)

// TCP opens one fresh connection from `from` to addr and returns the
// answering backend's name and the peer address it saw.
func (h *harness) TCP(from *host, addr string) (name, peer string, err error) {
	return h.Exchange(from, TCP, addr, h.timeout)
}

// UDP sends one datagram from a fresh socket in `from` and returns the
// answer. The socket is connected, so an ICMP error becomes ECONNREFUSED
// or EHOSTUNREACH on the read; being fresh, no earlier error leaks in.
func (h *harness) UDP(from *host, addr string) (name, peer string, err error) {
	return h.Exchange(from, UDP, addr, h.timeout)
}

// lastSourcePort numbers the dialers' source ports. Every exchange of the
// test binary gets its own, so no exchange ever lands on an IPVS or
// conntrack entry left by an earlier one: the kernel picks UDP source
// ports at random, and a reused client address:port would be sent to the
// earlier connection's backend without being scheduled.
var lastSourcePort atomic.Int32

const firstSourcePort, sourcePorts = 40000, 20000

func nextSourcePort() int {
	return firstSourcePort + int(lastSourcePort.Add(1))%sourcePorts
}

// Exchange does one echo exchange from `from` over a fresh socket,
// waiting at most d for the connection and at most d for the answer.
func (h *harness) Exchange(from *host, proto Proto, addr string, d time.Duration) (name, peer string, err error) {
	err = from.do(func() error {
		dialer := net.Dialer{Timeout: d}
		if proto == UDP {
			dialer.LocalAddr = &net.UDPAddr{Port: nextSourcePort()}
		} else {
			dialer.LocalAddr = &net.TCPAddr{Port: nextSourcePort()}
		}
		c, err := dialer.Dial(string(proto), addr)
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
		var ok bool
		name, peer, ok = strings.Cut(strings.TrimSpace(line), " peer=")
		if !ok {
			return fmt.Errorf("malformed echo %q", line)
		}
		return nil
	})
	if err != nil {
		return "", "", fmt.Errorf("%s %s from %s: %w", proto, addr, from, err)
	}
	return name, peer, nil
}

// Count does n exchanges, each over a fresh socket (so each is a new IPVS
// connection), and counts the answers per backend name. The first error
// stops it.
func (h *harness) Count(from *host, addr string, proto Proto, n int) (map[string]int, error) {
	got := map[string]int{}
	for range n {
		name, _, err := h.Exchange(from, proto, addr, h.timeout)
		if err != nil {
			return got, err
		}
		got[name]++
	}
	return got, nil
}

// Peers does n exchanges and returns, per backend, the peer IPs it saw:
// distinct, sorted and comma-joined, so one string compares them all.
func (h *harness) Peers(from *host, addr string, proto Proto, n int) (map[string]string, error) {
	seen := map[string][]string{}
	var err error
	for range n {
		var name, peer string
		if name, peer, err = h.Exchange(from, proto, addr, h.timeout); err != nil {
			break
		}
		ip, _, _ := net.SplitHostPort(peer)
		if !slices.Contains(seen[name], ip) {
			seen[name] = append(seen[name], ip)
		}
	}
	peers := map[string]string{}
	for name, ips := range seen {
		slices.Sort(ips)
		peers[name] = strings.Join(ips, ",")
	}
	return peers, err
}

// isFastFailure reports whether err is an immediate refusal: a TCP reset
// or a fatal ICMP error (port, host or network unreachable, administratively
// prohibited), or a local refusal (EPERM/EACCES from an output filter).
func isFastFailure(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES)
}

// isTimeout reports whether err is a dial or read timeout: nothing came
// back at all.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// hostPort joins an address and a port.
func hostPort(addr fmt.Stringer, port int) string {
	return net.JoinHostPort(addr.String(), strconv.Itoa(port))
}

// formatCounts prints counts sorted by name, for messages.
func formatCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s=%d", k, m[k])
	}
	return "{" + b.String() + "}"
}
