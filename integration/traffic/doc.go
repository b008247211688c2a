// Package traffic holds the VM lab's traffic tests: real TCP and UDP
// connections through the real data plane (proxier.DataPlane: IPVS,
// nftables, sysctls), between network namespaces wired like a small
// cluster, checking who answers and which source address each backend
// saw. Files carry the integration build tag and run only in the VM lab
// (hack/vmlab/run.sh ./integration/traffic/ -- -test.v); on a host this
// package is this file alone.
//
// # Topology
//
// The root namespace is this node, node-a. The shared L2 segment is a
// bridge, br-lab, in the root namespace: it carries node-a's node
// address, and every other node and client plugs into it with a veth
// (root side a bridge port named vn-<node> or vc-<client>, far side
// eth0).
//
//	pod-a1 eth0 ==== vp-pod-a1 --+   root netns = node-a (zone-a)
//	pod-a2 eth0 ==== vp-pod-a2 --+   vp-*: 10.244.1.1/32 and fe80::1, proxy_arp,
//	pod-a3 eth0 ==== vp-pod-a3 --+   a /32 and a /128 route to the pod
//	                             |   kube-ipvs0: VIPs (made by the data plane)
//	                       [ IPVS + nftables ]
//	                             |
//	               br-lab 192.168.100.1/24, fd00:100::1/64
//	     +-------------------+---+---------------+-----------------+
//	 vn-node-b           vn-node-c           vc-client        vc-client-2
//	     |                   |                   |           (some tests)
//	 node-b eth0         node-c eth0         client eth0     client-2 eth0
//	 .2, ::2, zone-a     .3, ::3, zone-b     .10, ::10       .11, ::11
//	 forwarding          forwarding          both route the service ranges
//	 vp-pod-b1 == pod-b1 vp-pod-c1 == pod-c1 (10.96.0.0/16, 198.51.100.0/24,
//	 vp-pod-b2 == pod-b2                     fd00:96::/64, 2001:db8:100::/64)
//	                                         via node-a
//
// Node i (node-a is 1) has 192.168.100.i and fd00:100::i, and the pod
// ranges 10.244.i.0/24 and fd00:244:i::/64. Its pods are .11, .12, …
// (::11, ::12, …): eth0 has 10.244.i.N/24 (proxy ARP on the node side
// answers for the node's other pods) and fd00:244:i::N/128, with default
// routes via 10.244.i.1 and fe80::1, the node side's addresses. Every
// node routes every other node's pod ranges via that node's address, so
// pod traffic crosses the segment un-NATed, as with a routed CNI. The
// cluster CIDRs given to the engine and the data plane are 10.244.0.0/16
// and fd00:244::/32 (a /48 would not hold fd00:244:i::). node-a's lo is
// set up (the VM boots with it down): host clients' resets and ICMP
// errors travel over it.
//
// Every pod runs echo servers (TCP :8080, UDP :5353, both families) that
// answer "<pod> peer=<address they saw>". The harness dials from any
// namespace (a pod, a node, a client, node-a itself) on a thread locked
// into it, one fresh socket per exchange, and classifies failures as
// fast (refused, fatal ICMP) or timeouts (dropped). The namespaces,
// links, echo servers and dialers are integration/labnet's; this package
// adds the topology and the data plane.
//
// Everything is created per test and removed by t.Cleanup, so tests are
// independent within one VM boot; a teardown check fails the test if a
// harness link is left in the root namespace.
//
// TestForwardPolicyDropStillForwardsServiceReplies sets node-a's FORWARD
// policy to DROP with Debian's iptables-nft (staged into the VM by `make
// integration`, as for integration/leftovers; the proxy never runs it)
// and with an nftables inet filter chain, and lists the chains as their
// owners do, and the ruleset with Debian's nft (staged alike).
// TestForwardPolicyDropKeepsConnectionsOpenAcrossTheTakeover opens a
// connection while stand-ins for kube-proxy's KUBE-FORWARD accept and
// masquerade serve it and our table is absent, then writes the table and
// removes the stand-ins: the connection's next exchange still answers.
//
// The harness self-tests (TestHarness, TestHarnessMeasurements) program
// IPVS by hand with moby/ipvs and masquerade with a hand-written
// google/nftables rule, to prove the lab without the project's data
// plane. The traffic tests use the real composition: a policy.Engine
// fed with Services, EndpointSlices and the lab's Nodes computes the
// Plan, and proxier.DataPlane programs it (Resync, or Apply per service).
package traffic
