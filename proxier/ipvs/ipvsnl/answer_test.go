package ipvsnl

import (
	"encoding/binary"
	"errors"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlsock"
)

// errnoData is an NLMSG_ERROR's or NLMSG_DONE's body: the negated errno
// (then, for an error, the request's header, left out here).
func errnoData(e syscall.Errno) []byte {
	return binary.NativeEndian.AppendUint32(nil, uint32(-int32(e)))
}

func concat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func TestSplitAnswerEndsWhereTheKernelSaysTheAnswerEnds(t *testing.T) {
	const ipvs, seq = 0x20, 7
	part := func(data string) []byte { return nlsock.AppendMessage(nil, ipvs, unix.NLM_F_MULTI, seq, []byte(data)) }
	done := nlsock.AppendMessage(nil, unix.NLMSG_DONE, unix.NLM_F_MULTI, seq, errnoData(0))
	for _, tc := range []struct {
		name     string
		read     []byte
		wantData []string
		wantDone bool
		wantErr  error // an errno, or any error when errAny
		errAny   bool
	}{
		{name: "a dump's parts and its DONE in one read", read: concat(part("a"), part("bcde"), done),
			wantData: []string{"a", "bcde"}, wantDone: true},
		{name: "a read of parts without DONE asks for another read", read: concat(part("a"), part("b")),
			wantData: []string{"a", "b"}},
		{name: "a DONE alone ends an empty dump", read: done, wantDone: true},
		{name: "a message outside a multi-part answer is the whole answer",
			read: nlsock.AppendMessage(nil, ipvs, 0, seq, []byte("family")), wantData: []string{"family"}, wantDone: true},
		{name: "an error message is its errno",
			read: nlsock.AppendMessage(nil, unix.NLMSG_ERROR, 0, seq, errnoData(syscall.ESRCH)), wantErr: syscall.ESRCH},
		{name: "an acknowledgement ends the answer",
			read: nlsock.AppendMessage(nil, unix.NLMSG_ERROR, 0, seq, errnoData(0)), wantDone: true},
		{name: "a DONE that carries an error is that error",
			read: concat(part("a"), nlsock.AppendMessage(nil, unix.NLMSG_DONE, unix.NLM_F_MULTI, seq, errnoData(syscall.EINTR))), wantErr: syscall.EINTR},
		{name: "messages of an earlier request are skipped",
			read:     concat(nlsock.AppendMessage(nil, ipvs, unix.NLM_F_MULTI, seq-1, []byte("old")), nlsock.AppendMessage(nil, unix.NLMSG_DONE, unix.NLM_F_MULTI, seq-1, errnoData(0)), part("new"), done),
			wantData: []string{"new"}, wantDone: true},
		{name: "a no-op is skipped", read: concat(nlsock.AppendMessage(nil, unix.NLMSG_NOOP, 0, seq, nil), part("a"), done),
			wantData: []string{"a"}, wantDone: true},
		{name: "an overrun is an error", read: nlsock.AppendMessage(nil, unix.NLMSG_OVERRUN, 0, seq, nil), errAny: true},
		{name: "a short header is an error", read: part("a")[:10], errAny: true},
		{name: "a length past the read is an error", read: part("abcdefgh")[:20], errAny: true},
		{name: "a length under a header's is an error", read: func() []byte {
			b := part("a")
			binary.NativeEndian.PutUint32(b[0:4], 8)
			return b
		}(), errAny: true},
		{name: "an error message without an errno is an error", read: nlsock.AppendMessage(nil, unix.NLMSG_ERROR, 0, seq, []byte{1}), errAny: true},
		{name: "a part marked interrupted makes the dump interrupted",
			read: concat(part("a"), nlsock.AppendMessage(nil, ipvs, unix.NLM_F_MULTI|unix.NLM_F_DUMP_INTR, seq, []byte("b")), done), wantErr: ErrDumpInterrupted},
		{name: "a DONE marked interrupted makes the dump interrupted",
			read: concat(part("a"), nlsock.AppendMessage(nil, unix.NLMSG_DONE, unix.NLM_F_MULTI|unix.NLM_F_DUMP_INTR, seq, errnoData(0))), wantErr: ErrDumpInterrupted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msgs, done, err := splitAnswer(nil, tc.read, seq)
			switch {
			case tc.errAny:
				if err == nil {
					t.Fatalf("got %d messages, done %v, no error; want an error", len(msgs), done)
				}
				return
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("error %v, want %v", err, tc.wantErr)
				}
				return
			case err != nil:
				t.Fatalf("error %v", err)
			}
			var got []string
			for _, m := range msgs {
				got = append(got, string(m.Data))
			}
			if done != tc.wantDone || len(got) != len(tc.wantData) {
				t.Fatalf("messages %q, done %v; want %q, done %v", got, done, tc.wantData, tc.wantDone)
			}
			for i := range got {
				if got[i] != tc.wantData[i] {
					t.Fatalf("messages %q, want %q", got, tc.wantData)
				}
			}
		})
	}
}

// FuzzSplitAnswer: whatever a read returns, splitting it never panics,
// and every message's data lies inside the read.
func FuzzSplitAnswer(f *testing.F) {
	f.Add(concat(nlsock.AppendMessage(nil, 0x20, unix.NLM_F_MULTI, 1, []byte("abc")), nlsock.AppendMessage(nil, unix.NLMSG_DONE, unix.NLM_F_MULTI, 1, errnoData(0))))
	f.Add(nlsock.AppendMessage(nil, unix.NLMSG_ERROR, 0, 1, errnoData(syscall.ENOENT)))
	f.Add(nlsock.AppendMessage(nil, 0x20, 0, 2, nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, _, err := splitAnswer(nil, b, 1)
		if err != nil {
			return
		}
		total := 0
		for _, m := range msgs {
			total += unix.NLMSG_HDRLEN + len(m.Data)
			if int(m.Header.Length) != unix.NLMSG_HDRLEN+len(m.Data) {
				t.Errorf("message length %d with %d bytes of data", m.Header.Length, len(m.Data))
			}
		}
		if total > len(b) {
			t.Errorf("messages of %d bytes from a read of %d", total, len(b))
		}
	})
}
