package nft

import (
	"fmt"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// ruleSpec is one rule: its nft text (for Render) and its expressions
// (for the kernel), built together so they cannot drift apart.
type ruleSpec struct {
	chain string
	text  string
	exprs []expr.Any
	// anon, when set, is the constant anonymous set the rule's lookup
	// named anonSetName refers to.
	anon *anonSet
}

// anonSet is a constant anonymous set bound to one rule.
type anonSet struct {
	keyType nftables.SetDatatype
	keys    [][]byte
}

// anonSetName is what the kernel turns into __set0, __set1, ...
const anonSetName = "__set%d"

// source is a value a rule loads into a register.
type source uint8

const (
	srcDaddr source = iota
	srcSaddr
	srcL4Proto
	srcDport
	srcSport
)

func (s source) text(fam *family) string {
	switch s {
	case srcDaddr:
		return fam.keyword + " daddr"
	case srcSaddr:
		return fam.keyword + " saddr"
	case srcL4Proto:
		return "meta l4proto"
	case srcDport:
		return "th dport"
	}
	return "th sport"
}

// load returns the expression loading s into reg and the number of
// 32-bit registers it fills.
func (s source) load(fam *family, reg uint32) (expr.Any, uint32) {
	switch s {
	case srcDaddr:
		return &expr.Payload{DestRegister: reg, Base: expr.PayloadBaseNetworkHeader, Offset: fam.daddrOff, Len: fam.addrLen}, fam.addrLen / 4
	case srcSaddr:
		return &expr.Payload{DestRegister: reg, Base: expr.PayloadBaseNetworkHeader, Offset: fam.saddrOff, Len: fam.addrLen}, fam.addrLen / 4
	case srcL4Proto:
		return &expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg}, 1
	case srcDport:
		return &expr.Payload{DestRegister: reg, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2}, 1
	}
	return &expr.Payload{DestRegister: reg, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 2}, 1
}

// reg32 names the 32-bit register at word w (from the start of reg 1) in
// the kernel's canonical form, as nft and the kernel's dumps do: a word
// starting a 16-byte register is NFT_REG_1..4, any other NFT_REG32_xx.
func reg32(w uint32) uint32 {
	if w%4 == 0 {
		return unix.NFT_REG_1 + w/4
	}
	return unix.NFT_REG32_00 + w
}

// ruleBuilder accumulates a rule's text and expressions.
type ruleBuilder struct {
	fam    *family // nil for a family-independent rule
	text   []string
	exprs  []expr.Any
	anon   *anonSet
	nfprot bool
}

func newRule(fam *family) *ruleBuilder { return &ruleBuilder{fam: fam} }

// dependency adds "meta nfproto" before the first address match, as nft
// does in an inet table.
func (b *ruleBuilder) dependency() {
	if b.fam == nil || b.nfprot {
		return
	}
	b.nfprot = true
	b.exprs = append(b.exprs,
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: unix.NFT_REG_1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: unix.NFT_REG_1, Data: []byte{b.fam.nfproto}})
}

// loads loads srcs into consecutive registers from reg 1 and returns
// their text joined by " . ".
func (b *ruleBuilder) loads(srcs []source) string {
	names := make([]string, len(srcs))
	var w uint32
	for i, s := range srcs {
		if s == srcDaddr || s == srcSaddr {
			b.dependency()
		}
		e, n := s.load(b.fam, reg32(w))
		b.exprs = append(b.exprs, e)
		w += n
		names[i] = s.text(b.fam)
	}
	return strings.Join(names, " . ")
}

// inSet matches "srcs @set", or "srcs != @set" when invert.
func (b *ruleBuilder) inSet(srcs []source, base string, invert bool) *ruleBuilder {
	name := base + b.fam.suffix
	op := ""
	if invert {
		op = "!= "
	}
	b.text = append(b.text, fmt.Sprintf("%s %s@%s", b.loads(srcs), op, name))
	b.exprs = append(b.exprs, &expr.Lookup{SourceRegister: unix.NFT_REG_1, SetName: name, Invert: invert})
	return b
}

