// Package nlattr walks netlink attributes in place. It reads what
// mdlayher/netlink's AttributeDecoder reads, the same way, but hands out
// each attribute's data as a slice of the message instead of a copy:
// the proxy's periodic checks and repairs read the kernel's whole IPVS
// and nftables tables, hundreds of thousands of attributes at 10,000
// services, and the decoder's copies were most of what a quiet proxy
// allocated. It decides nothing about what the attributes mean.
package nlattr
