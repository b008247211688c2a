//go:build integration

package traffic

import (
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/labnet"
)

// Echo servers (labnet.Echo) answer every TCP connection and every UDP
// datagram with one line, "<name> peer=<address:port they saw>", so a
// test learns which backend served it and whether the source was NATed.

// serve starts TCP and UDP echo servers in x on the given ports, for
// IPv4 and (when x has an IPv6 address) IPv6, closed at cleanup.
func (h *harness) serve(x *host, name string, tcpPort, udpPort int) {
	h.t.Helper()
	fams := []string{"4"}
	if x.v6.IsValid() {
		fams = append(fams, "6")
	}
	labnet.Echo{Name: name}.Serve(h.t, x.Host, tcpPort, udpPort, fams...)
}

// Proto is a transport for the dialers.
type Proto = labnet.Proto

const (
	TCP = labnet.TCP
	UDP = labnet.UDP
)

// TCP opens one fresh connection from `from` to addr and returns the
// answering backend's name and the peer address it saw.
func (h *harness) TCP(from *host, addr string) (name, peer string, err error) {
	return h.Exchange(from, TCP, addr, h.timeout)
}

// UDP sends one datagram from a fresh socket in `from` and returns the
// answer (see labnet.Exchange: ICMP errors show as errors).
func (h *harness) UDP(from *host, addr string) (name, peer string, err error) {
	return h.Exchange(from, UDP, addr, h.timeout)
}

// Exchange does one echo exchange from `from` over a fresh socket,
// waiting at most d for the connection and at most d for the answer.
func (h *harness) Exchange(from *host, proto Proto, addr string, d time.Duration) (name, peer string, err error) {
	return labnet.Exchange(from.Host, proto, addr, d)
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
