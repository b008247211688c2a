package nft

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// RecordedNodePorts reads the nodeport-services-v4 and -v6 sets from the
// kernel: the NodePort virtual servers that the table records as ours,
// programmed by this process or an earlier one. A fresh process (--cleanup,
// a restart) has no plan that names them, and the IPVS virtual servers on
// node addresses cannot otherwise be told from foreign ones. The table
// outlives the process, so the table keeps the record.
//
// It reads the kernel, not the writer's mirror, and sends nothing. A
// missing table or set (none programmed yet, already cleaned up, or
// written by a version without the record) means nothing is recorded:
// no keys and no error. The keys are sorted; an element that is not a
// well-formed address . protocol . port is an error.
func (w *Writer) RecordedNodePorts() ([]policy.VirtualServerKey, error) {
	var out []policy.VirtualServerKey
	for _, fam := range families {
		id := idOf(setNodePortServices, fam)
		s, err := w.conn.GetSetByName(w.table, id.name())
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read set %s of table inet %s: %w", id.name(), TableName, err)
		}
		before := len(out)
		var bad error // an element that is not a vsKey
		err = eachElement(w.conn, s, func() { out = out[:before] }, func(e nftables.SetElement) error {
			k, err := decodeVSKey(e.Key, fam)
			if err != nil {
				bad = fmt.Errorf("set %s of table inet %s: element %x: %w", id.name(), TableName, e.Key, err)
				return bad
			}
			out = append(out, k)
			return nil
		})
		if bad != nil {
			return nil, bad
		}
		if err != nil {
			return nil, fmt.Errorf("read elements of set %s of table inet %s: %w", id.name(), TableName, err)
		}
	}
	slices.SortFunc(out, policy.VirtualServerKey.Compare)
	return slices.Compact(out), nil
}

// decodeVSKey parses a vsKey of fam: address . inet_proto . inet_service,
// each field padded to 4 bytes.
func decodeVSKey(b []byte, fam *family) (policy.VirtualServerKey, error) {
	n := int(fam.addrLen)
	if len(b) != n+8 {
		return policy.VirtualServerKey{}, fmt.Errorf("%d bytes, want %d", len(b), n+8)
	}
	a, _ := netip.AddrFromSlice(b[:n])
	proto, ok := policy.ProtocolOfNumber(b[n])
	if !ok {
		return policy.VirtualServerKey{}, fmt.Errorf("protocol %d is not tcp, udp or sctp", b[n])
	}
	return policy.VirtualServerKey{Address: a, Protocol: proto, Port: uint16(b[n+4])<<8 | uint16(b[n+5])}, nil
}

// TableExists reads whether our table is in the kernel; it sends
// nothing.
func (w *Writer) TableExists() (bool, error) {
	// One set by name, not GetSets: google/nftables formats GetSets'
	// errors with %v, so a missing table's ENOENT could not be told.
	_, err := w.conn.GetSetByName(w.table, probeSet)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.ENOENT):
		return false, nil
	}
	return false, fmt.Errorf("read table inet %s: %w", TableName, err)
}
