package ipvsnl

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlsock"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// destAttrs is one destination as the kernel sends it: which attributes
// to include.
type destAttrs struct {
	addr      []byte
	port      []byte
	af        uint16 // 0: not sent
	fwd       uint32
	weight    uint32
	act, inac uint32
}

// destMessage encodes a destination message: the generic netlink header
// and an IPVS_CMD_ATTR_DEST holding a's attributes.
func destMessage(t testing.TB, a destAttrs) netlink.Message {
	t.Helper()
	ae := netlink.NewAttributeEncoder()
	ae.Nested(ipvsCmdAttrDest, func(nae *netlink.AttributeEncoder) error {
		if a.addr != nil {
			nae.Bytes(ipvsDestAttrAddr, a.addr)
		}
		if a.port != nil {
			nae.Bytes(ipvsDestAttrPort, a.port)
		}
		nae.Uint32(ipvsDestAttrFwdMethod, a.fwd)
		nae.Uint32(ipvsDestAttrWeight, a.weight)
		nae.Uint32(5, 0) // IPVS_DEST_ATTR_U_THRESH: not read
		nae.Uint32(ipvsDestAttrActiveConns, a.act)
		nae.Uint32(ipvsDestAttrInactConns, a.inac)
		if a.af != 0 {
			nae.Uint16(ipvsDestAttrAddrFamily, a.af)
		}
		return nil
	})
	b, err := ae.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return netlink.Message{Data: append(genlHeader(ipvsCmdGetDest), b...)}
}

func inAddr16(s string) []byte { a := netip.MustParseAddr(s).As16(); return a[:] }

// v4In16 is an IPv4 address as the kernel sends it: the first four bytes
// of a 16-byte union nf_inet_addr.
func v4In16(s string) []byte {
	a := netip.MustParseAddr(s).As4()
	return append(a[:], make([]byte, 12)...)
}

func port(p uint16) []byte { return binary.BigEndian.AppendUint16(nil, p) }

func TestParseDestinationsRules(t *testing.T) {
	for _, tc := range []struct {
		name    string
		msgs    []destAttrs
		vsAF    uint16
		want    []Destination
		wantErr string
	}{
		{name: "an IPv4 destination is read from the first four bytes of its address, its port in network order",
			msgs: []destAttrs{{addr: v4In16("10.244.1.5"), port: port(8080), af: unix.AF_INET, weight: 3, act: 2, inac: 7}},
			vsAF: unix.AF_INET,
			want: []Destination{{Addr: netip.MustParseAddr("10.244.1.5"), Port: 8080, Weight: 3, ActiveConns: 2, InactiveConns: 7}}},
		{name: "a destination without a family is of the virtual server's",
			msgs: []destAttrs{{addr: inAddr16("fd00::5"), port: port(80), weight: 1}},
			vsAF: unix.AF_INET6,
			want: []Destination{{Addr: netip.MustParseAddr("fd00::5"), Port: 80, Weight: 1}}},
		{name: "the forwarding method is the connection flags' low three bits",
			msgs: []destAttrs{{addr: v4In16("10.0.0.1"), port: port(80), af: unix.AF_INET, fwd: 0x102}},
			vsAF: unix.AF_INET,
			want: []Destination{{Addr: netip.MustParseAddr("10.0.0.1"), Port: 80, Forward: 2}}},
		{name: "a weight of 0 is read as 0 and a negative one keeps its sign",
			msgs: []destAttrs{{addr: v4In16("10.0.0.1"), port: port(80), af: unix.AF_INET}, {addr: v4In16("10.0.0.2"), port: port(80), af: unix.AF_INET, weight: 0xffffffff}},
			vsAF: unix.AF_INET,
			want: []Destination{{Addr: netip.MustParseAddr("10.0.0.1"), Port: 80}, {Addr: netip.MustParseAddr("10.0.0.2"), Port: 80, Weight: -1}}},
		{name: "no messages is no destinations", vsAF: unix.AF_INET, want: []Destination{}},
		{name: "a destination without a port is an error",
			msgs: []destAttrs{{addr: v4In16("10.0.0.1"), af: unix.AF_INET}}, vsAF: unix.AF_INET, wantErr: "without a port"},
		{name: "a port of other than two bytes is an error",
			msgs: []destAttrs{{addr: v4In16("10.0.0.1"), port: []byte{1, 2, 3}, af: unix.AF_INET}}, vsAF: unix.AF_INET, wantErr: "port of 3 bytes"},
		{name: "an IPv6 destination with a short address is an error",
			msgs: []destAttrs{{addr: []byte{1, 2, 3, 4}, port: port(80), af: unix.AF_INET6}}, vsAF: unix.AF_INET, wantErr: "address of 4 bytes in family 10"},
		{name: "a destination without an address is an error",
			msgs: []destAttrs{{port: port(80), af: unix.AF_INET}}, vsAF: unix.AF_INET, wantErr: "address of 0 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var msgs []netlink.Message
			for _, a := range tc.msgs {
				msgs = append(msgs, destMessage(t, a))
			}
			// A reader's buffer from an earlier read: none of it may show.
			earlier := []Destination{{Addr: netip.MustParseAddr("192.0.2.99"), Port: 1, Weight: 1}}
			got, err := parseDestinations(msgs, tc.vsAF, earlier[:0])
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseDestinations: %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseDestinations: %v", err)
			}
			if !cmp.Equal(got, tc.want, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParseDestinationsRefusesMalformedMessages(t *testing.T) {
	for _, tc := range []struct {
		name, wantErr string
		data          []byte
	}{
		{name: "a message shorter than its generic netlink header", data: []byte{8, 1}, wantErr: "shorter than its generic netlink header"},
		{name: "a message with no destination attribute", data: genlHeader(ipvsCmdGetDest), wantErr: "no destination attribute"},
		{name: "an attribute longer than the message", data: append(genlHeader(ipvsCmdGetDest), 0xff, 0, 2, 0), wantErr: "destination message 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseDestinations([]netlink.Message{{Data: tc.data}}, unix.AF_INET, nil)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parseDestinations: %v, want an error with %q", err, tc.wantErr)
			}
		})
	}
}

