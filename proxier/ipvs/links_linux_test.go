package ipvs

import (
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlfamily"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testsupport/errnos"
)

// TestLinksOpenOnlyRouteNetlink: the dummy interface's handle opens
// NETLINK_ROUTE sockets (its own and the address batches') and no other
// family (XFRM's needs xfrm_user, which
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
			want += 2
		}
		if n != want {
			t.Errorf("%s sockets: %d after opening the handle, want %d", nlfamily.Name(proto), n, want)
		}
	}
}

// inFreshNetns runs fn on a thread of its own in a new network namespace
// (the test needs root), which ends with it.
func inFreshNetns(t *testing.T, fn func()) {
	t.Helper()
	done := make(chan bool, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		ns, err := netns.New()
		if err != nil {
			done <- false
			return
		}
		defer ns.Close()
		defer func() { done <- true }()
		fn()
	}()
	if !<-done {
		t.Skip("cannot make a network namespace here (needs root)")
	}
}

// linksWith opens Links in the current namespace and makes the named
// links with mkLink: dummies, or veths where the kernel has no dummy
// links (the host's); addresses behave alike on both. It reports the
// errors and false when it cannot.
func linksWith(t *testing.T, names ...string) (l *netlinkLinks, mkLink func(string) error, ok bool) {
	l, err := newNetlinkLinks()
	if err != nil {
		t.Error(err)
		return nil, nil, false
	}
	mkLink = func(name string) error {
		if err := l.AddDummy(name); !errors.Is(err, unix.EOPNOTSUPP) {
			return err
		}
		return l.h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "-peer"})
	}
	for _, name := range names {
		if err := mkLink(name); err != nil {
			t.Error(err)
			l.Close()
			return nil, nil, false
		}
	}
	return l, mkLink, true
}

// TestAddrsInBatchesAsOneByOne holds the batched address path to the
// host's kernel: the addresses AddAddrs makes in a few sendmsgs are those
// AddAddr (vishvananda/netlink) makes one request each, every answer is
// its own address's (EEXIST, EADDRNOTAVAIL), and a link deleted and made
// again under the cached name is found again.
func TestAddrsInBatchesAsOneByOne(t *testing.T) {
	inFreshNetns(t, func() {
		l, mkLink, ok := linksWith(t, "batched", "onebyone")
		if !ok {
			return
		}
		defer l.Close()
		var ps []netip.Prefix
		for i := range 3000 { // several batches
			ps = append(ps, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}), 32))
		}
		ps = append(ps, netip.MustParsePrefix("fd00:96::1/128"), netip.MustParsePrefix("fd00:96::2/128"))
		if errs := l.AddAddrs("batched", ps); slices.ContainsFunc(errs, func(e error) bool { return e != nil }) {
			t.Errorf("AddAddrs: %v", errors.Join(errs...))
		}
		for _, p := range ps {
			if err := l.AddAddr("onebyone", p); err != nil {
				t.Errorf("AddAddr %s: %v", p, err)
			}
		}
		dump := func(name string) []string {
			lk, err := l.h.LinkByName(name)
			if err != nil {
				t.Error(err)
				return nil
			}
			addrs, err := l.h.AddrList(lk, netlink.FAMILY_ALL)
			if err != nil {
				t.Error(err)
			}
			var out []string
			for _, a := range addrs {
				if a.IP.IsLinkLocalUnicast() {
					continue
				}
				out = append(out, fmt.Sprintf("%s peer=%v bcast=%v scope=%d flags=%#x", a.IPNet, a.Peer, a.Broadcast, a.Scope, a.Flags))
			}
			slices.Sort(out)
			return out
		}
		batched, one := dump("batched"), dump("onebyone")
		if len(batched) != len(ps) {
			t.Errorf("batched: %d addresses on the link, want %d", len(batched), len(ps))
		}
		if diff := cmp.Diff(one, batched); diff != "" {
			t.Errorf("the batched addresses differ from those made one request each (-one +batched):\n%s", diff)
		}

		// Each answer is its own address's, in several batches.
		mixed := []netip.Prefix{ps[0], netip.MustParsePrefix("10.97.0.1/32"), ps[2999], netip.MustParsePrefix("fd00:97::1/128")}
		if got, want := errnos.Names(l.AddAddrs("batched", mixed)), "EEXIST ok EEXIST ok"; got != want {
			t.Errorf("AddAddrs answers %q, want %q", got, want)
		}
		gone := []netip.Prefix{netip.MustParsePrefix("10.98.0.1/32"), ps[1], netip.MustParsePrefix("fd00:98::1/128"), ps[3000]}
		if got, want := errnos.Names(l.DelAddrs("batched", gone)), "EADDRNOTAVAIL ok EADDRNOTAVAIL ok"; got != want {
			t.Errorf("DelAddrs answers %q, want %q", got, want)
		}

		// The cached link deleted behind the cache's back: the batch's
		// ENODEVs send it again to the link made again under the name,
		// and are the answers when there is none.
		deleteBehind := func() {
			if lk, err := l.h.LinkByName("batched"); err != nil {
				t.Error(err)
			} else if err := l.h.LinkDel(lk); err != nil {
				t.Error(err)
			}
		}
		deleteBehind()
		if err := mkLink("batched"); err != nil {
			t.Error(err)
		}
		if got, want := errnos.Names(l.AddAddrs("batched", ps[:2])), "ok ok"; got != want {
			t.Errorf("AddAddrs on the link made again answers %q, want %q", got, want)
		}
		deleteBehind()
		if got, want := errnos.Names(l.AddAddrs("batched", ps[:2])), "ENODEV ENODEV"; got != want {
			t.Errorf("AddAddrs on a deleted link answers %q, want %q", got, want)
		}
	})
}

