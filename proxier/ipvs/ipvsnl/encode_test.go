package ipvsnl

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlsock"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testsupport/errnos"
)

// renderRequest decodes a request body as the kernel reads it: the
// command, then each nested attribute by name, in the order sent.
func renderRequest(t *testing.T, body []byte) string {
	t.Helper()
	if len(body) < 4 {
		t.Fatalf("body of %d bytes", len(body))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "cmd=%d version=%d", body[0], body[1])
	ad, err := netlink.NewAttributeDecoder(body[4:])
	if err != nil {
		t.Fatal(err)
	}
	for ad.Next() {
		nest := map[uint16]string{ipvsCmdAttrService: "svc", ipvsCmdAttrDest: "dest"}[ad.Type()]
		fmt.Fprintf(&b, " %s{", nest)
		ad.Nested(func(nad *netlink.AttributeDecoder) error {
			var parts []string
			for nad.Next() {
				parts = append(parts, renderAttr(nest, nad.Type(), nad.Bytes()))
			}
			b.WriteString(strings.Join(parts, " "))
			return nil
		})
		b.WriteString("}")
	}
	if err := ad.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func renderAttr(nest string, typ uint16, v []byte) string {
	u32 := func() uint32 { return binary.NativeEndian.Uint32(v) }
	addr := func() string { a, _ := netip.AddrFromSlice(v); return a.String() }
	switch nest + fmt.Sprint(typ) {
	case "svc1":
		return fmt.Sprintf("af=%d", binary.NativeEndian.Uint16(v))
	case "svc2":
		return fmt.Sprintf("proto=%d", binary.NativeEndian.Uint16(v))
	case "svc3", "dest1":
		return "addr=" + addr()
	case "svc4", "dest2":
		return fmt.Sprintf("port=%d", binary.BigEndian.Uint16(v))
	case "svc6":
		return fmt.Sprintf("sched=%q", v)
	case "svc7":
		return fmt.Sprintf("flags=%#x/%#x", u32(), binary.NativeEndian.Uint32(v[4:]))
	case "svc8":
		return fmt.Sprintf("timeout=%d", u32())
	case "svc9":
		return fmt.Sprintf("netmask=%#x", u32())
	case "dest3":
		return fmt.Sprintf("fwd=%d", u32())
	case "dest4":
		return fmt.Sprintf("weight=%d", int32(u32()))
	case "dest5":
		return fmt.Sprintf("uthresh=%d", u32())
	case "dest6":
		return fmt.Sprintf("lthresh=%d", u32())
	}
	return fmt.Sprintf("%s%d=%x", nest, typ, v)
}

// TestEncodeOp: each change is the request the kernel expects
// (include/uapi/linux/ip_vs.h): the whole virtual server only to add or
// change one, the whole destination only to add or change one, and
// otherwise only their keys; byte for byte what mdlayher/netlink's
// AttributeEncoder makes of them (encodeOpByAttributeEncoder), as these
// requests were encoded when the real kernel's contract tests proved
// them, and appended after other requests as a Write appends them.
func TestEncodeOp(t *testing.T) {
	v4 := VirtualServer{Key: key("10.96.0.10:80/TCP"), Scheduler: "wrr", Flags: FlagPersistent, Timeout: 10800}
	v6 := VirtualServer{Key: key("[fd00::10]:53/UDP"), Scheduler: "mh", Flags: FlagSched1 | FlagSched2}
	pod := Destination{Addr: netip.MustParseAddr("10.244.1.5"), Port: 8080, Weight: 3, Forward: ForwardMasq}
	svc4 := "svc{af=2 proto=6 addr=10.96.0.10 port=80"
	for _, tc := range []struct {
		name string
		op   Op
		want string // or the error's text
	}{
		{"adding a virtual server sends scheduler, every flag with a full mask, timeout and a /32 netmask",
			Op{Kind: OpAddService, VS: v4},
			"cmd=1 version=1 " + svc4 + ` sched="wrr\x00" flags=0x1/0xffffffff timeout=10800 netmask=0xffffffff}`},
		{"changing an IPv6 virtual server sends a /128 netmask as a prefix length",
			Op{Kind: OpUpdateService, VS: v6},
			`cmd=2 version=1 svc{af=10 proto=17 addr=fd00::10 port=53 sched="mh\x00" flags=0x18/0xffffffff timeout=0 netmask=0x80}`},
		{"deleting a virtual server sends its key only",
			Op{Kind: OpDeleteService, VS: v4},
			"cmd=3 version=1 " + svc4 + "}"},
		{"adding a destination sends the virtual server's key and the whole destination",
			Op{Kind: OpAddDestination, VS: v4, Dest: pod},
			"cmd=5 version=1 " + svc4 + "} dest{addr=10.244.1.5 port=8080 fwd=0 weight=3 uthresh=0 lthresh=0}"},
		{"draining a destination sends weight 0",
			Op{Kind: OpUpdateDestination, VS: VirtualServer{Key: v4.Key}, Dest: Destination{Addr: pod.Addr, Port: 8080}},
			"cmd=6 version=1 " + svc4 + "} dest{addr=10.244.1.5 port=8080 fwd=0 weight=0 uthresh=0 lthresh=0}"},
		{"a negative weight is sent for the kernel to refuse (ERANGE)",
			Op{Kind: OpAddDestination, VS: v4, Dest: Destination{Addr: pod.Addr, Port: 8080, Weight: -1}},
			"cmd=5 version=1 " + svc4 + "} dest{addr=10.244.1.5 port=8080 fwd=0 weight=-1 uthresh=0 lthresh=0}"},
		{"deleting a destination sends the keys only",
			Op{Kind: OpDeleteDestination, VS: v4, Dest: pod},
			"cmd=7 version=1 " + svc4 + "} dest{addr=10.244.1.5 port=8080}"},
		{"a virtual server of another protocol is refused before it is sent",
			Op{Kind: OpAddService, VS: VirtualServer{Key: Key{Address: v4.Address, Protocol: "ICMP", Port: 80}, Scheduler: "rr"}},
			"error: add-service 10.96.0.10:80/ICMP rr flags=0x0 timeout=0: virtual server not one IPVS can hold"},
		{"a destination without an address is refused before it is sent",
			Op{Kind: OpAddDestination, VS: v4},
			"error: add-destination 10.96.0.10:80/TCP invalid AddrPort weight=0: invalid destination address"},
		{"an unknown op kind is refused",
			Op{Kind: 42, VS: v4},
			"error: op-42 10.96.0.10:80/TCP invalid AddrPort weight=0: unknown op kind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, err := encodeOp(tc.op)
			got := ""
			if err != nil {
				got = "error: " + err.Error()
			} else {
				got = renderRequest(t, body)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if err != nil {
				return
			}
			if want, err := encodeOpByAttributeEncoder(tc.op); err != nil || !bytes.Equal(body, want) {
				t.Errorf("not AttributeEncoder's bytes (%v):\n got %x\nwant %x", err, body, want)
			}
			before := []byte{1, 2, 3, 4, 5}
			if after, _ := appendOp(before, tc.op); !bytes.Equal(after[:5], before) || !bytes.Equal(after[5:], body) {
				t.Errorf("appended after another request: %x, want %x then %x", after, before, body)
			}
		})
	}
}

// ack is the kernel's answer to request seq: an NLMSG_ERROR holding
// errno (0 for an acknowledgement) and the request's header.
func ack(seq uint32, errno syscall.Errno) []byte {
	data := binary.NativeEndian.AppendUint32(nil, uint32(-int32(errno)))
	data = append(data, make([]byte, unix.NLMSG_HDRLEN)...)
	return nlsock.AppendMessage(nil, unix.NLMSG_ERROR, 0, seq, data)
}

// TestReadAcks: each answer is matched to its request by sequence
// number; the batch is answered when the last request's acknowledgement
// comes; answers to other requests are skipped.
func TestReadAcks(t *testing.T) {
	for _, tc := range []struct {
		name     string
		reads    [][]byte
		want     string
		wantDone bool
	}{
		{"a batch that succeeds is answered by its last request's acknowledgement",
			[][]byte{ack(104, 0)}, "ok ok ok ok ok", true},
		{"a failure in the middle is that request's, the others stand",
			[][]byte{ack(102, syscall.EEXIST), ack(104, 0)}, "ok ok EEXIST ok ok", true},
		{"failures and a failing last request, in one read or several",
			[][]byte{slices.Concat(ack(100, syscall.ENOENT), ack(101, syscall.ESRCH)), ack(104, syscall.ESRCH)}, "ENOENT ESRCH ok ok ESRCH", true},
		{"answers to an earlier batch are skipped",
			[][]byte{ack(99, syscall.EEXIST), slices.Concat(ack(7, 0), ack(104, 0))}, "ok ok ok ok ok", true},
		{"without the last request's answer the batch is not answered yet",
			[][]byte{ack(103, syscall.EEXIST)}, "ok ok ok EEXIST ok", false},
		{"a message other than an error is skipped",
			[][]byte{nlsock.AppendMessage(nil, unix.NLMSG_NOOP, 0, 104, nil)}, "ok ok ok ok ok", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := make([]error, 5)
			done := false
			for _, r := range tc.reads {
				d, err := readAcks(r, 100, errs)
				if err != nil {
					t.Fatal(err)
				}
				done = done || d
			}
			if g := errnos.Names(errs); g != tc.want || done != tc.wantDone {
				t.Errorf("got %q done=%v, want %q done=%v", g, done, tc.want, tc.wantDone)
			}
		})
	}
}

