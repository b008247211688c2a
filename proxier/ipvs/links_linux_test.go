package ipvs

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlfamily"
)

// TestLinksOpenOnlyRouteNetlink: the dummy interface's handle opens a
// NETLINK_ROUTE socket and no other family (XFRM's needs xfrm_user, which
// a minimal node may not be able to load; kube-proxy does not need it).
func TestLinksOpenOnlyRouteNetlink(t *testing.T) {
	before, err := nlfamily.Open()
	if err != nil {
		t.Skipf("cannot list netlink sockets: %v", err)
	}
	l, err := newNetlinkLinks()
	if err != nil {
		t.Fatalf("newNetlinkLinks: %v", err)
	}
	defer l.Close()
	after, err := nlfamily.Open()
	if err != nil {
		t.Fatal(err)
	}
	for proto, n := range after {
		want := before[proto]
		if proto == unix.NETLINK_ROUTE {
			want++
		}
		if n != want {
			t.Errorf("%s sockets: %d after opening the handle, want %d", nlfamily.Name(proto), n, want)
		}
	}
}
