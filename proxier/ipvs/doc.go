// Package ipvs is the IPVS writer: it turns the policy engine's virtual
// servers into kernel state, namely IPVS virtual servers and destinations
// (NAT forwarding) and VIP addresses on the kube-ipvs0 dummy interface,
// and drains removed destinations gracefully.
//
// The Writer keeps a mirror of what it believes the kernel holds. The
// first call (Apply or Resync) reads the kernel once and adopts whatever
// already matches, so a restart with the same plan changes nothing.
// Apply then works per changed service, diffing the mirror against the
// service's new virtual servers and applying the differences in a fixed
// order: add, update, prune. Resync re-reads the kernel and repairs drift
// from a plan; with nothing changed it only reads. Repair (StartRepair and
// RepairStep in slices, with Applies between them) re-reads the kernel
// and repairs drift from what the Writer last programmed, without a plan.
//
// Inside, each decision has one owner: the reconciler (reconcile.go) is
// pure and decides what to change, from the desired state and the
// mirror; the batch (batch.go, desired.go) records the desired state and
// asks the reconciler about what a sync touched; the executor
// (execute.go) writes the reconciler's actions and applies each answer to
// the mirror in one pass; and the schedules (driftSchedule in check.go,
// retrySchedule in desired.go) decide when Check reads the kernel and
// when a failed service is retried, on the clock Config.Now gives them.
//
// Ownership: the Writer manages only virtual servers on addresses of its
// dummy interface and on node addresses paired with one of the plan's
// NodePorts, plus those it created itself and those its caller names as
// recorded by an earlier run (AdoptRecorded: the NodePort virtual servers
// the nftables table records, for --cleanup and restarts). Every other
// virtual server is foreign and never touched, and so are virtual servers
// on Config.ExcludeCIDRs, which are never deleted.
//
// The kernel is seen through three small interfaces (Kernel, Links and
// sysctl.Files, the seam package conntrack uses too),
// with real adapters in *_linux.go files and in package internal/sysctl,
// and kernel-faithful fakes in fake.go for tests of this package and of
// its callers. IPVS is reached through the codec in package ipvsnl: its
// generic netlink family on blocking sockets of our own that keep their
// read buffers, the changes' requests appended in place to one buffer
// per Write (the reads' encoded with mdlayher/netlink's attribute
// encoder) and answers walked in place (internal/nlattr). It is not
// reached through github.com/moby/ipvs: its first handle execs `modprobe
// -va ip_vs` and logs through logrus, outside the proxy's logging, and
// its reads zero a large buffer per read and copy every attribute where
// a Repair reads the whole table. The family lookup is the module check:
// a node without ip_vs fails at start with the module named. The dummy
// interface is reached through github.com/vishvananda/netlink, but for
// its addresses, changed and listed on a route netlink socket of ipvsnl's
// (AddrConn).
//
// Changes go to the kernel in batches. A sync's IPVS changes are made
// phase by phase (add, update, prune), each phase's in chunks of up to
// writeChunk changes, one Kernel.Write each; the adds run as each
// chunk of them is planned (after the binds), and a Resync's binds as
// each chunk of them is, so that a cold start holds one chunk of its
// table's changes at a time, not all of them. The
// Linux adapter sends as
// many requests per sendmsg as its socket buffers allow, and generic
// netlink processes them in order, each on its own, answering only
// those that fail (and the last), so a failure is matched to its change
// by sequence number and stays its service's while the rest of the batch
// stands. A single change is a batch of one. The dummy interface's
// addresses are added and deleted in batches the same way, one Links
// call a phase, before the IPVS changes (bind) and after them (unbind).
// BENCHMARKS.md has the measurement against one request per change.
//
// The package translates the plan; it makes no policy decisions and must
// not import client-go or nftables. It does not log: errors are returned,
// wrapped with the virtual server, destination or address they concern.
package ipvs
