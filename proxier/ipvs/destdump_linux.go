package ipvs

import (
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// destReader lists virtual servers' destinations on its own generic
// netlink socket (destdump.go says why not through moby/ipvs). Like a
// moby handle, it is used by one goroutine at a time.
type destReader struct {
	c      *netlink.Conn
	family netlink.HeaderType
}

// newDestReader opens the socket and looks up the IPVS family, which
// needs the ip_vs module loaded (moby/ipvs loads it when it opens its
// first handle).
func newDestReader() (*destReader, error) {
	c, err := netlink.Dial(unix.NETLINK_GENERIC, nil)
	if err != nil {
		return nil, fmt.Errorf("open a generic netlink socket: %w", err)
	}
	id, err := genlFamily(c, ipvsGenlName)
	if err != nil {
		c.Close()
		return nil, err
	}
	return &destReader{c: c, family: netlink.HeaderType(id)}, nil
}

// genlFamily asks the generic netlink controller for a family's id.
func genlFamily(c *netlink.Conn, name string) (uint16, error) {
	ae := netlink.NewAttributeEncoder()
	ae.String(unix.CTRL_ATTR_FAMILY_NAME, name)
	attrs, err := ae.Encode()
	if err != nil {
		return 0, fmt.Errorf("encode the lookup of generic netlink family %s: %w", name, err)
	}
	msgs, err := c.Execute(netlink.Message{
		Header: netlink.Header{Type: unix.GENL_ID_CTRL, Flags: netlink.Request},
		Data:   append([]byte{unix.CTRL_CMD_GETFAMILY, 1, 0, 0}, attrs...),
	})
	if err != nil {
		return 0, fmt.Errorf("look up generic netlink family %s: %w", name, err)
	}
	for _, m := range msgs {
		if len(m.Data) < 4 {
			continue
		}
		ad, err := netlink.NewAttributeDecoder(m.Data[4:])
		if err != nil {
			return 0, fmt.Errorf("generic netlink family %s: %w", name, err)
		}
		for ad.Next() {
			if ad.Type() == unix.CTRL_ATTR_FAMILY_ID {
				return ad.Uint16(), ad.Err()
			}
		}
	}
	return 0, fmt.Errorf("generic netlink family %s: no id in the answer", name)
}

// destinations lists virtual server k's destinations with one dump;
// empty when k does not exist, as the kernel answers.
func (r *destReader) destinations(k Key) ([]Destination, error) {
	body, err := getDestinationsRequest(k)
	if err != nil {
		return nil, err
	}
	msgs, err := r.c.Execute(netlink.Message{
		Header: netlink.Header{Type: r.family, Flags: netlink.Request | netlink.Dump},
		Data:   body,
	})
	if err != nil {
		return nil, err
	}
	return parseDestinations(msgs, family(k.Address))
}

func (r *destReader) Close() { r.c.Close() }