// TestReadAcksMalformed: a truncated answer is an error, not a panic.
func TestReadAcksMalformed(t *testing.T) {
	good := ack(100, syscall.EEXIST)
	for _, b := range [][]byte{good[:10], good[:unix.NLMSG_HDRLEN+2], append(binary.NativeEndian.AppendUint32(nil, 1000), good[4:]...)} {
		if _, err := readAcks(b, 100, make([]error, 1)); err == nil {
			t.Errorf("readAcks(%x): no error", b)
		}
	}
}

// TestSplitBatches: a batch holds as many messages as both limits allow,
// in order; a message over the byte limit goes alone.
func TestSplitBatches(t *testing.T) {
	for _, tc := range []struct {
		name             string
		sizes            []int
		maxOps, maxBytes int
		want             []int
	}{
		{"nothing to send, no batch", nil, 4, 100, nil},
		{"all in one batch", []int{10, 10, 10}, 4, 100, []int{3}},
		{"the count limit ends a batch", []int{10, 10, 10, 10, 10}, 2, 100, []int{2, 4, 5}},
		{"the byte limit ends a batch before it is passed", []int{40, 40, 40, 10}, 10, 100, []int{2, 4}},
		{"exactly the byte limit fits", []int{50, 50, 50}, 10, 100, []int{2, 3}},
		{"a message over the byte limit goes alone", []int{10, 200, 10}, 10, 100, []int{1, 2, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, splitBatches(tc.sizes, tc.maxOps, tc.maxBytes)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzReadAcks: no read of the socket panics the acknowledgement reader,
// whatever the batch's size and first sequence number.
func FuzzReadAcks(f *testing.F) {
	f.Add(ack(104, 0), uint32(100), uint8(5))
	f.Add(ack(102, syscall.EEXIST), uint32(100), uint8(5))
	f.Add([]byte{}, uint32(0), uint8(0))
	f.Fuzz(func(t *testing.T, b []byte, first uint32, n uint8) {
		_, _ = readAcks(b, first, make([]error, n))
	})
}

// encodeOpByAttributeEncoder is encodeOp as mdlayher/netlink's
// AttributeEncoder makes it: the oracle of appendOp's bytes.
func encodeOpByAttributeEncoder(o Op) ([]byte, error) {
	k := o.VS.Key
	proto, _ := k.Protocol.Number()
	ae := netlink.NewAttributeEncoder()
	ae.Nested(ipvsCmdAttrService, func(nae *netlink.AttributeEncoder) error {
		nae.Uint16(ipvsSvcAttrAF, family(k.Address))
		nae.Uint16(ipvsSvcAttrProtocol, uint16(proto))
		nae.Bytes(ipvsSvcAttrAddr, k.Address.AsSlice())
		nae.Bytes(ipvsSvcAttrPort, binary.BigEndian.AppendUint16(nil, k.Port))
		if o.Kind == OpAddService || o.Kind == OpUpdateService {
			nae.String(ipvsSvcAttrSchedName, o.VS.Scheduler)
			flags := binary.NativeEndian.AppendUint32(nil, o.VS.Flags)
			nae.Bytes(ipvsSvcAttrFlags, binary.NativeEndian.AppendUint32(flags, 0xffffffff))
			nae.Uint32(ipvsSvcAttrTimeout, o.VS.Timeout)
			nae.Uint32(ipvsSvcAttrNetmask, netmask(k))
		}
		return nil
	})
	if o.Kind >= OpAddDestination {
		d := o.Dest
		ae.Nested(ipvsCmdAttrDest, func(nae *netlink.AttributeEncoder) error {
			nae.Bytes(ipvsDestAttrAddr, d.Addr.AsSlice())
			nae.Bytes(ipvsDestAttrPort, binary.BigEndian.AppendUint16(nil, d.Port))
			if o.Kind != OpDeleteDestination {
				nae.Uint32(ipvsDestAttrFwdMethod, uint32(d.Forward)&fwdMethodMask)
				nae.Uint32(ipvsDestAttrWeight, uint32(d.Weight))
				nae.Uint32(ipvsDestAttrUThresh, 0)
				nae.Uint32(ipvsDestAttrLThresh, 0)
			}
			return nil
		})
	}
	attrs, err := ae.Encode()
	return append(genlHeader(opCommands[o.Kind]), attrs...), err
}

// BenchmarkEncodeWrite4096 encodes a Write of a cold start: 4,096
// destination adds, appended to one buffer as the Linux Write does, and
// by AttributeEncoder one request at a time, as they were.
func BenchmarkEncodeWrite4096(b *testing.B) {
	vs := VirtualServer{Key: key("10.96.0.10:80/TCP"), Scheduler: "rr"}
	ops := make([]Op, 4096)
	for i := range ops {
		ops[i] = Op{Kind: OpAddDestination, VS: vs, Dest: Destination{Addr: netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), byte(i)}),
			Port: 8080, Weight: 1, Forward: ForwardMasq}}
	}
	b.Run("appendOp", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf := make([]byte, 0, len(ops)*opBodyBytes)
			for _, o := range ops {
				buf, _ = appendOp(buf, o)
			}
		}
	})
	b.Run("AttributeEncoder", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, o := range ops {
				_, _ = encodeOpByAttributeEncoder(o)
			}
		}
	})
}