// TestAddrsListsWhatAddrListLists holds Addrs's own dump to the host's
// kernel against vishvananda/netlink's AddrList: the same addresses of
// the link, over several reads of the dump, with a point-to-point
// address read as its local end, and none of another link's.
func TestAddrsListsWhatAddrListLists(t *testing.T) {
	inFreshNetns(t, func() {
		l, _, ok := linksWith(t, "mine", "other")
		if !ok {
			return
		}
		defer l.Close()
		var ps []netip.Prefix
		for i := range 2000 { // a dump of several reads
			ps = append(ps, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}), 32))
		}
		ps = append(ps, netip.MustParsePrefix("fd00:96::1/128"), netip.MustParsePrefix("192.168.7.1/24"))
		if errs := l.AddAddrs("mine", ps); slices.ContainsFunc(errs, func(e error) bool { return e != nil }) {
			t.Errorf("AddAddrs: %v", errors.Join(errs...))
		}
		if err := l.AddAddr("other", netip.MustParsePrefix("10.97.0.1/32")); err != nil {
			t.Error(err)
		}
		mine, err := l.h.LinkByName("mine")
		if err != nil {
			t.Error(err)
			return
		}
		peer := &netlink.Addr{IPNet: ipNet(netip.MustParsePrefix("10.98.0.1/32")), Peer: ipNet(netip.MustParsePrefix("10.98.0.2/32"))}
		if err := l.h.AddrAdd(mine, peer); err != nil {
			t.Error(err)
		}
		addrs, err := l.h.AddrList(mine, netlink.FAMILY_ALL)
		if err != nil {
			t.Error(err)
			return
		}
		var want []string
		for _, a := range addrs {
			if !a.IP.IsLinkLocalUnicast() {
				ones, _ := a.Mask.Size()
				want = append(want, netip.PrefixFrom(netip.MustParseAddr(a.IP.String()), ones).String())
			}
		}
		got, err := l.Addrs("mine")
		if err != nil {
			t.Error(err)
			return
		}
		var gotS []string
		for _, p := range got {
			gotS = append(gotS, p.String())
		}
		slices.Sort(want)
		slices.Sort(gotS)
		if len(want) != len(ps)+1 || !slices.Contains(want, "10.98.0.1/32") {
			t.Errorf("AddrList lists %d addresses (with the point-to-point one's local end?), want %d", len(want), len(ps)+1)
		}
		if diff := cmp.Diff(want, gotS); diff != "" {
			t.Errorf("Addrs differs from AddrList (-AddrList +Addrs):\n%s", diff)
		}
		// The check dumps the addresses every few seconds: a dump
		// refills the last one's list, allocating nothing per address
		// (a list made anew takes a dozen allocations at this size).
		if allocs := testing.AllocsPerRun(5, func() { _, _ = l.Addrs("mine") }); allocs > 2 {
			t.Errorf("a dump of %d addresses allocates %.0f times, want the last dump's list refilled", len(ps)+1, allocs)
		}
	})
}
