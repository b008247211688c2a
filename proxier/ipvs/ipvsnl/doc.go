// Package ipvsnl is the IPVS writer's netlink codec: the IPVS generic
// netlink family's requests encoded (encode.go), its answers decoded in
// place (decode.go), acknowledgements matched to a batch's requests by
// sequence number (answer.go), the family looked up by name (the module
// check: a node without ip_vs fails at start with the module named), and
// the blocking sockets it all goes over (socket_linux.go, batches in
// batch_linux.go); every constant, the numbers of
// include/uapi/linux/ip_vs.h it uses and the sockets' sizes, is in
// consts.go. Conn (conn_linux.go) is the IPVS handle the writer's Kernel
// adapter wraps; AddrConn changes and lists the dummy interface's
// addresses on route netlink the same way, in batches on a socket of its
// own (addr.go encodes them).
//
// Requests are appended in place to one buffer per Write, by hand,
// rather than built with mdlayher/netlink's AttributeEncoder, which
// allocates for every attribute: over a cold start's table that was the
// largest allocation of a node (benchmarks/NOTES.md has the
// measurement); encode_test.go holds every request to the bytes
// AttributeEncoder makes of it.
//
// It owns the kernel's forms of IPVS objects (VirtualServer,
// Destination, Op, Timeouts), which package ipvs names through type
// aliases. It decides nothing: what to change, in which order, and what
// an answer means for a service are the writer's. It does not log.
//
// It must not import client-go, klog, nftables, vishvananda/netlink or
// github.com/moby/ipvs (whose first handle execs `modprobe` and logs
// through logrus), nor anything of the module but package policy (for
// the key type) and the netlink primitives internal/nlsock, nlattr and
// nlfamily.
package ipvsnl
