// Package nlsock opens the blocking netlink sockets of the proxy's
// table readers, reads them without allocating, and writes and splits
// their messages. The proxy's readers of the IPVS and nftables tables
// (proxier/ipvs, nft) keep a blocking socket and one buffer each, and
// read a dump of the whole table piece by piece; x/sys/unix's Recvfrom
// allocates the sender's address on every read, which on a large node
// was thousands of allocations per repair for an address no reader
// looks at. Both readers open their sockets the same way (Open), write
// a request the same way (AppendMessage), and split what a read returned
// into messages the same way (Split, and Message.Ends for the kernel's
// answer to a request): the IPVS reader's dumps, the IPVS writer's
// acknowledgements and the nftables set elements. What a message means,
// and what a reader does with one of another request, is the reader's.
package nlsock