// vmap jumps through the verdict map base.
func (b *ruleBuilder) vmap(srcs []source, base string) *ruleBuilder {
	name := base + b.fam.suffix
	b.text = append(b.text, fmt.Sprintf("%s vmap @%s", b.loads(srcs), name))
	b.exprs = append(b.exprs, &expr.Lookup{SourceRegister: unix.NFT_REG_1, SetName: name, IsDestRegSet: true, DestRegister: unix.NFT_REG_VERDICT})
	return b
}

// dnatVia rewrites the destination to the address and port the data map
// base holds for the packet's virtual server: "dnat ip to ip daddr .
// meta l4proto . th dport map @m". The lookup writes the address from
// reg 1 and the port in the 32-bit word after it, as nft does.
func (b *ruleBuilder) dnatVia(base string) *ruleBuilder {
	name := base + b.fam.suffix
	keys := b.loads(vsKeySrcs)
	port := reg32(b.fam.addrLen / 4)
	b.text = append(b.text, fmt.Sprintf("dnat %s to %s map @%s", b.fam.keyword, keys, name))
	b.exprs = append(b.exprs,
		&expr.Lookup{SourceRegister: unix.NFT_REG_1, SetName: name, IsDestRegSet: true, DestRegister: unix.NFT_REG_1},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: uint32(b.fam.nfproto), Specified: true,
			RegAddrMin: unix.NFT_REG_1, RegAddrMax: unix.NFT_REG_1, RegProtoMin: port, RegProtoMax: port})
	return b
}

// ctState matches packets whose conntrack state has one of the bits.
func (b *ruleBuilder) ctState(text string, bits uint32) *ruleBuilder {
	b.text = append(b.text, "ct state "+text)
	b.exprs = append(b.exprs,
		&expr.Ct{Register: unix.NFT_REG_1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: unix.NFT_REG_1, DestRegister: unix.NFT_REG_1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(bits), Xor: binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: unix.NFT_REG_1, Data: binaryutil.NativeEndian.PutUint32(0)})
	return b
}

// l4protoIn matches meta l4proto against a constant anonymous set.
func (b *ruleBuilder) l4protoIn(text string, protos ...byte) *ruleBuilder {
	b.text = append(b.text, "meta l4proto "+text)
	set := &anonSet{keyType: nftables.TypeInetProto}
	for _, p := range protos {
		set.keys = append(set.keys, []byte{p})
	}
	b.anon = set
	b.exprs = append(b.exprs,
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: unix.NFT_REG_1},
		&expr.Lookup{SourceRegister: unix.NFT_REG_1, SetName: anonSetName})
	return b
}

// l4proto matches one protocol.
func (b *ruleBuilder) l4proto(text string, proto byte) *ruleBuilder {
	b.text = append(b.text, "meta l4proto "+text)
	b.exprs = append(b.exprs,
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: unix.NFT_REG_1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: unix.NFT_REG_1, Data: []byte{proto}})
	return b
}

// markTest matches packets carrying the masquerade mark.
func (b *ruleBuilder) markTest(mark uint32) *ruleBuilder {
	b.text = append(b.text, fmt.Sprintf("meta mark & 0x%08x == 0x%08x", mark, mark))
	b.exprs = append(b.exprs,
		&expr.Meta{Key: expr.MetaKeyMARK, Register: unix.NFT_REG_1},
		&expr.Bitwise{SourceRegister: unix.NFT_REG_1, DestRegister: unix.NFT_REG_1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(mark), Xor: binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpEq, Register: unix.NFT_REG_1, Data: binaryutil.NativeEndian.PutUint32(mark)})
	return b
}

// markSet sets (or, with clear, clears) the masquerade mark: reg =
// (mark & mask) ^ xor, as nft's "meta mark set meta mark | x" and "^ x".
func (b *ruleBuilder) markSet(mark uint32, clear bool) *ruleBuilder {
	mask, op := ^mark, "|"
	if clear {
		mask, op = 0xffffffff, "^"
	}
	b.text = append(b.text, fmt.Sprintf("meta mark set meta mark %s 0x%08x", op, mark))
	b.exprs = append(b.exprs,
		&expr.Meta{Key: expr.MetaKeyMARK, Register: unix.NFT_REG_1},
		&expr.Bitwise{SourceRegister: unix.NFT_REG_1, DestRegister: unix.NFT_REG_1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(mask), Xor: binaryutil.NativeEndian.PutUint32(mark)},
		&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: unix.NFT_REG_1})
	return b
}

