//go:build integration

package demo

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/moby/ipvs"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/labnet"
)

// How much traffic a row sends.
const (
	nExchanges  = 40               // exchanges to a served virtual server
	nDrops      = 3                // attempts at one expected to drop
	exchangeFor = time.Second      // how long one exchange may take
	syncLimit   = 60 * time.Second // how long the proxy may take to follow an API change
)

// outcome is what a series of exchanges from one client measured.
type outcome struct {
	answered map[string]int     // answers by backend (named after its address)
	peers    map[netip.Addr]int // the client addresses the backends saw
	seen     map[seen]int       // the same, by backend
	failed   int                // exchanges that failed
	timeouts int                // of which timed out: nothing came back
	first    error              // the first failure
}

// seen is a client address a backend saw.
type seen struct {
	backend string
	peer    netip.Addr
}

// exchange does n fresh exchanges from c (nil: node-a itself) to addr.
func exchange(c *client, proto labnet.Proto, addr string, n int) outcome {
	o := outcome{answered: map[string]int{}, peers: map[netip.Addr]int{}, seen: map[seen]int{}}
	for range n {
		name, peer, err := labnet.Exchange(c.host(), proto, addr, exchangeFor)
		if err != nil {
			o.failed++
			if labnet.IsTimeout(err) {
				o.timeouts++
			}
			if o.first == nil {
				o.first = err
			}
			continue
		}
		o.answered[name]++
		if ap, err := netip.ParseAddrPort(peer); err == nil {
			o.peers[ap.Addr().Unmap()]++
			o.seen[seen{name, ap.Addr().Unmap()}]++
		}
	}
	return o
}

// dropped reports whether every exchange timed out.
func (o outcome) dropped(n int) bool { return o.timeouts == n && len(o.answered) == 0 }

// formatCounts renders "a ×3, b ×2", sorted; "nobody" when empty.
func formatCounts[K interface {
	comparable
	String() string
}](m map[K]int) string {
	if len(m) == 0 {
		return "nobody"
	}
	var parts []string
	for k, n := range m {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, n))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// name is a backend name as a Stringer, for formatCounts.
type name string

func (n name) String() string { return string(n) }

func names(m map[string]int) map[name]int {
	out := make(map[name]int, len(m))
	for k, v := range m {
		out[name(k)] = v
	}
	return out
}

// kernelVS reads an IPVS virtual server's destinations, rendered as the
// plan's are; ok is false when there is no such virtual server.
func kernelVS(proto string, addr netip.Addr, port int) (dests []string, ok bool, err error) {
	h, err := ipvs.New("")
	if err != nil {
		return nil, false, err
	}
	defer h.Close()
	family := uint16(unix.AF_INET)
	if addr.Is6() {
		family = unix.AF_INET6
	}
	svc := &ipvs.Service{Address: net.IP(addr.AsSlice()), Port: uint16(port), Protocol: uint16(protoNumber(proto)), AddressFamily: family}
	if _, err := h.GetService(svc); err != nil {
		return nil, false, nil
	}
	ds, err := h.GetDestinations(svc)
	if err != nil {
		return nil, true, err
	}
	for _, d := range ds {
		a, _ := netip.AddrFromSlice(d.Address)
		dests = append(dests, formatDest(a.Unmap().String(), int(d.Port), d.Weight))
	}
	slices.Sort(dests)
	return dests, true, nil
}

// protoNumber is the IP protocol number of "TCP", "UDP" or "SCTP".
func protoNumber(proto string) uint8 {
	return map[string]uint8{"TCP": unix.IPPROTO_TCP, "UDP": unix.IPPROTO_UDP, "SCTP": unix.IPPROTO_SCTP}[proto]
}

func formatDest(addr string, port, weight int) string {
	return fmt.Sprintf("%s w%d", net.JoinHostPort(addr, strconv.Itoa(port)), weight)
}

// waitKernel waits until the virtual server's destinations are want.
func waitKernel(proto string, addr netip.Addr, port int, want []string) ([]string, error) {
	deadline := time.Now().Add(syncLimit)
	for {
		got, _, err := kernelVS(proto, addr, port)
		if err == nil && slices.Equal(got, want) {
			return got, nil
		}
		if time.Now().After(deadline) {
			return got, fmt.Errorf("after %v the kernel has %v (err %v), want %v", syncLimit, got, err, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// conntrackEntries counts the conntrack entries whose original direction
// goes from src to dst:port over proto ("TCP", "UDP").
func conntrackEntries(src netip.Addr, proto string, dst netip.Addr, port uint16) (int, error) {
	family := netlink.FAMILY_V4
	if dst.Is6() {
		family = netlink.FAMILY_V6
	}
	flows, err := netlink.ConntrackTableList(netlink.ConntrackTable, netlink.InetFamily(family))
	if err != nil {
		return 0, fmt.Errorf("list conntrack: %w", err)
	}
	n := 0
	for _, f := range flows {
		s, _ := netip.AddrFromSlice(f.Forward.SrcIP)
		d, _ := netip.AddrFromSlice(f.Forward.DstIP)
		if s.Unmap() == src && d.Unmap() == dst && f.Forward.DstPort == port && f.Forward.Protocol == protoNumber(proto) {
			n++
		}
	}
	return n, nil
}

// linkAddrs returns node-a's addresses on the link its route to dst
// leaves by: where a masqueraded connection to dst comes from.
func linkAddrs(dst netip.Addr) (map[netip.Addr]bool, error) {
	routes, err := netlink.RouteGet(net.IP(dst.AsSlice()))
	if err != nil || len(routes) == 0 {
		return nil, fmt.Errorf("route to %s: %v", dst, err)
	}
	link, err := netlink.LinkByIndex(routes[0].LinkIndex)
	if err != nil {
		return nil, err
	}
	addrs, err := netlink.AddrList(link, netlink.FAMILY_ALL)
	if err != nil {
		return nil, err
	}
	out := map[netip.Addr]bool{}
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); ok && !ip.IsLinkLocalUnicast() {
			out[ip.Unmap()] = true
		}
	}
	return out, nil
}

// sourceFor returns the source address node-a's sockets toward dst
// get: a connected UDP socket's, the kernel's choice.
func sourceFor(dst netip.Addr) (netip.Addr, error) {
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, 9)))
	if err != nil {
		return netip.Addr{}, err
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap(), nil
}

// healthCheck is one answer of a healthCheckNodePort server.
type healthCheck struct {
	code   int
	weight string // the X-Load-Balancing-Endpoint-Weight header
	body   string // on one line
}

// getHealth does GET url from c's namespace.
func getHealth(c *client, url string) (healthCheck, error) {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var conn net.Conn
		err := c.host().Do(func() (err error) {
			conn, err = (&net.Dialer{Timeout: exchangeFor}).DialContext(ctx, network, addr)
			return err
		})
		return conn, err
	}
	hc := &http.Client{Timeout: 3 * exchangeFor, Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}
	resp, err := hc.Get(url)
	if err != nil {
		return healthCheck{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return healthCheck{}, err
	}
	flat := strings.Join(strings.Fields(string(body)), " ")
	return healthCheck{code: resp.StatusCode, weight: resp.Header.Get("X-Load-Balancing-Endpoint-Weight"), body: flat}, nil
}
