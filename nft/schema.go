package nft

import (
	"github.com/google/nftables"
	"golang.org/x/sys/unix"
)

// The table schema: its name, its chains with their hooks and
// priorities, and its sets and maps with their key and value types, in
// both families. The renderer, the writer and the drift repair all read
// it from here.

// TableName is our only table, in family inet. Nothing else is ever
// created, changed or deleted.
const TableName = "kube-ipvs-proxy"

// Chains. Base chains are named type-hook, as in kube-proxy's nftables
// backend; their hooks and priorities are in chainDefs.
const (
	chainRawPrerouting  = "raw-prerouting"
	chainRawOutput      = "raw-output"
	chainNATPrerouting  = "nat-prerouting"
	chainNATOutput      = "nat-output"
	chainNATPostrouting = "nat-postrouting"
	chainFilterInput    = "filter-input"
	chainFilterOutput   = "filter-output"
	chainFilterForward  = "filter-forward"
	chainRejectPacket   = "reject-packet" // regular chain, the target of empty-services' Reject
)

// Sets and maps, by base name; each exists as <base>-v4 and <base>-v6.
// "vsKey" is address . inet_proto . inet_service.
const (
	setClusterCIDRs     = "cluster-cidrs"          // Config.ClusterCIDRs (interval)
	setServiceIPs       = "service-ips"            // ClusterIP, ExternalIP and LoadBalancer addresses
	setServicePorts     = "service-ports"          // their vsKeys
	setEmptyServices    = "empty-services"         // vsKey : verdict, virtual servers without destinations
	setMasqueradeAlways = "masquerade-always"      // vsKey, Masquerade=Always
	setMasqueradeOff    = "masquerade-off-cluster" // vsKey, Masquerade=OffCluster
	setNodePortServices = "nodeport-services"      // vsKey of virtual servers on node addresses (not Bound): a record for --cleanup, and filter-forward's
	setNoTrackServices  = "notrack-services"       // vsKey, NoTrack
	setNoTrackPods      = "notrack-endpoint-addrs" // destination addresses of NoTrack virtual servers
	setNoTrackEndpoints = "notrack-endpoints"      // destination vsKey of NoTrack virtual servers
	setHairpin          = "hairpin"                // local destination vsKey . destination address
	setInternalVia      = "internal-via"           // vsKey : ClusterIP . port, eTP=Local external virtual servers
	setInternalViaKeys  = "internal-via-keys"      // the same vsKeys, for the output chain's masquerade mark
	setLBSourceRanged   = "lb-source-ranged"       // vsKey of LoadBalancers with source ranges
	setLBSourceAllowed  = "lb-source-allowed"      // vsKey . source range (concatenated interval)
)

// connMarkBit is the conntrack mark bit filter-input sets on the
// connections to our virtual servers and filter-forward tests, so that
// their forwarded packets get the masquerade mark (README.md, "Forwarded
// service traffic"). Only this bit is ever set or tested: the rest of a
// connection's mark is other agents'. Not the masquerade bit: tools that
// copy a connection's mark into its packets' (wg-quick's "meta mark set
// ct mark") would have them masqueraded. Bit 13 (0x2000) sits beside
// kube-proxy's 14 and 15, below the ranges Calico, Weave and Tailscale
// take (bit 16 and up) and above Cilium's and Istio's (bits 0 to 11).
const connMarkBit = 13

// connMarkBitAlt takes connMarkBit's place when the masquerade bit is
// configured to bit 13.
const connMarkBitAlt = 12

const (
	defaultMasqueradeBit = 14
	priorityFilterOutput = -110 // after conntrack (-200), before IPVS's LOCAL_OUT hooks (-99, -98)
	// priorityFilterForward puts the forward chain's mark before the
	// chains that may drop forwarded packets (iptables-nft's mangle and
	// filter FORWARD at -150 and 0, firewalld's at 10): those are the
	// chains its accept rule goes into (forward.go).
	priorityFilterForward = -300
	// elementsPerMessage bounds one NEWSETELEM/DELSETELEM message: its
	// element list is one netlink attribute, whose length is 16 bits.
	elementsPerMessage = 512
)

// family is one address family of the inet table. Rules are written once
// per family and every set exists once per family.
type family struct {
	suffix   string // set name suffix
	keyword  string // nft payload keyword: ip or ip6
	nfproto  byte
	addrLen  uint32
	saddrOff uint32 // network header offsets
	daddrOff uint32
	addrType nftables.SetDatatype
}

var (
	familyV4 = &family{suffix: "-v4", keyword: "ip", nfproto: unix.NFPROTO_IPV4, addrLen: 4, saddrOff: 12, daddrOff: 16, addrType: nftables.TypeIPAddr}
	familyV6 = &family{suffix: "-v6", keyword: "ip6", nfproto: unix.NFPROTO_IPV6, addrLen: 16, saddrOff: 8, daddrOff: 24, addrType: nftables.TypeIP6Addr}
	families = []*family{familyV4, familyV6}
)

// field is one component of a set key.
type field uint8

const (
	fieldAddr  field = iota // ipv4_addr or ipv6_addr
	fieldProto              // inet_proto, padded to 4 bytes
	fieldPort               // inet_service, big endian, padded to 4 bytes
)

var (
	vsKeyFields  = []field{fieldAddr, fieldProto, fieldPort}
	vsAddrFields = []field{fieldAddr, fieldProto, fieldPort, fieldAddr}
)

