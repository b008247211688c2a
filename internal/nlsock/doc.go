// Package nlsock opens the blocking netlink sockets of the proxy's
// table readers, and reads them without allocating. The proxy's
// readers of the IPVS and nftables tables (proxier/ipvs, nft) keep a
// blocking socket and one buffer each, and read a dump of the whole table
// piece by piece; x/sys/unix's Recvfrom allocates the sender's address
// on every read, which on a large node was thousands of allocations per
// repair for an address no reader looks at. Both readers open their
// sockets the same way (Open). It decides nothing about what is read.
package nlsock
