package ipvsnl

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// TestSingleRequestsAreTheKernelsFormat holds the requests the Linux
// adapter makes one at a time, in place of moby/ipvs's, to the layout
// the kernel parses (include/uapi/linux/ip_vs.h): a virtual server read
// by its key alone, the timeouts read and set in whole seconds, zero
// for the ones left as they are.
func TestSingleRequestsAreTheKernelsFormat(t *testing.T) {
	mustBody := func(b []byte, err error) []byte {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cases := []struct {
		name string
		body []byte
		want string
	}{
		{"one IPv4 virtual server by its key", mustBody(appendServiceRequest(nil, key("10.96.0.10:80/TCP"))),
			"cmd=4 version=1 svc{af=2 proto=6 addr=10.96.0.10 port=80}"},
		{"one IPv6 virtual server by its key", mustBody(appendServiceRequest(nil, key("[fd00::a]:53/UDP"))),
			"cmd=4 version=1 svc{af=10 proto=17 addr=fd00::a port=53}"},
		{"the timeouts' read", getConfigRequest(), "cmd=13 version=1"},
		{"the timeouts set in seconds, zero left", mustBody(setConfigRequest(Timeouts{TCP: 900 * time.Second, UDP: 2500 * time.Millisecond})),
			"cmd=12 version=1 tcp=900 tcpfin=0 udp=2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := renderConfigRequest(t, tc.body); got != tc.want {
				t.Errorf("request\n got %s\nwant %s", got, tc.want)
			}
		})
	}
	if _, err := appendServiceRequest(nil, Key{}); err == nil {
		t.Error("appendServiceRequest of an empty key: no error")
	}
}

// renderConfigRequest is renderRequest, with the timeouts' top-level
// attributes by name.
func renderConfigRequest(t *testing.T, body []byte) string {
	t.Helper()
	if len(body) > 4 && body[0] == ipvsCmdGetService {
		return renderRequest(t, body)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "cmd=%d version=%d", body[0], body[1])
	ad, err := netlink.NewAttributeDecoder(body[4:])
	if err != nil {
		t.Fatal(err)
	}
	names := map[uint16]string{ipvsCmdAttrTimeoutTCP: "tcp", ipvsCmdAttrTimeoutTCPFin: "tcpfin", ipvsCmdAttrTimeoutUDP: "udp"}
	for ad.Next() {
		fmt.Fprintf(&b, " %s=%d", names[ad.Type()], ad.Uint32())
	}
	if err := ad.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestTimeoutsAreReadFromTheKernelsAnswer holds parseTimeouts to the
// answer's layout, and anything malformed to an error, never a panic.
func TestTimeoutsAreReadFromTheKernelsAnswer(t *testing.T) {
	u32 := func(typ uint16, v uint32) []byte {
		return binary.NativeEndian.AppendUint32(attrHeader(typ, 4), v)
	}
	answer := func(attrs ...[]byte) []netlink.Message {
		body := genlHeader(ipvsCmdGetConfig)
		for _, a := range attrs {
			body = append(body, a...)
		}
		return []netlink.Message{{Data: body}}
	}
	cases := []struct {
		name    string
		msgs    []netlink.Message
		want    Timeouts
		wantErr string
	}{
		{name: "the three timeouts in seconds",
			msgs: answer(u32(ipvsCmdAttrTimeoutTCP, 900), u32(ipvsCmdAttrTimeoutTCPFin, 120), u32(ipvsCmdAttrTimeoutUDP, 300)),
			want: Timeouts{TCP: 900 * time.Second, TCPFin: 120 * time.Second, UDP: 300 * time.Second}},
		{name: "an unknown attribute is skipped",
			msgs: answer(u32(99, 7), u32(ipvsCmdAttrTimeoutUDP, 30)),
			want: Timeouts{UDP: 30 * time.Second}},
		{name: "a timeout of two bytes is an error",
			msgs:    answer(binary.NativeEndian.AppendUint16(attrHeader(ipvsCmdAttrTimeoutTCP, 2), 9), []byte{0, 0}),
			wantErr: "not a uint32"},
		{name: "a truncated attribute is an error",
			msgs:    answer([]byte{8, 0, 4}),
			wantErr: "shorter than its header"},
		{name: "a body shorter than the header is an error",
			msgs:    []netlink.Message{{Data: []byte{13}}},
			wantErr: "shorter than the generic netlink header"},
		{name: "two messages are an error",
			msgs:    append(answer(), answer()...),
			wantErr: "2 messages"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseTimeouts(tc.msgs)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseTimeouts: error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("parseTimeouts = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func attrHeader(typ uint16, dataLen int) []byte {
	b := binary.NativeEndian.AppendUint16(nil, uint16(unix.NLA_HDRLEN+dataLen))
	return binary.NativeEndian.AppendUint16(b, typ)
}
