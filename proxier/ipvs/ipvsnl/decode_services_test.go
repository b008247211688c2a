package ipvsnl

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// svcAttrs is one virtual server as the kernel sends it: which
// attributes to include (nil or 0: not sent).
type svcAttrs struct {
	af, proto uint16
	addr      []byte
	port      []byte
	fwmark    uint32
	sched     []byte
	flags     []byte
	timeout   uint32
}

// svcMessage encodes a virtual server message: the generic netlink
// header and an IPVS_CMD_ATTR_SERVICE holding a's attributes, with
// statistics as the kernel sends them.
func svcMessage(t testing.TB, a svcAttrs) netlink.Message {
	t.Helper()
	ae := netlink.NewAttributeEncoder()
	ae.Nested(ipvsCmdAttrService, func(nae *netlink.AttributeEncoder) error {
		if a.af != 0 {
			nae.Uint16(ipvsSvcAttrAF, a.af)
		}
		if a.proto != 0 {
			nae.Uint16(ipvsSvcAttrProtocol, a.proto)
		}
		if a.addr != nil {
			nae.Bytes(ipvsSvcAttrAddr, a.addr)
		}
		if a.port != nil {
			nae.Bytes(ipvsSvcAttrPort, a.port)
		}
		if a.fwmark != 0 {
			nae.Uint32(ipvsSvcAttrFWMark, a.fwmark)
		}
		if a.sched != nil {
			nae.Bytes(ipvsSvcAttrSchedName, a.sched)
		}
		if a.flags != nil {
			nae.Bytes(ipvsSvcAttrFlags, a.flags)
		}
		nae.Uint32(ipvsSvcAttrTimeout, a.timeout)
		nae.Uint32(ipvsSvcAttrNetmask, 0xffffffff)
		nae.Nested(10, func(stats *netlink.AttributeEncoder) error { // IPVS_SVC_ATTR_STATS: not read
			stats.Uint32(1, 42)
			stats.Uint64(5, 4242)
			return nil
		})
		return nil
	})
	b, err := ae.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return netlink.Message{Data: append(genlHeader(ipvsCmdNewService), b...)}
}

// ipvsFlags is an IPVS_SVC_ATTR_FLAGS value: struct ip_vs_flags.
func ipvsFlags(flags, mask uint32) []byte {
	return binary.NativeEndian.AppendUint32(binary.NativeEndian.AppendUint32(nil, flags), mask)
}

func v4Service() svcAttrs {
	return svcAttrs{af: unix.AF_INET, proto: unix.IPPROTO_TCP, addr: v4In16("10.96.0.10"), port: port(53),
		sched: []byte("rr\x00"), flags: ipvsFlags(FlagHashed, 0xffffffff)}
}