// daddrNotLocal matches packets whose destination is not an address of
// this node (a fib lookup: "fib daddr type != local").
func (b *ruleBuilder) daddrNotLocal() *ruleBuilder {
	b.text = append(b.text, "fib daddr type != local")
	b.exprs = append(b.exprs,
		&expr.Fib{Register: unix.NFT_REG_1, FlagDADDR: true, ResultADDRTYPE: true},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: unix.NFT_REG_1, Data: binaryutil.NativeEndian.PutUint32(unix.RTN_LOCAL)})
	return b
}

// ctMarkTest matches packets whose connection's conntrack mark has
// bit set (set) or clear: "ct mark & bit == bit" or "... == 0". A packet
// without a conntrack entry (untracked, or not seen by conntrack yet)
// matches neither: the kernel breaks the rule on its ct mark load.
func (b *ruleBuilder) ctMarkTest(bit uint32, set bool) *ruleBuilder {
	want := uint32(0)
	if set {
		want = bit
	}
	b.text = append(b.text, fmt.Sprintf("ct mark & 0x%08x == 0x%08x", bit, want))
	b.exprs = append(b.exprs,
		&expr.Ct{Key: expr.CtKeyMARK, Register: unix.NFT_REG_1},
		&expr.Bitwise{SourceRegister: unix.NFT_REG_1, DestRegister: unix.NFT_REG_1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(bit), Xor: binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpEq, Register: unix.NFT_REG_1, Data: binaryutil.NativeEndian.PutUint32(want)})
	return b
}

// ctMarkSet sets bit in the connection's conntrack mark and keeps its
// other bits: reg = (ct mark & ^bit) ^ bit, as nft's "ct mark set ct
// mark | bit". The kernel does nothing for a packet without a
// conntrack entry.
func (b *ruleBuilder) ctMarkSet(bit uint32) *ruleBuilder {
	b.text = append(b.text, fmt.Sprintf("ct mark set ct mark | 0x%08x", bit))
	b.exprs = append(b.exprs,
		&expr.Ct{Key: expr.CtKeyMARK, Register: unix.NFT_REG_1},
		&expr.Bitwise{SourceRegister: unix.NFT_REG_1, DestRegister: unix.NFT_REG_1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(^bit), Xor: binaryutil.NativeEndian.PutUint32(bit)},
		&expr.Ct{Key: expr.CtKeyMARK, Register: unix.NFT_REG_1, SourceRegister: true})
	return b
}

// then ends the rule with a statement.
func (b *ruleBuilder) then(text string, e ...expr.Any) *ruleBuilder {
	b.text = append(b.text, text)
	b.exprs = append(b.exprs, e...)
	return b
}

func (b *ruleBuilder) in(chain string) ruleSpec {
	return ruleSpec{chain: chain, text: strings.Join(b.text, " "), exprs: b.exprs, anon: b.anon}
}

var (
	vsKeySrcs    = []source{srcDaddr, srcL4Proto, srcDport}
	replyKeySrcs = []source{srcSaddr, srcL4Proto, srcSport}
	hairpinSrcs  = []source{srcDaddr, srcL4Proto, srcDport, srcSaddr}
)

const (
	ctNewUntracked       = expr.CtStateBitNEW | expr.CtStateBitUNTRACKED
	ctEstablishedRelated = expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED
)

