// Package demo is `make demo`: the proxy, in its real mode inside a VM
// lab, watching a real kube-apiserver and etcd on the host that hold the
// objects of examples/, and traffic showing which backends answer, next
// to what the policy planned and what the kernel holds.
//
// The host half (demo_test.go, objects_test.go; KIP_DEMO=1) starts the
// apiserver with a dual-stack service range, applies deploy/base's RBAC
// and examples/*.yaml, writes what Apply leaves out with UpdateStatus
// (the Nodes' addresses, checkout's load balancer ingress), and boots the
// VM (integration/vme2e.Host) with examples/plans/node-a.json.
//
// The VM half (integration tag, run in the VM):
//   - lab_test.go builds the network from the API's Nodes and
//     EndpointSlices: node-a is the root namespace, its Node addresses
//     (192.168.10.11, fd00:10::11) on a bridge; its pods in one namespace
//     behind a veth; every other node with endpoints a namespace on the
//     bridge at its Node address, its pods' addresses on lo; a client pod
//     of node-a (10.244.1.99, fd00:244:1::99); two external clients on the
//     bridge, one with a source in checkout's loadBalancerSourceRanges.
//     Every endpoint address runs echo servers answering
//     "<address> peer=<client address seen>".
//   - vm_test.go starts the proxy (--cluster-cidr as the golden plans),
//     waits for its first applied sync (its /healthz answers 200 before,
//     as kube-proxy's does; the demo prints how much of the plan the
//     kernel held at each point), then runs the sections below, prints a
//     selection of the proxy's /metrics, stops it and runs --cleanup,
//     which must leave no IPVS virtual server and no kube-ipvs0.
//   - report_test.go and measure_test.go print and check the rows: per
//     virtual server the plan's policy and destinations, the kernel's IPVS
//     destinations, which backends answered (40 fresh connections) and
//     the client address they saw. A row fails the demo (MISMATCH) when
//     the kernel differs from the plan, a backend outside the plan
//     answers, a planned one never does (but one under ClientIP affinity),
//     a backend sees the wrong client address, or an expected drop is
//     answered.
//
// Shown:
//  1. node-a to every ClusterIP, IPv4 and IPv6: masqueraded (the backends
//     never see node-a's source address, but node-a's address toward
//     them).
//  2. a pod of node-a to every ClusterIP, IPv4 and IPv6: not masqueraded,
//     and NOTRACK (dns) leaves no conntrack entry while other services
//     are tracked.
//  3. the external client to web's NodePort 30080 on both Node addresses
//     (eTP=Cluster: masqueraded); checkout's NodePort 31443 and load
//     balancer 198.51.100.50 (eTP=Local without a local endpoint: dropped,
//     from inside and outside the source ranges); its ipMode Proxy ingress
//     198.51.100.51 (no virtual server); its healthCheckNodePort 32100
//     (503 and kube-proxy's JSON body).
//  4. beyond examples/: the demo adds a checkout endpoint on node-a
//     through the API and shows the kernel following, the client address
//     kept (eTP=Local), the source ranges dropping the client outside
//     them while the NodePort serves it, and the health check turning 200.
//
// Not shown: UDP or SCTP NodePorts and external IPs (examples/ has none),
// node-b's and node-c's plans (only node-a runs a proxy), traffic from
// pods of other nodes, the nftables ruleset itself (its effects are
// shown).
package demo