// size is the field's length in a concatenated key.
func (f field) size(fam *family) int {
	if f == fieldAddr {
		return int(fam.addrLen)
	}
	return 4
}

func (f field) datatype(fam *family) nftables.SetDatatype {
	switch f {
	case fieldProto:
		return nftables.TypeInetProto
	case fieldPort:
		return nftables.TypeInetService
	}
	return fam.addrType
}

// setDef describes one set or map; it exists once per family.
type setDef struct {
	base       string
	fields     []field
	interval   bool
	verdictMap bool
	// data, for a data map: its value's fields (concatenated).
	data    []field
	comment string
}

// setDefs lists every set and map, in name order. A setID indexes it
// together with the family.
var setDefs = []setDef{
	{base: setClusterCIDRs, fields: []field{fieldAddr}, interval: true, comment: "pod networks (--cluster-cidr)"},
	{base: setEmptyServices, fields: vsKeyFields, verdictMap: true, comment: "virtual servers without destinations"},
	{base: setHairpin, fields: vsAddrFields, comment: "destination . itself: pods reaching themselves via a virtual server"},
	{base: setInternalVia, fields: vsKeyFields, data: []field{fieldAddr, fieldPort}, comment: "eTP=Local external virtual servers: in-cluster clients go to the ClusterIP"},
	{base: setInternalViaKeys, fields: vsKeyFields, comment: "eTP=Local external virtual servers reached via the ClusterIP"},
	{base: setLBSourceAllowed, fields: vsAddrFields, interval: true, comment: "load balancer virtual server . allowed source range"},
	{base: setLBSourceRanged, fields: vsKeyFields, comment: "load balancer virtual servers with source ranges"},
	{base: setMasqueradeAlways, fields: vsKeyFields, comment: "virtual servers always masqueraded"},
	{base: setMasqueradeOff, fields: vsKeyFields, comment: "virtual servers masqueraded from outside the cluster CIDRs"},
	{base: setNodePortServices, fields: vsKeyFields, comment: "NodePort virtual servers this proxy programs (read by --cleanup)"},
	{base: setNoTrackPods, fields: []field{fieldAddr}, comment: "addresses of NOTRACK destinations: their own connections stay tracked (a hairpin needs masquerade)"},
	{base: setNoTrackEndpoints, fields: vsKeyFields, comment: "destinations of NOTRACK virtual servers"},
	{base: setNoTrackServices, fields: vsKeyFields, comment: "NOTRACK virtual servers"},
	{base: setServiceIPs, fields: []field{fieldAddr}, comment: "ClusterIP, ExternalIP and LoadBalancer addresses"},
	{base: setServicePorts, fields: vsKeyFields, comment: "ClusterIP, ExternalIP and LoadBalancer virtual servers"},
}

// setID names one set of one family: index into setDefs times two, plus
// the family.
type setID uint8

func idOf(base string, fam *family) setID {
	for i := range setDefs {
		if setDefs[i].base == base {
			id := setID(2 * i)
			if fam == familyV6 {
				id++
			}
			return id
		}
	}
	panic("nft: unknown set " + base)
}

func (id setID) def() *setDef { return &setDefs[id/2] }

func (id setID) family() *family { return families[id%2] }

// hasValues says whether the set is a map: its elements carry a value.
func (id setID) hasValues() bool {
	d := id.def()
	return d.verdictMap || len(d.data) > 0
}

func (id setID) name() string { return id.def().base + id.family().suffix }

// keyLen is the length of one key (not counting an interval end).
func (id setID) keyLen() int {
	n := 0
	for _, f := range id.def().fields {
		n += f.size(id.family())
	}
	return n
}

func numSets() int { return 2 * len(setDefs) }

// chainDef is one chain; hook is nil for regular chains.
type chainDef struct {
	name     string
	typ      nftables.ChainType
	hook     *nftables.ChainHook
	priority nftables.ChainPriority
}

// chainDefs lists every chain in the order they are created.
var chainDefs = []chainDef{
	{name: chainRawPrerouting, typ: nftables.ChainTypeFilter, hook: nftables.ChainHookPrerouting, priority: *nftables.ChainPriorityRaw},
	{name: chainRawOutput, typ: nftables.ChainTypeFilter, hook: nftables.ChainHookOutput, priority: *nftables.ChainPriorityRaw},
	{name: chainNATPrerouting, typ: nftables.ChainTypeNAT, hook: nftables.ChainHookPrerouting, priority: *nftables.ChainPriorityNATDest},
	{name: chainNATOutput, typ: nftables.ChainTypeNAT, hook: nftables.ChainHookOutput, priority: *nftables.ChainPriorityNATDest},
	{name: chainNATPostrouting, typ: nftables.ChainTypeNAT, hook: nftables.ChainHookPostrouting, priority: *nftables.ChainPriorityNATSource},
	{name: chainFilterInput, typ: nftables.ChainTypeFilter, hook: nftables.ChainHookInput, priority: *nftables.ChainPriorityFilter},
	{name: chainFilterOutput, typ: nftables.ChainTypeFilter, hook: nftables.ChainHookOutput, priority: priorityFilterOutput},
	{name: chainFilterForward, typ: nftables.ChainTypeFilter, hook: nftables.ChainHookForward, priority: priorityFilterForward},
	{name: chainRejectPacket},
}
