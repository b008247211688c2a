package ipvsnl

import (
	"errors"
	"strings"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlsock"
)

// TestReceiveLeavesTheSocketReadyForTheNextRequest: whatever fails while
// an answer is read, the reader reads it to its end (the kernel refuses
// a new dump while an old one is unread), and a complete answer leaves
// what follows it on the socket. A datagram socket pair stands in for
// the kernel: each write is one read's worth, as a netlink socket
// returns a dump's pieces.
func TestReceiveLeavesTheSocketReadyForTheNextRequest(t *testing.T) {
	const ipvs, seq = 0x20, 7
	part := func(data string) []byte { return nlsock.AppendMessage(nil, ipvs, unix.NLM_F_MULTI, seq, []byte(data)) }
	done := nlsock.AppendMessage(nil, unix.NLMSG_DONE, unix.NLM_F_MULTI, seq, errnoData(0))
	errDecode := errors.New("a destination that does not decode")
	for _, tc := range []struct {
		name     string
		buffer   int
		reads    [][]byte
		decode   error // what each returns
		wantErr  string
		wantEach int // calls of each
		wantLeft int // reads left on the socket
	}{
		{
			name:     "a complete answer leaves the next request's answer unread",
			reads:    [][]byte{part("a"), done, nlsock.AppendMessage(nil, ipvs, 0, seq+1, []byte("next"))},
			wantEach: 1, wantLeft: 1,
		},
		{
			name:  "a decode failure still reads the dump to its end",
			reads: [][]byte{part("a"), part("b"), part("c"), done}, decode: errDecode,
			wantErr: errDecode.Error(), wantEach: 1,
		},
		{
			name:    "a malformed read drops what the socket holds",
			reads:   [][]byte{{1, 2, 3}, part("b"), done},
			wantErr: "shorter than a message header",
		},
		{
			name:   "a read longer than the buffer is an error, and the rest is dropped",
			buffer: 64, reads: [][]byte{part(strings.Repeat("x", 100)), part("b"), done},
			wantErr: "more than the 64-byte buffer",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatalf("socketpair: %v", err)
			}
			defer unix.Close(fds[1])
			size := genlReadBuffer
			if tc.buffer > 0 {
				size = tc.buffer
			}
			s := &nlSocket{fd: fds[0], seq: seq, buf: make([]byte, size)}
			defer s.Close()
			for _, r := range tc.reads {
				if _, err := unix.Write(fds[1], r); err != nil {
					t.Fatalf("write: %v", err)
				}
			}
			calls := 0
			err = s.receive(func([]netlink.Message) error { calls++; return tc.decode })
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("receive: %v, want no error", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("receive: %v, want an error with %q", err, tc.wantErr)
			}
			if calls != tc.wantEach {
				t.Errorf("each called %d times, want %d", calls, tc.wantEach)
			}
			left := 0
			for {
				if _, _, err := unix.Recvfrom(fds[0], make([]byte, 256), unix.MSG_DONTWAIT); err != nil {
					break
				}
				left++
			}
			if left != tc.wantLeft {
				t.Errorf("%d reads left on the socket, want %d", left, tc.wantLeft)
			}
		})
	}
}

// TestReceiveAfterAFailureLeavesTheKernelReadyForTheNextDump asks this
// machine's kernel for a real dump of more than one read (the policies
// of the generic netlink family ethtool, about 16 KB, which the kernel
// sends a fresh socket in pieces of at least a page, larger once the
// socket has read with a larger buffer) and fails its reading two
// ways: the first read's messages do not decode, and a buffer too
// short for a read. The next dump on the same socket must then be
// answered in full: the kernel answers EBUSY to a dump while an earlier
// one is unread.
func TestReceiveAfterAFailureLeavesTheKernelReadyForTheNextDump(t *testing.T) {
	ae := netlink.NewAttributeEncoder()
	ae.String(unix.CTRL_ATTR_FAMILY_NAME, "ethtool")
	attrs, err := ae.Encode()
	if err != nil {
		t.Fatal(err)
	}
	request := append([]byte{unix.CTRL_CMD_GETPOLICY, 1, 0, 0}, attrs...)
	policies := func(s *nlSocket, each func([]netlink.Message) error) error {
		return s.execute(unix.GENL_ID_CTRL, unix.NLM_F_DUMP, request, each)
	}
	count := func(s *nlSocket) (n, reads int, err error) {
		err = policies(s, func(msgs []netlink.Message) error { n += len(msgs); reads++; return nil })
		return n, reads, err
	}
	open := func() *nlSocket {
		s, err := openGenlSocket()
		if err != nil {
			t.Skipf("no generic netlink here: %v", err)
		}
		return s
	}
	s := open()
	want, reads, err := count(s)
	s.Close()
	if err != nil || want == 0 {
		t.Skipf("this kernel does not list ethtool's policies: %d, %v", want, err)
	}
	t.Logf("a fresh socket reads ethtool's %d policy messages in %d reads", want, reads)
	errDecode := errors.New("does not decode")
	for _, tc := range []struct {
		name   string
		buffer int
		each   func([]netlink.Message) error
	}{
		{name: "the first read does not decode", each: func([]netlink.Message) error { return errDecode }},
		{name: "a read longer than the buffer", buffer: 64, each: func([]netlink.Message) error { return nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := open()
			defer s.Close()
			buf := s.buf
			if tc.buffer > 0 {
				s.buf = make([]byte, tc.buffer)
			}
			if err := policies(s, tc.each); err == nil {
				t.Fatal("the failing read: no error")
			}
			s.buf = buf
			got, _, err := count(s)
			if err != nil || got != want {
				t.Errorf("the next dump listed %d policy messages (%v), want %d", got, err, want)
			}
		})
	}
}
