//go:build integration

package benchscale

import (
	"fmt"
	"time"

	"github.com/mdlayher/netlink"
	mobyipvs "github.com/moby/ipvs"
	"golang.org/x/sys/unix"
)

// askAbove is the size (virtual servers) past which the table-complete
// check, once the dump lists every virtual server, asks for each one's
// destinations rather than reading /proc/net/ip_vs. The kernel hands
// that file out a page at a time and finds each page's first virtual
// server by walking the table from its start (readCost), so one read
// grows as the square of the table: past this size it added more than
// half again to ours' measured cold start. A dump of one virtual
// server's destinations costs about the same at any size, but under TCG
// more than the file's share of it for smaller tables. Each ask (and
// each chunk of the dump) takes the kernel's IPVS mutex, as every change
// a proxy makes does, in the kernel source read (not traced in the VM),
// so the check asks nothing while the table grows: asking as virtual
// servers appeared slowed kube-proxy (benchmarks/NOTES.md). The rows
// measured with the file (20,000 services, 24,001 virtual servers, and
// below) keep it.
const askAbove = 30000

// tableCheck counts what IPVS holds for the table-complete check, one
// reading at a time: a generic netlink dump of the virtual servers,
// then, once it lists them all, either (up to askAbove) one read of
// /proc/net/ip_vs for their destinations or (past it) one dump of
// destinations for each virtual server not yet seen full (perVS of
// them, as every virtual server of the workload has but the
// apiserver's own). A cold start only adds, so a virtual server once
// full stays so, and each reading asks only for those that grew since
// the last. versus counts the whole table again after the first sync.
// Not safe for concurrent use.
type tableCheck struct {
	k      *kernel
	wantVS int
	perVS  int

	// Set past askAbove only.
	c      *netlink.Conn
	family uint16
	full   map[vsKey]bool

	// Of the last reading: the dump's time and how many virtual
	// servers' destinations it asked for; and asks in all.
	dumpTook        time.Duration
	asked, askedAll int
}

// vsKey names a virtual server.
type vsKey struct {
	addr     [16]byte
	port     uint16
	protocol uint16
	fwmark   uint32
}

func newTableCheck(k *kernel, wantVS, perVS int) (*tableCheck, error) {
	tc := &tableCheck{k: k, wantVS: wantVS, perVS: perVS}
	if wantVS <= askAbove {
		return tc, nil
	}
	c, err := netlink.Dial(unix.NETLINK_GENERIC, nil)
	if err != nil {
		return nil, fmt.Errorf("generic netlink socket: %w", err)
	}
	family, err := genlFamily(c, "IPVS")
	if err != nil {
		c.Close()
		return nil, err
	}
	tc.c, tc.family, tc.full = c, family, map[vsKey]bool{}
	return tc, nil
}

func (tc *tableCheck) asks() bool { return tc.c != nil }

func (tc *tableCheck) Close() {
	if tc.c != nil {
		tc.c.Close()
	}
}

// read is one reading: how many virtual servers and destinations IPVS
// holds (the destinations only once every virtual server is there).
func (tc *tableCheck) read() (vs, dests int, err error) {
	t0 := time.Now()
	svcs, err := tc.k.h.GetServices()
	tc.dumpTook, tc.asked = time.Since(t0), 0
	if err != nil {
		return 0, 0, fmt.Errorf("ipvs services: %w", err)
	}
	if len(svcs) != tc.wantVS {
		return len(svcs), 0, nil
	}
	if !tc.asks() {
		listed, dests, err := procIPVS()
		if err == nil && listed != len(svcs) {
			err = fmt.Errorf("/proc/net/ip_vs lists %d virtual servers, generic netlink %d", listed, len(svcs))
		}
		return len(svcs), dests, err
	}
	// A dump taken while the proxy adds can list a virtual server twice
	// (each chunk resumes at an index, and an add before it shifts the
	// rest: in the kernel source read) and leave another out, so only
	// distinct ones count: a repeat is not a virtual server seen.
	seen := make(map[vsKey]bool, len(svcs))
	for _, s := range svcs {
		key := vsKey{port: s.Port, protocol: s.Protocol, fwmark: s.FWMark}
		copy(key.addr[:], s.Address.To16())
		if seen[key] {
			continue
		}
		seen[key] = true
		if tc.full[key] {
			dests += tc.perVS
			continue
		}
		n, err := tc.destinations(s)
		tc.asked++
		tc.askedAll++
		if err != nil {
			return len(seen), dests, err
		}
		if n >= tc.perVS {
			tc.full[key] = true
		}
		dests += n
	}
	return len(seen), dests, nil
}

// spacing is what the wait after a reading is based on: the whole
// reading when it reads the file; only the dump when it asks, since the
// asks follow the proxy's pace, and spacing by them would let a backlog
// of them lengthen the wait that grows it.
func (tc *tableCheck) spacing(reading time.Duration) time.Duration {
	if tc.asks() {
		return tc.dumpTook
	}
	return reading
}

// ipvsCmdGetDest is IPVS_CMD_GET_DEST (linux/ip_vs.h): a dump only.
const ipvsCmdGetDest = 8

// destinations counts the virtual server's destinations: the messages
// of one dump. Not moby/ipvs's GetDestinations, which parses each into
// a struct with its statistics; counting needs none of it.
func (tc *tableCheck) destinations(s *mobyipvs.Service) (int, error) {
	ae := netlink.NewAttributeEncoder()
	ae.Nested(ipvsCmdAttrService, func(nae *netlink.AttributeEncoder) error {
		serviceKey(nae, s)
		return nil
	})
	msg, err := ipvsMsg(tc.family, ipvsCmdGetDest, ae)
	if err != nil {
		return 0, err
	}
	msg.Header.Flags |= netlink.Dump
	answers, err := tc.c.Execute(msg)
	if err != nil {
		return 0, fmt.Errorf("ipvs destinations of %s:%d: %w", s.Address, s.Port, err)
	}
	return len(answers), nil
}
