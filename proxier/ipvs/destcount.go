package ipvs

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// The count of every virtual server's destinations, in one read. The
// kernel announces no IPVS change, and generic netlink lists
// destinations one virtual server per request, so reading them all back
// on a node with thousands of services takes seconds; /proc/net/ip_vs
// lists every virtual server with its destinations in one read. A
// destination deleted or added by hand changes its virtual server's
// count, which countsDrifted compares with what we programmed; a
// destination replaced by another (the count unchanged) is left to the
// reads in turn (destcheck.go) and the periodic repair.
//
// The read's cost grows with the table, so its period stretches to
// countCheckCostShare times its last duration: every driftCheckInterval
// while the read is cheap, and never more than a small share of a CPU.
const countCheckCostShare = 50

// countCheckRetry is when an unreadable table is tried again.
const countCheckRetry = time.Minute

// countsDrifted compares every virtual server's destination count with
// ours, when due, and reports (ErrDrift) the first that differs.
func (w *Writer) countsDrifted() error {
	now := w.cfg.Now()
	if now.Before(w.countCheckDue) {
		return nil
	}
	counts, err := w.kernel.DestinationCounts()
	took := w.cfg.Now().Sub(now)
	w.countCheckDue = now.Add(max(driftCheckInterval, countCheckCostShare*took))
	w.countsRead = err == nil
	if err != nil {
		// The table unreadable (/proc/net/ip_vs missing or masked) says
		// nothing of drift; the dump of virtual servers (drifted), the
		// reads in turn and the periodic repair still run, and the count
		// is tried again later.
		w.countCheckDue = now.Add(countCheckRetry)
		return nil
	}
	for k, a := range w.mirror {
		if a == nil || w.desired[k] == nil {
			continue
		}
		n, ok := counts[k]
		if !ok {
			return fmt.Errorf("virtual server %s gone from the kernel: %w", k, ErrDrift)
		}
		if n != len(a.dests) {
			return fmt.Errorf("virtual server %s: %d destinations in the kernel, %d programmed: %w", k, n, len(a.dests), ErrDrift)
		}
	}
	return nil
}

// parseDestinationCounts reads the text of /proc/net/ip_vs: after three
// header lines, each virtual server on a line of its own ("TCP
// 0A600001:0050 rr", IPv6 addresses in brackets, firewall marks as
// "FWM"), then one "  -> " line per destination. It counts the
// destinations of every address-based virtual server.
// It reads line by line, so that a table of a hundred thousand
// destinations is never held whole.
func parseDestinationCounts(r io.Reader) (map[Key]int, error) {
	counts := map[Key]int{}
	var (
		current Key
		inVS    bool // current is an address-based virtual server
	)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, procReadBuffer), procReadBuffer)
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
		fields := bytes.Fields(line)
		if len(fields) < 2 {
			return nil, fmt.Errorf("line %d: %q is neither a virtual server nor a destination", i+1, line)
		}
		inVS = false
		var proto policy.Protocol
		switch string(fields[0]) {
		case "TCP":
			proto = policy.ProtocolTCP
		case "UDP":
			proto = policy.ProtocolUDP
		case "SCTP":
			proto = policy.ProtocolSCTP
		default:
			continue // FWM, or a protocol we never program
		}
		addr, port, err := parseProcAddrPort(fields[1])
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		current, inVS = Key{Address: addr, Protocol: proto, Port: port}, true
		counts[current] += 0
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return counts, nil
}

// procReadBuffer is the table's read buffer, and the longest line read:
// a line is under a hundred bytes.
const procReadBuffer = 64 << 10

// parseProcAddrPort reads "0A600001:0050" (IPv4 as eight hex digits) or
// "[fd00:0096:0000:0000:0000:0000:0000:0001]:0050", the port in hex.
func parseProcAddrPort(b []byte) (netip.Addr, uint16, error) {
	i := bytes.LastIndexByte(b, ':')
	if i < 0 {
		return netip.Addr{}, 0, fmt.Errorf("%q: no port", b)
	}
	port, err := strconv.ParseUint(string(b[i+1:]), 16, 16)
	if err != nil {
		return netip.Addr{}, 0, fmt.Errorf("%q: port: %w", b, err)
	}
	host := b[:i]
	if len(host) > 2 && host[0] == '[' && host[len(host)-1] == ']' {
		a, err := netip.ParseAddr(string(host[1 : len(host)-1]))
		if err != nil || !a.Is6() {
			return netip.Addr{}, 0, fmt.Errorf("%q: not an IPv6 address", b)
		}
		return a, uint16(port), nil
	}
	if len(host) != 8 {
		return netip.Addr{}, 0, fmt.Errorf("%q: not eight hex digits", b)
	}
	var v4 [4]byte
	if _, err := hex.Decode(v4[:], host); err != nil {
		return netip.Addr{}, 0, fmt.Errorf("%q: %w", b, err)
	}
	return netip.AddrFrom4(v4), uint16(port), nil
}
