//go:build integration

package benchscale

import (
	"fmt"

	"github.com/mdlayher/netlink"
	mobyipvs "github.com/moby/ipvs"
	"golang.org/x/sys/unix"
)

// tableCheck counts what IPVS holds for the table-complete check, one
// reading at a time: a dump of the virtual servers, then one dump of
// destinations for each virtual server not yet seen full (perVS
// destinations, as every virtual server of the workload has but the
// apiserver's own). A proxy's cold start only adds, so a virtual server
// once full stays so, and each reading asks for the virtual servers
// that came or grew since the last: the requests spread over the cold
// start, and the reading that finds the table complete is about as
// short at 60,000 virtual servers as at 1,000. (/proc/net/ip_vs lists
// everything in one read, but the kernel hands it out a page at a time
// and finds each page's first virtual server by walking the table from
// its start: a whole read grows as the square of the table.) versus
// counts the whole table again after the first sync.
type tableCheck struct {
	k      *kernel
	c      *netlink.Conn
	family uint16
	perVS  int
	full   map[vsKey]bool
}

// vsKey names a virtual server.
type vsKey struct {
	addr     [16]byte
	port     uint16
	protocol uint16
	fwmark   uint32
}

func newTableCheck(k *kernel, perVS int) (*tableCheck, error) {
	c, err := netlink.Dial(unix.NETLINK_GENERIC, nil)
	if err != nil {
		return nil, fmt.Errorf("generic netlink socket: %w", err)
	}
	family, err := genlFamily(c, "IPVS")
	if err != nil {
		c.Close()
		return nil, err
	}
	return &tableCheck{k: k, c: c, family: family, perVS: perVS, full: map[vsKey]bool{}}, nil
}

func (tc *tableCheck) Close() { tc.c.Close() }

// read is one reading: how many virtual servers and destinations IPVS
// holds, and how many dumps of destinations it took.
func (tc *tableCheck) read() (vs, dests, asked int, err error) {
	svcs, err := tc.k.h.GetServices()
	if err != nil {
		return 0, 0, 0, fmt.Errorf("ipvs services: %w", err)
	}
	for _, s := range svcs {
		key := vsKey{port: s.Port, protocol: s.Protocol, fwmark: s.FWMark}
		copy(key.addr[:], s.Address.To16())
		if tc.full[key] {
			dests += tc.perVS
			continue
		}
		n, err := tc.destinations(s)
		asked++
		if err != nil {
			return len(svcs), dests, asked, err
		}
		if n >= tc.perVS {
			tc.full[key] = true
		}
		dests += n
	}
	return len(svcs), dests, asked, nil
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
