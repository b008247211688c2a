package ipvsnl

import (
	"net/netip"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// FuzzParseAddrMessage: any address message decodes to an error or, when
// it is an address, to a valid prefix; never a panic.
func FuzzParseAddrMessage(f *testing.F) {
	for _, p := range []string{"10.96.0.1/32", "fd00::1/128"} {
		r, err := addrRequest(true, 7, netip.MustParsePrefix(p))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(r.body)
	}
	f.Add([]byte{unix.AF_INET, 32, 0, 0, 7, 0, 0, 0, 5, 0, unix.IFA_LOCAL, 0, 1, 0, 0, 0})    // a short address
	f.Add([]byte{unix.AF_INET, 33, 0, 0, 7, 0, 0, 0, 8, 0, unix.IFA_ADDRESS, 0, 10, 0, 0, 1}) // too long a prefix
	f.Fuzz(func(t *testing.T, data []byte) {
		m := netlink.Message{Header: netlink.Header{Type: unix.RTM_NEWADDR}, Data: data}
		_, p, ok, err := parseAddrMessage(m)
		if err == nil && ok && !p.IsValid() {
			t.Errorf("an invalid prefix %v without an error", p)
		}
	})
}
