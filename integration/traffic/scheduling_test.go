//go:build integration

package traffic

import (
	"fmt"
	"net"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// TestHairpinPodReachesItselfThroughItsService: a pod that is its own
// service's only endpoint reaches itself through the ClusterIP (the data
// plane must masquerade it: a packet from the pod's own address would be
// dropped as a martian), and with a second endpoint both answer it.
func TestHairpinPodReachesItselfThroughItsService(t *testing.T) {
	l := newLab(t)
	alone := service("hairpin", []string{"10.96.6.1"})
	l.setService(alone, l.ep("pod-a1"))
	pair := service("hairpin-pair", []string{"10.96.6.2"})
	l.setService(pair, l.ep("pod-a1"), l.ep("pod-b1"))
	l.resync()
	a1 := l.pod("pod-a1")
	t.Run("only endpoint", func(t *testing.T) {
		l.expectOnly(t, a1, "10.96.6.1:80", TCP, nConns, "pod-a1")
		l.expectOnly(t, a1, "10.96.6.1:53", UDP, nConns, "pod-a1")
	})
	t.Run("one of two endpoints", func(t *testing.T) {
		l.expectOnly(t, a1, "10.96.6.2:80", TCP, nConns, "pod-a1", "pod-b1")
		l.expectOnly(t, a1, "10.96.6.2:53", UDP, nConns, "pod-a1", "pod-b1")
	})
}

// TestSessionAffinityKeepsAClientOnOneBackend: with ClientIP affinity
// (IPVS persistence), every fresh connection of one client goes to the
// same backend.
func TestSessionAffinityKeepsAClientOnOneBackend(t *testing.T) {
	l := newLab(t)
	const vip = "10.96.7.1"
	s := service("sticky", []string{vip}, func(s *policy.Service) { s.PersistenceTimeoutSeconds = 10800 })
	l.setService(s, l.ep("pod-a1"), l.ep("pod-a2"), l.ep("pod-b1"), l.ep("pod-b2"), l.ep("pod-c1"))
	l.resync()
	for _, from := range []*host{l.pod("pod-a3"), l.client} {
		for _, proto := range []Proto{TCP, UDP} {
			port := map[Proto]string{TCP: "80", UDP: "53"}[proto]
			got, err := l.Count(from, net.JoinHostPort(vip, port), proto, nConns)
			if err != nil {
				t.Fatalf("%v (so far %s)", err, formatCounts(got))
			}
			if len(got) != 1 {
				t.Errorf("%s from %s over %d connections: %s, want one backend", proto, from, nConns, formatCounts(got))
			}
		}
	}
}

// TestWeightedSpillMatchesPlanWeights: PreferLocal with an
// overprovisioning factor spills part of the traffic to the next tier
// with unequal weights, so the plan asks for wrr. wrr is deterministic:
// over a whole number of its cycles, each backend gets exactly its
// weight's share of the connections.
func TestWeightedSpillMatchesPlanWeights(t *testing.T) {
	l := newLab(t)
	const vip = "10.96.8.1"
	// Local tier: 1 ready of 2 → health min(1, 1.5·1/2) = 0.75; the zone
	// tier (pod-b1) takes the remaining 0.25: weights 7500:2500 = 3:1.
	s := service("spill", []string{vip},
		annotate(policy.AnnotationTrafficPolicy, string(policy.PolicyPreferLocal)),
		annotate(policy.AnnotationOverprovision, "1.5"))
	l.setService(s, l.ep("pod-a1"), l.ep("pod-a2", notReady), l.ep("pod-b1"), l.ep("pod-c1"))
	l.resync()
	client := l.pod("pod-a3")
	for _, tc := range []struct {
		proto policy.Protocol
		p     Proto
		port  string
	}{{policy.ProtocolTCP, TCP, "80"}, {policy.ProtocolUDP, UDP, "53"}} {
		vs := l.virtualServer(s.Key, policy.KindClusterIP, tc.proto, true)
		// The shares the spill rule implies, independent of the plan
		// under test: pod-a1 0.75, pod-b1 0.25 (wrr: 3 of every 4
		// connections, 1 of every 4), pod-c1 (zone-b, beyond the
		// spill) none; over 32 connections, 24 and 8.
		const n = 32
		want := map[string]int{"pod-a1": n * 3 / 4, "pod-b1": n / 4}
		t.Run(string(tc.proto), func(t *testing.T) {
			if vs.Scheduler != "wrr" {
				t.Fatalf("plan: scheduler %q, want wrr (reason %q)", vs.Scheduler, vs.Reason)
			}
			weights := map[string]int32{}
			for _, d := range vs.Destinations {
				weights[l.podByAddr(d.Address.String())] = d.Weight
			}
			if fmt.Sprint(weights) != fmt.Sprint(map[string]int32{"pod-a1": 7500, "pod-b1": 2500}) {
				t.Errorf("plan weights %v, want pod-a1 7500 and pod-b1 2500 (0.75 and 0.25 of 10000)", weights)
			}
			if got, _ := expectedShares(l, vs, n); formatCounts(got) != formatCounts(want) {
				t.Errorf("the plan's weights imply %s over %d connections, the rule %s", formatCounts(got), n, formatCounts(want))
			}
			t.Logf("plan %v → over %d connections want %s", vs.Destinations, n, formatCounts(want))
			got, err := l.Count(client, net.JoinHostPort(vip, tc.port), tc.p, n)
			if err != nil {
				t.Fatalf("%v (so far %s)", err, formatCounts(got))
			}
			if formatCounts(got) != formatCounts(want) {
				t.Errorf("got %s, want %s", formatCounts(got), formatCounts(want))
			}
		})
	}
}

// expectedShares returns the exact per-backend counts wrr gives over n
// connections, n being the smallest whole number of wrr cycles (weight
// sum over the weights' gcd) that is at least atLeast.
func expectedShares(l *lab, vs policy.VirtualServer, atLeast int) (map[string]int, int) {
	g, sum := int32(0), int32(0)
	for _, d := range vs.Destinations {
		g, sum = gcd(g, d.Weight), sum+d.Weight
	}
	cycle := int(sum / g)
	n := (atLeast + cycle - 1) / cycle * cycle
	want := map[string]int{}
	for _, d := range vs.Destinations {
		want[l.podByAddr(d.Address.String())] = n / cycle * int(d.Weight/g)
	}
	return want, n
}

func gcd(a, b int32) int32 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// podByAddr names the pod owning an address.
func (l *lab) podByAddr(addr string) string {
	for name, p := range l.pods {
		if p.v4.String() == addr || p.v6.String() == addr {
			return name
		}
	}
	l.t.Fatalf("no pod has address %s", addr)
	return ""
}

// TestIPVSSchedulerMHSpreadsOneClientOverBackends: with --ipvs-scheduler=mh
// every virtual server hashes on the source port too (mh-port), as
// kube-proxy sets it, so that fresh connections from one client address
// (clients behind one SNAT address) spread over the backends; without
// the flag mh hashes the address alone and they all land on one.
func TestIPVSSchedulerMHSpreadsOneClientOverBackends(t *testing.T) {
	l := newLab(t, func(c *policy.Config) { c.Scheduler = "mh" })
	const vip = "10.96.7.2"
	s := service("maglev", []string{vip})
	l.setService(s, l.ep("pod-a1"), l.ep("pod-a2"), l.ep("pod-b1"), l.ep("pod-b2"), l.ep("pod-c1"))
	l.resync()
	for _, proto := range []Proto{TCP, UDP} {
		port := map[Proto]string{TCP: "80", UDP: "53"}[proto]
		got, err := l.Count(l.client, net.JoinHostPort(vip, port), proto, nConns)
		if err != nil {
			t.Fatalf("%v (so far %s)", err, formatCounts(got))
		}
		t.Logf("%s from %s over %d connections: %s", proto, l.client, nConns, formatCounts(got))
		if len(got) < 2 {
			t.Errorf("%s from %s over %d connections: %s, want them spread over several backends", proto, l.client, nConns, formatCounts(got))
		}
	}
}
