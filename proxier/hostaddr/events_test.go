package hostaddr

import (
	"encoding/binary"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// event is one netlink message of type typ whose body is an ifaddrmsg
// for link index, followed by extra bytes of attributes.
func event(typ uint16, index uint32, extra int) []byte {
	body := make([]byte, unix.SizeofIfAddrmsg+extra)
	binary.NativeEndian.PutUint32(body[4:8], index)
	b := binary.NativeEndian.AppendUint32(nil, uint32(unix.NLMSG_HDRLEN+len(body)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, make([]byte, unix.NLMSG_HDRLEN-6)...)
	b = append(b, body...)
	for len(b)%unix.NLMSG_ALIGNTO != 0 {
		b = append(b, 0)
	}
	return b
}

func TestAppendEventLinksRules(t *testing.T) {
	for _, tc := range []struct {
		name    string
		read    []byte
		want    []int
		wantErr string
	}{
		{name: "an added and a removed address, each its link's", read: append(event(unix.RTM_NEWADDR, 7, 8), event(unix.RTM_DELADDR, 9, 3)...), want: []int{7, 9}},
		{name: "a message of another type is skipped", read: append(event(unix.RTM_NEWLINK, 3, 0), event(unix.RTM_NEWADDR, 4, 0)...), want: []int{4}},
		{name: "nothing read, no link", want: nil},
		{name: "a message longer than the read", read: event(unix.RTM_NEWADDR, 7, 8)[:20], wantErr: "a message of 32 bytes in 20"},
		{name: "an address event shorter than its ifaddrmsg", read: event(unix.RTM_NEWADDR, 7, 0)[:unix.NLMSG_HDRLEN], wantErr: "a message of 24 bytes in 16"},
		{name: "bytes shorter than a header", read: []byte{1, 2, 3}, wantErr: "shorter than a message header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := appendEventLinks(nil, tc.read)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("appendEventLinks: %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("appendEventLinks: %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// FuzzAppendEventLinks: any read decodes to links or an error, never a
// panic, and never more links than messages fit in it.
func FuzzAppendEventLinks(f *testing.F) {
	f.Add(append(event(unix.RTM_NEWADDR, 7, 8), event(unix.RTM_DELADDR, 9, 3)...))
	f.Add(event(unix.RTM_NEWLINK, 3, 0))
	f.Add([]byte{16, 0, 0, 0, 20, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := appendEventLinks(nil, b)
		if err == nil && len(got) > len(b)/(unix.NLMSG_HDRLEN+unix.SizeofIfAddrmsg) {
			t.Errorf("%d links from %d bytes", len(got), len(b))
		}
	})
}
