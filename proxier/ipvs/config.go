package ipvs

import (
	"fmt"
	"time"

	"github.com/mdlayher/netlink"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlattr"
)

// The requests the Kernel makes one at a time (include/uapi/linux/ip_vs.h):
// one virtual server read alone, and the timeouts read and set.
const (
	ipvsCmdSetConfig = 12 // IPVS_CMD_SET_CONFIG
	ipvsCmdGetConfig = 13 // IPVS_CMD_GET_CONFIG

	ipvsCmdAttrTimeoutTCP    = 4 // IPVS_CMD_ATTR_TIMEOUT_TCP, seconds
	ipvsCmdAttrTimeoutTCPFin = 5 // IPVS_CMD_ATTR_TIMEOUT_TCP_FIN, seconds
	ipvsCmdAttrTimeoutUDP    = 6 // IPVS_CMD_ATTR_TIMEOUT_UDP, seconds
)

// getServiceRequest is the body of the read of virtual server k alone
// (IPVS_CMD_GET_SERVICE without NLM_F_DUMP): the kernel answers with
// the one virtual server, or ESRCH.
func getServiceRequest(k Key) ([]byte, error) {
	proto, ok := k.Protocol.Number()
	if !ok || !k.Address.IsValid() {
		return nil, fmt.Errorf("virtual server %s: not one IPVS can hold", k)
	}
	attrs, err := keyAttrs(k, uint16(proto))
	if err != nil {
		return nil, fmt.Errorf("encode the read of virtual server %s: %w", k, err)
	}
	return append(genlHeader(ipvsCmdGetService), attrs...), nil
}

// getConfigRequest is the body of the timeouts' read.
func getConfigRequest() []byte { return genlHeader(ipvsCmdGetConfig) }

// setConfigRequest is the body of the timeouts' change. The kernel
// changes only the non-zero ones (ip_vs_set_timeout), which is
// Kernel.SetTimeouts' contract; a timeout is sent in whole seconds.
func setConfigRequest(t Timeouts) ([]byte, error) {
	ae := netlink.NewAttributeEncoder()
	ae.Uint32(ipvsCmdAttrTimeoutTCP, seconds(t.TCP))
	ae.Uint32(ipvsCmdAttrTimeoutTCPFin, seconds(t.TCPFin))
	ae.Uint32(ipvsCmdAttrTimeoutUDP, seconds(t.UDP))
	attrs, err := ae.Encode()
	if err != nil {
		return nil, fmt.Errorf("encode the IPVS timeouts %+v: %w", t, err)
	}
	return append(genlHeader(ipvsCmdSetConfig), attrs...), nil
}

func seconds(d time.Duration) uint32 { return uint32(d / time.Second) }

// parseTimeouts decodes the answer to getConfigRequest: one message of
// the three timeouts in seconds. Anything malformed is an error, never
// a panic.
func parseTimeouts(msgs []netlink.Message) (Timeouts, error) {
	if len(msgs) != 1 {
		return Timeouts{}, fmt.Errorf("IPVS timeouts: %d messages in the answer, want 1", len(msgs))
	}
	data := msgs[0].Data
	if len(data) < 4 {
		return Timeouts{}, fmt.Errorf("IPVS timeouts: %d bytes, shorter than the generic netlink header", len(data))
	}
	var t Timeouts
	aw := nlattr.New(data[4:])
	for aw.Next() {
		switch aw.Type {
		case ipvsCmdAttrTimeoutTCP:
			t.TCP = time.Duration(aw.Uint32()) * time.Second
		case ipvsCmdAttrTimeoutTCPFin:
			t.TCPFin = time.Duration(aw.Uint32()) * time.Second
		case ipvsCmdAttrTimeoutUDP:
			t.UDP = time.Duration(aw.Uint32()) * time.Second
		}
	}
	if aw.Err != nil {
		return Timeouts{}, fmt.Errorf("IPVS timeouts: %w", aw.Err)
	}
	return t, nil
}
