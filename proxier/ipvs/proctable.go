package ipvs

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"sync"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// /proc/net/ip_vs, read for every virtual server's count of destinations
// in one read (check.go says why).

// procTable is /proc/net/ip_vs of the network namespace the kernel
// handle was made in. /proc/net follows the reading thread's namespace
// at open, so the file is opened once, beside the netlink sockets, and
// read again from its start each time.
type procTable struct {
	mu      sync.Mutex
	f       *os.File
	openErr error
	last    map[Key]int // the last read's counts, refilled by the next
	buf     []byte
}

// openProcTable opens the table. A node whose /proc hides it still runs
// the proxy, as it runs kube-proxy, which never reads it: counts then
// reports the open's error, and Check goes without the count.
func openProcTable() *procTable {
	f, err := os.Open("/proc/thread-self/net/ip_vs")
	return &procTable{f: f, openErr: err}
}

func (p *procTable) counts() (map[Key]int, error) {
	if p.openErr != nil {
		return nil, fmt.Errorf("open the IPVS table in /proc: %w", p.openErr)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := p.f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("rewind %s: %w", p.f.Name(), err)
	}
	if p.last == nil {
		p.last, p.buf = map[Key]int{}, make([]byte, procReadBuffer)
	}
	if err := parseDestinationCounts(p.f, p.last, p.buf); err != nil {
		return nil, fmt.Errorf("%s: %w", p.f.Name(), err)
	}
	return p.last, nil
}

func (p *procTable) Close() {
	if p.f != nil {
		p.f.Close()
	}
}

// parseDestinationCounts reads the text of /proc/net/ip_vs: after three
// header lines, each virtual server on a line of its own ("TCP
// 0A600001:0050 rr", IPv6 addresses in brackets, firewall marks as
// "FWM"), then one "  -> " line per destination. It counts, into counts
// (emptied first), the destinations of every address-based virtual
// server. It reads line by line into buf (procReadBuffer long, or
// allocated when nil), so that a table of a hundred thousand
// destinations is never held whole, and allocates nothing per line: the
// idle check reads the whole table every few seconds, with the last
// read's map and buffer.
func parseDestinationCounts(r io.Reader, counts map[Key]int, buf []byte) error {
	clear(counts)
	if len(buf) < procReadBuffer {
		buf = make([]byte, procReadBuffer)
	}
	var (
		current Key
		inVS    bool // current is an address-based virtual server
	)
	sc := bufio.NewScanner(r)
	sc.Buffer(buf[:0], procReadBuffer)
	for i := 0; sc.Scan(); i++ {
		line := sc.Bytes()
		if i < 3 || len(line) == 0 {
			continue // the header: version, and the two column lines
		}
		if bytes.HasPrefix(line, []byte("  -> ")) {
			if inVS {
				counts[current]++
			}
			continue
		}
		protoField, rest := nextField(line)
		addrField, _ := nextField(rest)
		if len(addrField) == 0 {
			return fmt.Errorf("line %d: %q is neither a virtual server nor a destination", i+1, line)
		}
		inVS = false
		var proto policy.Protocol
		switch string(protoField) {
		case "TCP":
			proto = policy.ProtocolTCP
		case "UDP":
			proto = policy.ProtocolUDP
		case "SCTP":
			proto = policy.ProtocolSCTP
		default:
			continue // FWM, or a protocol we never program
		}
		addr, port, err := parseProcAddrPort(addrField)
		if err != nil {
			return fmt.Errorf("line %d: %w", i+1, err)
		}
		current, inVS = Key{Address: addr, Protocol: proto, Port: port}, true
		counts[current] += 0
	}
	return sc.Err()
}

// nextField splits the first field off line, fields separated by spaces
// and tabs as the kernel writes them, without allocating.
func nextField(line []byte) (field, rest []byte) {
	line = bytes.TrimLeft(line, " \t")
	if i := bytes.IndexAny(line, " \t"); i >= 0 {
		return line[:i], line[i:]
	}
	return line, nil
}

// procReadBuffer is the table's read buffer, and the longest line read:
// a line is under a hundred bytes.
const procReadBuffer = 64 << 10

// parseProcAddrPort reads "0A600001:0050" (IPv4 as eight hex digits) or
// "[fd00:0096:0000:0000:0000:0000:0000:0001]:0050", the port in hex. The
// kernel's own forms (four-digit port, full IPv6 groups) are read without
// allocating; others through strconv and netip.
func parseProcAddrPort(b []byte) (netip.Addr, uint16, error) {
	i := bytes.LastIndexByte(b, ':')
	if i < 0 {
		return netip.Addr{}, 0, fmt.Errorf("%q: no port", b)
	}
	port, ok := hexUint16(b[i+1:])
	if !ok {
		p, err := strconv.ParseUint(string(b[i+1:]), 16, 16)
		if err != nil {
			return netip.Addr{}, 0, fmt.Errorf("%q: port: %w", b, err)
		}
		port = uint16(p)
	}
	host := b[:i]
	if len(host) > 2 && host[0] == '[' && host[len(host)-1] == ']' {
		host = host[1 : len(host)-1]
		if a, ok := fullIPv6(host); ok {
			return a, port, nil
		}
		a, err := netip.ParseAddr(string(host))
		if err != nil || !a.Is6() {
			return netip.Addr{}, 0, fmt.Errorf("%q: not an IPv6 address", b)
		}
		return a, port, nil
	}
	if len(host) != 8 {
		return netip.Addr{}, 0, fmt.Errorf("%q: not eight hex digits", b)
	}
	var v4 [4]byte
	if _, err := hex.Decode(v4[:], host); err != nil {
		return netip.Addr{}, 0, fmt.Errorf("%q: %w", b, err)
	}
	return netip.AddrFrom4(v4), port, nil
}

// hexUint16 reads four hex digits.
func hexUint16(b []byte) (uint16, bool) {
	var v [2]byte
	if len(b) != 4 {
		return 0, false
	}
	if _, err := hex.Decode(v[:], b); err != nil {
		return 0, false
	}
	return uint16(v[0])<<8 | uint16(v[1]), true
}

// fullIPv6 reads an IPv6 address as the kernel prints it (%pI6): eight
// groups of four hex digits.
func fullIPv6(b []byte) (netip.Addr, bool) {
	var a [16]byte
	if len(b) != 39 {
		return netip.Addr{}, false
	}
	for g := range 8 {
		if g < 7 && b[g*5+4] != ':' {
			return netip.Addr{}, false
		}
		if _, err := hex.Decode(a[g*2:g*2+2], b[g*5:g*5+4]); err != nil {
			return netip.Addr{}, false
		}
	}
	return netip.AddrFrom16(a), true
}