// TestDestinationsRequestNamesTheVirtualServer: the request carries
// the virtual server's family, protocol number, address and port in
// network order, as the kernel's parser of a service wants them, after
// what the buffer held (a reader reuses one).
func TestDestinationsRequestNamesTheVirtualServer(t *testing.T) {
	k := Key{Address: netip.MustParseAddr("10.96.0.10"), Protocol: policy.ProtocolUDP, Port: 53}
	prefix := []byte("kept")
	body, err := appendDestinationsRequest(slices.Clone(prefix), k)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(body, prefix) {
		t.Fatalf("the buffer's bytes % x were not kept", body[:len(prefix)])
	}
	body = body[len(prefix):]
	if body[0] != ipvsCmdGetDest || body[1] != ipvsGenlVersion {
		t.Fatalf("generic netlink header % x, want command %d version %d", body[:4], ipvsCmdGetDest, ipvsGenlVersion)
	}
	ad, err := netlink.NewAttributeDecoder(body[4:])
	if err != nil {
		t.Fatal(err)
	}
	got := map[uint16][]byte{}
	for ad.Next() {
		if ad.Type() == ipvsCmdAttrService {
			ad.Nested(func(nad *netlink.AttributeDecoder) error {
				for nad.Next() {
					got[nad.Type()] = nad.Bytes()
				}
				return nil
			})
		}
	}
	if err := ad.Err(); err != nil {
		t.Fatal(err)
	}
	want := map[uint16][]byte{
		ipvsSvcAttrAF:       binary.NativeEndian.AppendUint16(nil, unix.AF_INET),
		ipvsSvcAttrProtocol: binary.NativeEndian.AppendUint16(nil, unix.IPPROTO_UDP),
		ipvsSvcAttrAddr:     {10, 96, 0, 10},
		ipvsSvcAttrPort:     {0, 53},
	}
	if !cmp.Equal(got, want) {
		t.Errorf("service attributes %v, want %v", got, want)
	}
	if _, err := appendDestinationsRequest(nil, Key{Address: k.Address, Protocol: "ICMP", Port: 1}); err == nil {
		t.Error("a request for an ICMP virtual server: no error")
	}
}

// FuzzParseDestinations: whatever a message holds, parsing never panics,
// and every destination it returns has an address of the family asked.
func FuzzParseDestinations(f *testing.F) {
	f.Add(destMessage(f, destAttrs{addr: v4In16("10.244.1.5"), port: port(8080), af: unix.AF_INET, weight: 3}).Data)
	f.Add(destMessage(f, destAttrs{addr: inAddr16("fd00::5"), port: port(80), af: unix.AF_INET6}).Data)
	f.Add(destMessage(f, destAttrs{addr: []byte{1}, port: port(80)}).Data)
	f.Add(genlHeader(ipvsCmdGetDest))
	f.Fuzz(func(t *testing.T, data []byte) {
		ds, err := parseDestinations([]netlink.Message{{Data: data}}, unix.AF_INET, nil)
		if err != nil {
			return
		}
		for _, d := range ds {
			if !d.Addr.IsValid() {
				t.Errorf("destination %+v without a valid address", d)
			}
		}
	})
}

// BenchmarkReadDestinations10: splitting one read holding a virtual
// server's ten destinations and decoding them, as the check and the
// repair do for each virtual server.
func BenchmarkReadDestinations10(b *testing.B) {
	const seq = 7
	var read []byte
	for i := range 10 {
		m := destMessage(b, destAttrs{addr: v4In16("10.244.1.5"), port: port(uint16(8080 + i)), af: unix.AF_INET, weight: 1})
		read = nlsock.AppendMessage(read, 36, unix.NLM_F_MULTI, seq, m.Data)
	}
	read = nlsock.AppendMessage(read, unix.NLMSG_DONE, unix.NLM_F_MULTI, seq, []byte{0, 0, 0, 0})
	var msgs []netlink.Message
	var ds []Destination
	b.ReportAllocs()
	for b.Loop() {
		var done bool
		var err error
		msgs, done, err = splitAnswer(msgs[:0], read, seq)
		if err != nil || !done {
			b.Fatalf("splitAnswer: done %v, %v", done, err)
		}
		if ds, err = parseDestinations(msgs, unix.AF_INET, ds[:0]); err != nil || len(ds) != 10 {
			b.Fatalf("parseDestinations: %d, %v", len(ds), err)
		}
	}
}