// TestParseVirtualServersReadsWhatTheKernelLists: each virtual server
// is decoded from its attributes as moby/ipvs decoded it (the hashed
// flag cleared, the scheduler's NUL dropped, statistics ignored); those
// the Kernel never lists are skipped, and a malformed one is an error.
func TestParseVirtualServersReadsWhatTheKernelLists(t *testing.T) {
	with := func(f func(a *svcAttrs)) svcAttrs { a := v4Service(); f(&a); return a }
	tcp53 := Key{Address: netip.MustParseAddr("10.96.0.10"), Protocol: policy.ProtocolTCP, Port: 53}
	for _, tc := range []struct {
		name    string
		msgs    []svcAttrs
		want    []VirtualServer
		wantErr string
	}{
		{"an IPv4 virtual server, hashed flag cleared", []svcAttrs{v4Service()},
			[]VirtualServer{{Key: tcp53, Scheduler: "rr"}}, ""},
		{"IPv6, UDP, persistent, a scheduler without its NUL", []svcAttrs{with(func(a *svcAttrs) {
			a.af, a.proto, a.addr, a.sched = unix.AF_INET6, unix.IPPROTO_UDP, inAddr16("fd00::a"), []byte("sh")
			a.flags, a.timeout = ipvsFlags(FlagPersistent|FlagHashed, 0xffffffff), 10800
		})}, []VirtualServer{{Key: Key{Address: netip.MustParseAddr("fd00::a"), Protocol: policy.ProtocolUDP, Port: 53},
			Scheduler: "sh", Flags: FlagPersistent, Timeout: 10800}}, ""},
		{"an unknown scheduler is read as named", []svcAttrs{with(func(a *svcAttrs) { a.sched = []byte("xyz\x00") })},
			[]VirtualServer{{Key: tcp53, Scheduler: "xyz"}}, ""},
		{"a firewall mark's is skipped", []svcAttrs{with(func(a *svcAttrs) { a.fwmark, a.addr, a.port = 7, nil, nil }), v4Service()},
			[]VirtualServer{{Key: tcp53, Scheduler: "rr"}}, ""},
		{"another protocol's is skipped", []svcAttrs{with(func(a *svcAttrs) { a.proto = 200 }), v4Service()},
			[]VirtualServer{{Key: tcp53, Scheduler: "rr"}}, ""},
		{"an address shorter than its family", []svcAttrs{with(func(a *svcAttrs) { a.af, a.addr = unix.AF_INET6, []byte{10, 96, 0, 10} })}, nil,
			"virtual server message 0: virtual server address of 4 bytes in family 10"},
		{"no port", []svcAttrs{with(func(a *svcAttrs) { a.port = nil })}, nil,
			"virtual server message 0: virtual server 10.96.0.10 without a port"},
		{"a port of three bytes", []svcAttrs{with(func(a *svcAttrs) { a.port = []byte{0, 53, 0} })}, nil,
			"virtual server message 0: virtual server port of 3 bytes"},
		{"flags shorter than a flags word", []svcAttrs{with(func(a *svcAttrs) { a.flags = []byte{1, 0} })}, nil,
			"virtual server message 0: virtual server flags of 2 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var msgs []netlink.Message
			for _, a := range tc.msgs {
				msgs = append(msgs, svcMessage(t, a))
			}
			got, err := parseVirtualServers(msgs, nil)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("virtual servers:\n got %v\nwant %v", got, tc.want)
			}
		})
	}
}

// TestParseVirtualServersMessagesWithoutAService: a message too short
// for its header, or without a service attribute, is an error.
func TestParseVirtualServersMessagesWithoutAService(t *testing.T) {
	for _, data := range [][]byte{{1, 1}, genlHeader(ipvsCmdNewService)} {
		if _, err := parseVirtualServers([]netlink.Message{{Data: data}}, nil); err == nil {
			t.Errorf("%x: no error", data)
		}
	}
}

// TestKnownSchedulerNamesAreNotCopied: reading a known scheduler's name
// allocates nothing; a dump of thousands of virtual servers would
// otherwise make a string per virtual server.
func TestKnownSchedulerNamesAreNotCopied(t *testing.T) {
	b := []byte("wrr\x00")
	if n := testing.AllocsPerRun(100, func() { _ = schedulerName(b) }); n != 0 {
		t.Errorf("schedulerName allocates %v times", n)
	}
}

func FuzzParseVirtualServers(f *testing.F) {
	f.Add(svcMessage(f, v4Service()).Data)
	f.Add(svcMessage(f, svcAttrs{af: unix.AF_INET6, proto: unix.IPPROTO_SCTP, addr: inAddr16("fd00::1"), port: port(80)}).Data)
	f.Add(svcMessage(f, svcAttrs{af: unix.AF_INET, fwmark: 3}).Data)
	f.Add(genlHeader(ipvsCmdNewService))
	f.Fuzz(func(t *testing.T, data []byte) {
		vss, err := parseVirtualServers([]netlink.Message{{Data: data}}, nil)
		if err != nil {
			return
		}
		for _, vs := range vss {
			if !vs.Address.IsValid() || vs.Protocol == "" {
				t.Errorf("virtual server %+v without a valid address or protocol", vs)
			}
		}
	})
}

// BenchmarkReadVirtualServers1000: decoding a dump's answer of 1,000
// virtual servers, as a Repair does at its start.
func BenchmarkReadVirtualServers1000(b *testing.B) {
	msgs := make([]netlink.Message, 1000)
	for i := range msgs {
		a := v4Service()
		a.port = port(uint16(i + 1))
		msgs[i] = svcMessage(b, a)
	}
	out := make([]VirtualServer, 0, len(msgs))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if out, err = parseVirtualServers(msgs, out[:0]); err != nil {
			b.Fatal(err)
		}
	}
}
