package ipvsnl

import "time"

// The IPVS generic netlink family's names and numbers
// (include/uapi/linux/ip_vs.h), all of them that the codec sends or reads.
const (
	ipvsGenlName    = "IPVS"
	ipvsGenlVersion = 1
)

// Commands.
const (
	ipvsCmdNewService = 1  // IPVS_CMD_NEW_SERVICE
	ipvsCmdSetService = 2  // IPVS_CMD_SET_SERVICE
	ipvsCmdDelService = 3  // IPVS_CMD_DEL_SERVICE
	ipvsCmdGetService = 4  // IPVS_CMD_GET_SERVICE: one alone, or every one with NLM_F_DUMP
	ipvsCmdNewDest    = 5  // IPVS_CMD_NEW_DEST
	ipvsCmdSetDest    = 6  // IPVS_CMD_SET_DEST
	ipvsCmdDelDest    = 7  // IPVS_CMD_DEL_DEST
	ipvsCmdGetDest    = 8  // IPVS_CMD_GET_DEST, with NLM_F_DUMP
	ipvsCmdSetConfig  = 12 // IPVS_CMD_SET_CONFIG
	ipvsCmdGetConfig  = 13 // IPVS_CMD_GET_CONFIG
)

// Top-level attributes of a command.
const (
	ipvsCmdAttrService       = 1 // IPVS_CMD_ATTR_SERVICE, nested
	ipvsCmdAttrDest          = 2 // IPVS_CMD_ATTR_DEST, nested
	ipvsCmdAttrTimeoutTCP    = 4 // IPVS_CMD_ATTR_TIMEOUT_TCP, seconds
	ipvsCmdAttrTimeoutTCPFin = 5 // IPVS_CMD_ATTR_TIMEOUT_TCP_FIN, seconds
	ipvsCmdAttrTimeoutUDP    = 6 // IPVS_CMD_ATTR_TIMEOUT_UDP, seconds
)

// Attributes of a virtual server (inside IPVS_CMD_ATTR_SERVICE).
const (
	ipvsSvcAttrAF        = 1 // IPVS_SVC_ATTR_AF
	ipvsSvcAttrProtocol  = 2 // IPVS_SVC_ATTR_PROTOCOL
	ipvsSvcAttrAddr      = 3 // IPVS_SVC_ATTR_ADDR
	ipvsSvcAttrPort      = 4 // IPVS_SVC_ATTR_PORT, network order
	ipvsSvcAttrFWMark    = 5 // IPVS_SVC_ATTR_FWMARK
	ipvsSvcAttrSchedName = 6 // IPVS_SVC_ATTR_SCHED_NAME, NUL-terminated
	ipvsSvcAttrFlags     = 7 // IPVS_SVC_ATTR_FLAGS: struct ip_vs_flags {flags, mask}
	ipvsSvcAttrTimeout   = 8 // IPVS_SVC_ATTR_TIMEOUT
	ipvsSvcAttrNetmask   = 9 // IPVS_SVC_ATTR_NETMASK
)

// Attributes of a destination (inside IPVS_CMD_ATTR_DEST).
const (
	ipvsDestAttrAddr        = 1  // IPVS_DEST_ATTR_ADDR
	ipvsDestAttrPort        = 2  // IPVS_DEST_ATTR_PORT, network order
	ipvsDestAttrFwdMethod   = 3  // IPVS_DEST_ATTR_FWD_METHOD
	ipvsDestAttrWeight      = 4  // IPVS_DEST_ATTR_WEIGHT
	ipvsDestAttrUThresh     = 5  // IPVS_DEST_ATTR_U_THRESH
	ipvsDestAttrLThresh     = 6  // IPVS_DEST_ATTR_L_THRESH
	ipvsDestAttrActiveConns = 7  // IPVS_DEST_ATTR_ACTIVE_CONNS
	ipvsDestAttrInactConns  = 8  // IPVS_DEST_ATTR_INACT_CONNS
	ipvsDestAttrAddrFamily  = 11 // IPVS_DEST_ATTR_ADDR_FAMILY

	fwdMethodMask = 0x7 // IP_VS_CONN_F_FWD_MASK
)

// IPVS service flags (IP_VS_SVC_F_*).
const (
	FlagPersistent = 0x0001 // IP_VS_SVC_F_PERSISTENT: session affinity
	FlagHashed     = 0x0002 // IP_VS_SVC_F_HASHED: set by the kernel, never by us
	FlagOnePacket  = 0x0004 // IP_VS_SVC_F_ONEPACKET
	FlagSched1     = 0x0008 // IP_VS_SVC_F_SCHED1: mh-fallback, sh-fallback
	FlagSched2     = 0x0010 // IP_VS_SVC_F_SCHED2: mh-port, sh-port
	FlagSched3     = 0x0020 // IP_VS_SVC_F_SCHED3
)

// ForwardMasq is the NAT (masquerade) forwarding method of a destination,
// IP_VS_CONN_F_MASQ; the only one the Writer programs.
const ForwardMasq = 0

// The sockets' sizes and bounds.

// Buffer sizes asked of the kernel (as root; otherwise capped at
// net.core.wmem_max and rmem_max), and a generous bound on the receive
// buffer one failure's answer takes (its socket buffer and data; an
// error acknowledgement without the request echoed is under a kilobyte).
const (
	opSendBuffer  = 1 << 20
	opRecvBuffer  = 4 << 20
	opAnswerBytes = 2048
	// netlink_sendmsg refuses a message longer than the send buffer less
	// 32 bytes; keep some more margin.
	opSendMargin = 64
)

// keepBatchBuffer bounds the encoding buffer a sender keeps between
// batches: a cold start's batches fill the send buffer, a megabyte or
// more, while a sync after it sends a few requests, and a buffer of the
// cold start's size would stay in the live heap for good.
const keepBatchBuffer = 64 << 10

// genlReadBuffer is the read buffer: the kernel sizes a dump's pieces to
// the largest read it has seen, up to 32 KiB (netlink_recvmsg).
const genlReadBuffer = 32 << 10

// genlReadTimeout bounds one read, so a kernel that never answers is an
// error, not a writer stuck for good.
const genlReadTimeout = 30 * time.Second
