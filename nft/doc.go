// Package nft owns the nftables half of the data plane: one table, inet
// kube-ipvs-proxy, programmed over netlink with github.com/google/nftables.
// It rejects or drops traffic to virtual servers without destinations,
// marks traffic for masquerade (always, from outside --cluster-cidr, and
// the node's own traffic from a service address whatever the cluster
// CIDRs) and masquerades it with hairpin traffic, marks the forwarded
// packets of service connections for the accept rule it keeps in other
// tables' forward chains of policy drop, applies NOTRACK, enforces
// LoadBalancer source ranges, and rejects connections to virtual server
// addresses on ports that are no service (kube-proxy's KUBE-IPVS-FILTER).
// It also records in the table, which outlives the process, the NodePort
// virtual servers of the plan (RecordedNodePorts reads them back), so
// that --cleanup and a restarted proxy can tell them from foreign ones.
//
// The rule count is constant: services live only in set and map elements.
// Resync reads the table back and sends only the drift from the plan in
// one atomic batch, or, the first time, after a failure, or when the table
// is missing or structurally different, replaces the whole table in one
// atomic batch; the repair (StartRepair, RepairStep) does the same
// against what was last programmed, without a plan, set by set so that
// Applies run between slices; Apply adds and deletes the elements of
// changed services only, refcounting elements that several services
// share, in one batch; Render prints the table for a plan
// without I/O (--dry-run, golden tests). ForeignEdits and
// WatchForeignEdits read the kernel's nftables notifications so that
// Check reports an edit of our table by another program at once. Fake is
// a kernel-faithful Conn for tests; the rules are tested by tracing
// packets through it (trace_*_test.go, with the test-only tracer
// internal/packettrace). See README.md for the hooks, every chain, set and
// map, and how to inspect the table.
//
// It makes no policy decisions (it reads them from policy.Plan), never
// touches another table but to keep one accept rule of its own, owned by
// its comment, in other tables' forward chains of policy drop
// (forward.go), never runs the nft binary, and never uses iptables or
// ipset. It imports policy, the kernel libraries google/nftables and
// mdlayher/netlink, and the netlink helpers of internal (nlattr and
// nlsock for the set element reads of the repair, parsed in place;
// nlfamily for start-up errors) only; not client-go, moby/ipvs or the
// IPVS writer.
package nft
