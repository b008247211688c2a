// Package udpflows is the UDP conntrack reconciler, as kube-proxy's
// (pkg/proxy/conntrack, CleanStaleEntries): after a sync that changed the
// UDP services' serving endpoints, it walks the kernel's conntrack table
// of each family that has UDP virtual servers and deletes the UDP flows
// the policy engine's rules call stale (policy.StaleUDPFlows: sent to one
// of our UDP virtual servers, replied from none of its serving
// endpoints). Every other flow, and every flow to an address or port that
// is not one of our virtual servers, is left alone.
//
// It owns walking and deleting conntrack flows and nothing else: the
// rules are policy's, when to reconcile is the sync loop's (package
// proxier, through DataPlane), and the metrics are the loop's Observer's.
// The kernel is seen through Table, one method, with the real adapter
// over ctnetlink (github.com/vishvananda/netlink) in table_linux.go and a
// kernel-faithful fake, FakeTable, in fake.go. It must not import
// client-go, nftables or the IPVS writer, and it does not log: it returns
// what it deleted per family, and its errors name the family.
package udpflows