// ruleSpecs returns every rule of the table of a defaulted config, in
// chain order. The count depends neither on the plan (services live in
// set elements only) nor on how local pods are told (by address or by
// interface, one match in the same rules).
func ruleSpecs(cfg Config) []ruleSpec {
	mark, connMark, local := cfg.mark(), cfg.connMark(), cfg.localPods()
	var rs []ruleSpec
	perFamily := func(build func(fam *family) ruleSpec) {
		for _, fam := range families {
			rs = append(rs, build(fam))
		}
	}
	// NOTRACK only where no NAT is needed, and for both directions of a
	// connection or neither (a connection tracked one way only breaks
	// under IPVS): traffic from pods (fromLocalPod) to a
	// NOTRACK virtual server, or to one of its destinations (the far end
	// of another node's IPVS), and the destinations' replies to pods.
	// Excepted, so tracked both ways:
	//   - pods that are themselves NOTRACK destinations: IPVS may send
	//     them to themselves, and that hairpin needs masquerade;
	//   - this node's own connections: masquerade, which needs conntrack,
	//     may give them a pod-network source such as the bridge address,
	//     so replies addressed to the node stay tracked, and in
	//     raw-output, where every source is the node's own, only
	//     host-network destinations' replies to pods are NOTRACK'd.
	for _, set := range []string{setNoTrackServices, setNoTrackEndpoints} {
		perFamily(func(f *family) ruleSpec {
			return newRule(f).fromLocalPod(local, false).
				inSet(vsKeySrcs, set, false).inSet([]source{srcSaddr}, setNoTrackPods, true).
				then("notrack", &expr.Notrack{}).in(chainRawPrerouting)
		})
	}
	for _, chain := range []string{chainRawPrerouting, chainRawOutput} {
		perFamily(func(f *family) ruleSpec {
			return newRule(f).toLocalPod(local, chain).
				inSet(replyKeySrcs, setNoTrackEndpoints, false).inSet([]source{srcDaddr}, setNoTrackPods, true).
				daddrNotLocal().then("notrack", &expr.Notrack{}).in(chain)
		})
	}
	for _, chain := range []string{chainNATPrerouting, chainNATOutput} {
		perFamily(func(f *family) ruleSpec {
			return newRule(f).inSet(vsKeySrcs, setMasqueradeAlways, false).markSet(mark, false).in(chain)
		})
		perFamily(func(f *family) ruleSpec {
			return newRule(f).fromLocalPod(local, true).
				inSet(vsKeySrcs, setMasqueradeOff, false).markSet(mark, false).in(chain)
		})
	}
	// eTP=Local external virtual servers: clients in the cluster (pods,
	// and the node itself, masqueraded like its ClusterIP traffic) go to
	// the service's ClusterIP, so to its internal policy's destinations;
	// only external clients are held to this node's endpoints.
	perFamily(func(f *family) ruleSpec {
		return newRule(f).fromLocalPod(local, false).dnatVia(setInternalVia).in(chainNATPrerouting)
	})
	perFamily(func(f *family) ruleSpec {
		return newRule(f).inSet(vsKeySrcs, setInternalViaKeys, false).markSet(mark, false).in(chainNATOutput)
	})
	perFamily(func(f *family) ruleSpec {
		return newRule(f).dnatVia(setInternalVia).in(chainNATOutput)
	})
	rs = append(rs, newRule(nil).markTest(mark).markSet(mark, true).
		then("masquerade fully-random", &expr.Masq{FullyRandom: true}).in(chainNATPostrouting))
	perFamily(func(f *family) ruleSpec {
		return newRule(f).inSet(hairpinSrcs, setHairpin, false).then("masquerade", &expr.Masq{}).in(chainNATPostrouting)
	})
	// The node's own connection from a service address leaving the node:
	// the kernel sources a connection to a VIP from that VIP (on
	// kube-ipvs0), and when IPVS sends it to a remote destination, the
	// reply goes to the destination's own node, which holds the same VIP.
	// Masqueraded whatever the cluster CIDRs and the plan's masquerade
	// mode, as kube-proxy's IPVS mode does without a local detector
	// (KUBE-CLUSTER-IP src,dst); with one, masquerade-off-cluster marks
	// it already. Not what is delivered here: with a source of its own,
	// it needs none, and a load balancer's ranges allow that source.
	perFamily(func(f *family) ruleSpec {
		return newRule(f).inSet([]source{srcSaddr}, setServiceIPs, false).daddrNotLocal().
			then("masquerade fully-random", &expr.Masq{FullyRandom: true}).in(chainNATPostrouting)
	})
	// Connections to our virtual servers get the conntrack mark
	// filter-forward tells their forwarded packets by. In any state: a
	// connection open before our table (taken over from kube-proxy) is
	// marked by its client's next packet. The test of the bit first keeps
	// a marked connection's packets to one comparison; an untracked
	// packet has no entry, so its ct mark load ends the rule. First in
	// the chain: no verdict of the rules below skips them.
	for _, set := range []string{setServicePorts, setNodePortServices} {
		perFamily(func(f *family) ruleSpec {
			return newRule(f).ctMarkTest(connMark, false).inSet(vsKeySrcs, set, false).
				ctMarkSet(connMark).in(chainFilterInput)
		})
	}
	perFamily(func(f *family) ruleSpec {
		return newRule(f).ctState("new,untracked", ctNewUntracked).vmap(vsKeySrcs, setEmptyServices).in(chainFilterInput)
	})
	perFamily(func(f *family) ruleSpec { return sourceRangesDrop(f, chainFilterInput) })
	perFamily(func(f *family) ruleSpec {
		return newRule(f).ctState("new", expr.CtStateBitNEW).
			l4protoIn("{ tcp, udp, sctp }", unix.IPPROTO_TCP, unix.IPPROTO_UDP, unix.IPPROTO_SCTP).
			inSet([]source{srcDaddr}, setServiceIPs, false).inSet(vsKeySrcs, setServicePorts, true).
			then("reject", rejectPortUnreachable()).in(chainFilterInput)
	})
	// The node's own traffic to an eTP=Local external virtual server is
	// not dropped for want of a local endpoint: nat-output sends it to the
	// ClusterIP. NAT chains run at the NAT core's priority (dstnat), after
	// this chain, whatever their own.
	perFamily(func(f *family) ruleSpec {
		return newRule(f).ctState("new,untracked", ctNewUntracked).inSet(vsKeySrcs, setInternalViaKeys, true).
			vmap(vsKeySrcs, setEmptyServices).in(chainFilterOutput)
	})
	// The node's own connections to a load balancer with source ranges
	// are held to them too, before IPVS takes them in LOCAL_OUT: they
	// come from its address on the dummy interface, which the ranges
	// hold only when the node's IP is in one (NodeInSourceRanges).
	perFamily(func(f *family) ruleSpec { return sourceRangesDrop(f, chainFilterOutput) })
	// Forwarded packets of service connections (in IPVS's NAT mode, the
	// replies to clients that are not on this node) get the masquerade
	// mark, which the accept rule we keep in other tables' forward chains
	// of policy drop lets through (forward.go): an accept here would not
	// override their drop. A service connection is told by the conntrack
	// mark filter-input gives it. Established and related packets only:
	// IPVS takes a connection's requests in INPUT, never in FORWARD, and a
	// related ICMP error carries its connection's entry (and a related
	// connection inherits its master's mark).
	rs = append(rs, newRule(nil).ctState("established,related", ctEstablishedRelated).
		ctMarkTest(connMark, true).markSet(mark, false).in(chainFilterForward))
	rs = append(rs,
		newRule(nil).l4proto("tcp", unix.IPPROTO_TCP).
			then("reject with tcp reset", &expr.Reject{Type: unix.NFT_REJECT_TCP_RST}).in(chainRejectPacket),
		newRule(nil).then("reject", rejectPortUnreachable()).in(chainRejectPacket))
	return rs
}

// sourceRangesDrop drops a packet to a load balancer with source ranges
// from a source they do not allow.
func sourceRangesDrop(f *family, chain string) ruleSpec {
	return newRule(f).inSet(vsKeySrcs, setLBSourceRanged, false).inSet(hairpinSrcs, setLBSourceAllowed, true).
		then("drop", &expr.Verdict{Kind: expr.VerdictDrop}).in(chain)
}

// rejectPortUnreachable is inet's plain "reject": ICMP or ICMPv6 port
// unreachable, as the packet's family needs.
func rejectPortUnreachable() *expr.Reject {
	return &expr.Reject{Type: unix.NFT_REJECT_ICMPX_UNREACH, Code: unix.NFT_REJECT_ICMPX_PORT_UNREACH}
}
