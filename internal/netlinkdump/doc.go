// Package netlinkdump owns redoing a netlink dump that the kernel marks
// as interrupted (NLM_F_DUMP_INTR): a dump that spans several messages
// while the state it reads changes comes back flagged, possibly missing
// or repeating entries. The host-address List (proxier/hostaddr) and the
// dummy interface's Addrs (proxier/ipvs) both read every address of the
// namespace, which the IPVS writer changes by the thousand at a cold
// start. It decides nothing about what a dump reads.
package netlinkdump
