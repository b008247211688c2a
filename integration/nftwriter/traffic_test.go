//go:build integration

package nftwriter

import (
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/labnet"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// rejectPlan: 10.96.0.50:80 and [fd00:96::50]:80 have no destinations
// (Reject), 10.96.0.51:80 has none under a Local policy (Drop),
// 10.96.0.60:80 is a normal service, 10.96.0.70:80 a load balancer open
// to 10.244.1.0/24 only, 10.96.0.71:80 one open to 10.244.1.0/24 and to
// the node (a range holds its IP: NodeInSourceRanges). None has an IPVS
// service: the table alone acts.
func rejectPlan() policy.Plan {
	vs := func(svc, addr string, port uint16) policy.VirtualServer {
		ns, name, _ := strings.Cut(svc, "/")
		return policy.VirtualServer{Service: policy.ServiceKey{Namespace: ns, Name: name}, Kind: policy.KindClusterIP, Address: a(addr), Port: port,
			Protocol: policy.ProtocolTCP, Masquerade: policy.MasqueradeNever}
	}
	rej, rej6, drop, full, lb, lbNode := vs("t/rej", "10.96.0.50", 80), vs("t/rej", "fd00:96::50", 80), vs("t/drop", "10.96.0.51", 80),
		vs("t/full", "10.96.0.60", 80), vs("t/lb", "10.96.0.70", 80), vs("t/lb-node", "10.96.0.71", 80)
	rej.WhenEmpty, rej6.WhenEmpty, drop.WhenEmpty = policy.EmptyReject, policy.EmptyReject, policy.EmptyDrop
	full.Destinations = []policy.Destination{dest("10.244.9.9", 80)}
	lb.Kind, lb.SourceRanges = policy.KindLoadBalancer, []netip.Prefix{p("10.244.1.0/24")}
	lb.Destinations = []policy.Destination{dest("10.244.9.9", 80)}
	lbNode.Kind, lbNode.SourceRanges, lbNode.NodeInSourceRanges = policy.KindLoadBalancer, []netip.Prefix{p("10.244.1.0/24")}, true
	lbNode.Destinations = []policy.Destination{dest("10.244.9.9", 80)}
	vss := []policy.VirtualServer{rej, rej6, drop, full, lb, lbNode}
	policy.SortVirtualServers(vss)
	return policy.Plan{Node: "node-a", VirtualServers: vss}
}

// TestRejectTraffic sends real TCP connections from the host and from a
// pod namespace to addresses on a dummy interface, each with a listener,
// before and after the table is programmed.
func TestRejectTraffic(t *testing.T) {
	labnet.LinkUp(t, "lo")
	// 10.244.1.250 is a host address inside the load balancers' range.
	labnet.Dummy(t, "kube-ipvs0", "10.96.0.50", "10.96.0.51", "10.96.0.60", "10.96.0.70", "10.96.0.71", "fd00:96::50", "10.244.1.250")
	pod1, pod2 := labnet.NewPod(t, "pod1", 1), labnet.NewPod(t, "pod2", 2)
	for _, addr := range []string{"10.96.0.50:80", "10.96.0.51:80", "10.96.0.60:80", "10.96.0.70:80", "10.96.0.71:80", "[fd00:96::50]:80", ":8081"} {
		labnet.Echo{Name: "host"}.ServeTCP(t, nil, "tcp", addr)
	}

	// Without the table every listener answers.
	for _, addr := range []string{"10.96.0.50:80", "10.96.0.51:80", "10.96.0.60:8081", "10.96.0.70:80", "10.96.0.71:80"} {
		for _, c := range []*labnet.Pod{nil, pod1, pod2} {
			if _, err := c.Connect(addr, 2*time.Second); err != nil {
				t.Fatalf("baseline without table: dial %s from %s: %v", addr, who(c, pod1), err)
			}
		}
	}

	w := newWriter(t)
	if err := w.Resync(rejectPlan()); err != nil {
		t.Fatalf("Resync: %v", err)
	}
	refused := func(t *testing.T, c *labnet.Pod, addr string) {
		t.Helper()
		d, err := c.Connect(addr, 5*time.Second)
		if !labnet.IsRefused(err) || d >= time.Second {
			t.Errorf("dial %s from %s: err %v after %v, want ECONNREFUSED in < 1s", addr, who(c, pod1), err, d)
		} else {
			t.Logf("dial %s from %s: refused after %v", addr, who(c, pod1), d.Round(time.Microsecond))
		}
	}
	times := func(t *testing.T, c *labnet.Pod, addr string) {
		t.Helper()
		if _, err := c.Connect(addr, time.Second); !labnet.IsTimeout(err) {
			t.Errorf("dial %s from %s: %v, want a timeout (dropped)", addr, who(c, pod1), err)
		}
	}
	connects := func(t *testing.T, c *labnet.Pod, addr string) {
		t.Helper()
		if _, err := c.Connect(addr, 2*time.Second); err != nil {
			t.Errorf("dial %s from %s: %v, want connected", addr, who(c, pod1), err)
		}
	}
	t.Run("empty service with Reject is refused at once", func(t *testing.T) {
		refused(t, nil, "10.96.0.50:80")
		refused(t, pod1, "10.96.0.50:80")
		refused(t, nil, "[fd00:96::50]:80")
	})
	t.Run("empty service with Drop times out", func(t *testing.T) {
		times(t, nil, "10.96.0.51:80")
		times(t, pod1, "10.96.0.51:80")
	})
	t.Run("service IP on a port that is no service port is refused", func(t *testing.T) {
		refused(t, nil, "10.96.0.60:8081")
		refused(t, pod1, "10.96.0.60:8081")
	})
	t.Run("service port passes the host filter", func(t *testing.T) {
		connects(t, nil, "10.96.0.60:80")
		connects(t, pod1, "10.96.0.60:80")
	})
	t.Run("load balancer source ranges", func(t *testing.T) {
		connects(t, pod1, "10.96.0.70:80") // 10.244.1.2 is in 10.244.1.0/24
		times(t, pod2, "10.96.0.70:80")    // 10.244.2.2 is not
		connects(t, pod1, "10.96.0.71:80")
		times(t, pod2, "10.96.0.71:80")
	})
	// The host's connection comes from the load balancer's address on
	// kube-ipvs0, and leaves through OUTPUT only: filter-output holds it
	// to the ranges, which allow that address when they hold the node.
	t.Run("load balancer source ranges hold the host's own connections", func(t *testing.T) {
		times(t, nil, "10.96.0.70:80")
		connects(t, nil, "10.96.0.71:80")
	})
	// From another of the host's addresses, that address is checked.
	t.Run("load balancer source ranges check a host connection from another address by it", func(t *testing.T) {
		if err := dialFrom("10.96.0.60", "10.96.0.71:80"); !labnet.IsTimeout(err) {
			t.Errorf("dial 10.96.0.71:80 from the host's 10.96.0.60: %v, want a timeout (dropped)", err)
		}
		if err := dialFrom("10.244.1.250", "10.96.0.70:80"); err != nil {
			t.Errorf("dial 10.96.0.70:80 from the host's 10.244.1.250: %v, want connected", err)
		}
	})
	t.Run("ping to a service IP still works", func(t *testing.T) {
		if _, err := exec.LookPath("ping"); err != nil {
			t.Skip("no ping in this VM")
		}
		if out, err := exec.Command("ping", "-c", "1", "-W", "2", "10.96.0.60").CombinedOutput(); err != nil {
			t.Errorf("ping 10.96.0.60: %v\n%s", err, out)
		}
	})

	// Cleanup gives every listener back.
	if err := w.Cleanup(); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	connects(t, pod1, "10.96.0.50:80")
	connects(t, pod2, "10.96.0.70:80")
	connects(t, nil, "10.96.0.70:80")
}

// dialFrom connects from the host's address src to addr.
func dialFrom(src, addr string) error {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: time.Second}
	c, err := d.Dial("tcp", addr)
	if err == nil {
		c.Close()
	}
	return err
}

func who(c, pod1 *labnet.Pod) string {
	switch c {
	case nil:
		return "host"
	case pod1:
		return "pod 10.244.1.2"
	}
	return "pod " + c.IP.String()
}
