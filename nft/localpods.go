package nft

import (
	"fmt"
	"strings"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// ifNameSize is IFNAMSIZ: the kernel's interface names are at most 15
// bytes and a NUL, and meta iifname, meta oifname and fib oifname load
// all 16 bytes.
const ifNameSize = unix.IFNAMSIZ

// localPods is how the rules tell this node's pods, kube-proxy's
// detectLocalMode: by source address in the cluster-cidrs set
// (ClusterCIDR, and NodeCIDR, whose node podCIDRs take the cluster
// CIDRs' place), or by the interface a packet comes in on (BridgeInterface,
// InterfaceNamePrefix).
type localPods struct {
	iface  string // empty: by address
	prefix bool   // iface is a name prefix
}

func (c Config) localPods() localPods {
	return localPods{iface: c.PodInterface, prefix: c.PodInterfacePrefix}
}

// validate reports an interface name or prefix that no interface can
// have: kube-proxy refuses an empty one, and nft refuses one longer than
// an interface name.
func (l localPods) validate() error {
	what := "pod bridge interface"
	if l.prefix {
		what = "pod interface name prefix"
	}
	switch {
	case l.prefix && l.iface == "":
		return fmt.Errorf("%s: must not be empty", what)
	case len(l.iface) >= ifNameSize:
		return fmt.Errorf("%s %q: longer than %d bytes, the longest interface name", what, l.iface, ifNameSize-1)
	case strings.ContainsRune(l.iface, 0):
		return fmt.Errorf("%s %q: contains a NUL byte", what, l.iface)
	}
	return nil
}

// text is the interface operand in nft's syntax: "cbr0", or "veth*" for
// a prefix.
func (l localPods) text() string {
	if l.prefix {
		return `"` + l.iface + `*"`
	}
	return `"` + l.iface + `"`
}

// data is what the loaded name is compared with: the whole 16 bytes,
// NUL-padded, for a name (so "cbr0" does not match "cbr01"); only the
// prefix's bytes for a prefix, as nft encodes "veth*".
func (l localPods) data() []byte {
	if l.prefix {
		return []byte(l.iface)
	}
	b := make([]byte, ifNameSize)
	copy(b, l.iface)
	return b
}

// ifName compares the name loaded by load (meta iifname, meta oifname or
// fib daddr oifname) with the pods' interface.
func (b *ruleBuilder) ifName(text string, load expr.Any, l localPods, not bool) *ruleBuilder {
	op, cmp := "", expr.CmpOpEq
	if not {
		op, cmp = "!= ", expr.CmpOpNeq
	}
	b.text = append(b.text, text+" "+op+l.text())
	b.exprs = append(b.exprs, load, &expr.Cmp{Op: cmp, Register: unix.NFT_REG_1, Data: l.data()})
	return b
}

// fromLocalPod matches packets from this node's pods or, with not, from
// anywhere else (the node itself included): kube-proxy's IfLocal and
// IfNotLocal.
func (b *ruleBuilder) fromLocalPod(l localPods, not bool) *ruleBuilder {
	if l.iface == "" {
		return b.inSet([]source{srcSaddr}, setClusterCIDRs, not)
	}
	return b.ifName("iifname", &expr.Meta{Key: expr.MetaKeyIIFNAME, Register: unix.NFT_REG_1}, l, not)
}

// toLocalPod matches packets to this node's pods, for the replies of
// NOTRACK connections, so that they are untracked exactly when the
// requests fromLocalPod matched were. By address it is the cluster-cidrs
// set; by interface it is the interface the packet leaves by: in
// raw-output the route is chosen already (meta oifname), in
// raw-prerouting it is not yet, so the route is looked up (fib daddr
// oifname), as routing will a moment later.
func (b *ruleBuilder) toLocalPod(l localPods, chain string) *ruleBuilder {
	switch {
	case l.iface == "":
		return b.inSet([]source{srcDaddr}, setClusterCIDRs, false)
	case chain == chainRawOutput:
		return b.ifName("oifname", &expr.Meta{Key: expr.MetaKeyOIFNAME, Register: unix.NFT_REG_1}, l, false)
	}
	return b.ifName("fib daddr oifname", &expr.Fib{Register: unix.NFT_REG_1, FlagDADDR: true, ResultOIFNAME: true}, l, false)
}
