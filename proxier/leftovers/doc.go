// Package leftovers removes what upstream kube-proxy's IPVS mode leaves
// on a node once this proxy has taken the node over: its iptables chains
// and the rules that jump to them, and its ipsets. It runs once, after
// the first sync has programmed the node, so that kube-proxy's rules keep
// serving until ours do.
//
// What is kube-proxy's is kube-proxy's own list (pkg/proxy/ipvs: the
// chains its CleanupLeftovers flushes and deletes, plus the canary chain
// every iptables-based mode of it creates, and the ipsets of ipsetInfo in
// both families, KUBE-6- for IPv6), so nothing of the kubelet's
// (KUBE-FIREWALL, KUBE-IPTABLES-HINT, KUBE-KUBELET-CANARY) or of anyone
// else is touched. IPVS and kube-ipvs0 are never touched: they are the
// IPVS writer's, which adopts kube-proxy's virtual servers in place.
//
// Chains are removed where they are nftables objects, as iptables-nft
// (Debian 12's default iptables, among others) writes them: through
// google/nftables, in one batch per family that deletes every rule
// jumping to one of the chains, then flushes and deletes the chains.
// Rules written by iptables-legacy live in the kernel's x_tables, which
// takes a table only whole (IPT_SO_SET_REPLACE, IP6T_SO_SET_REPLACE):
// RemoveLegacyChains reads each of the filter, nat and mangle tables
// /proc lists as iptables-legacy-save reads it (IPT_SO_GET_ENTRIES),
// cuts kube-proxy's chains and the rules that jump or go to them out of
// that blob (spliceXtTable, in xtsplice.go: pure, no syscall), moves
// the jump offsets, hook entries and underflows past the cuts, and
// writes the rest back byte for byte, every other rule's matches and
// targets as the kernel handed them out, so no extension is encoded
// here; then it gives the rules that stayed their counters back
// (IPT_SO_SET_ADD_COUNTERS), as iptables-legacy does. It holds the
// xtables lock (/run/xtables.lock) from the read to the write, as
// iptables-legacy -w does, and reads again when the kernel says the
// table changed (EAGAIN). A table it does not understand (a jump into
// the middle of a kube-proxy chain, a blob that does not add up) is left
// as it is, with an error naming the table and the offset. The ipsets
// go after the chains; one still referenced (by a rule outside
// kube-proxy's chains, or in a table left as it was) is reported as
// Stuck, with the legacy tables that exist, so the caller can say so.
// ipsets are destroyed through netlink, and only where the ip_set module
// is already loaded: a netlink request would load it otherwise.
//
// After a rollback, KubeProxyServesOnHost tells --cleanup-table-only
// that kube-proxy's rules are in the kernel, in each form kube-proxy
// writes them: iptables-nft's chains (nftables objects), iptables-legacy's
// (LegacyNATChains: the nat table read from x_tables with getsockopt
// IPT_SO_GET_INFO and IPT_SO_GET_ENTRIES, as iptables-legacy-save reads
// it, only when /proc lists it, since asking for an absent table loads
// its module; hand-written in xtables.go, chain names and rule counts
// only, as no Go library reads x_tables without running the binary), and
// its nftables mode's tables ip/ip6 kube-proxy (KubeProxyNFTablesServes).
// For the preflight, LegacyForwardPolicy reads the policy of
// iptables-legacy's filter FORWARD the same way (the chain's policy
// entry, which ipt_getinfo's underflow points at).
//
// It never runs iptables or ipset, never touches a table other than
// filter, nat and mangle of the ip and ip6 families, and imports only the
// kernel libraries; not policy, client-go or the writers.
package leftovers
