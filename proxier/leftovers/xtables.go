package leftovers

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Reading iptables-legacy's rules. x_tables hands a table out whole, as
// the blob iptables-legacy-save reads (getsockopt IPT_SO_GET_ENTRIES):
// one entry after another, each a fixed header (ipt_entry, ip6t_entry),
// its matches, and its target. A user-defined chain starts with an entry
// whose target is ERROR, holding the chain's name, and ends with the
// entry of its implicit RETURN; the table ends with an ERROR entry named
// "ERROR". No Go library reads it (go-iptables runs the binary), so this
// is the minimum by hand: chain names and rule counts, no match or
// target decoded but ERROR's name.

// xtEntryLayout is where an entry's header keeps its target and next
// offsets (both u16), and its size.
type xtEntryLayout struct {
	targetOffset, nextOffset, size int
}

var (
	// ipt_entry: ipt_ip (84 bytes), nfcache, target_offset, next_offset,
	// comefrom, xt_counters (16): 112 bytes.
	iptEntry = xtEntryLayout{targetOffset: 88, nextOffset: 90, size: 112}
	// ip6t_entry: ip6t_ip6 (136 bytes), nfcache, target_offset,
	// next_offset, comefrom, 4 bytes of padding, xt_counters: 168 bytes.
	ip6tEntry = xtEntryLayout{targetOffset: 140, nextOffset: 142, size: 168}
)

const (
	// xt_entry_target: target_size (u16), name[29], revision (u8), then
	// the target's data (for ERROR, the chain name).
	xtTargetNameOff = 2
	xtTargetNameLen = 29
	xtTargetDataOff = 32
	xtErrorTarget   = "ERROR"
)

// cString is b up to its first NUL.
func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// xtChainRules returns the number of rules of each user-defined chain of
// a table's entries blob: the entries between the chain's ERROR head
// and the next ERROR entry, less its implicit RETURN. A malformed blob
// is an error naming the offset.
func xtChainRules(blob []byte, l xtEntryLayout) (map[string]int, error) {
	out := map[string]int{}
	chain, entries := "", 0
	closeChain := func() {
		if chain != "" {
			out[chain] = max(entries-1, 0)
		}
	}
	for off := 0; off < len(blob); {
		e, err := xtParseEntry(blob, off, l)
		if err != nil {
			return nil, err
		}
		if e.target == xtErrorTarget {
			closeChain()
			chain, entries = e.errName, 0
			if chain == xtErrorTarget { // the table's end
				chain = ""
			}
		} else if chain != "" {
			entries++
		}
		off += e.size
	}
	closeChain()
	return out, nil
}

// legacyServes says whether kube-proxy's rules are in iptables-legacy's
// nat table of a family: its KUBE-SERVICES and KUBE-POSTROUTING both
// hold rules, as KubeProxyServes asks of iptables-nft's. chains reads a
// family's nat chains and their rule counts (nil: no legacy nat table).
func legacyServes(chains func(v6 bool) (map[string]int, error)) (bool, error) {
	for _, v6 := range []bool{false, true} {
		c, err := chains(v6)
		if err != nil {
			return false, err
		}
		if c["KUBE-SERVICES"] > 0 && c["KUBE-POSTROUTING"] > 0 {
			return true, nil
		}
	}
	return false, nil
}

// ipt_getinfo's fields after the table's name (xtTableMaxName bytes):
// valid_hooks, then hook_entry[5] and underflow[5], offsets into the
// entries blob. A built-in chain's underflow is its policy entry.
const (
	xtInfoValidHooksOff = 32
	xtInfoUnderflowOff  = 56
	xtHookForward       = 2 // NF_INET_FORWARD
	// A standard target's data is its verdict: -NF_DROP-1 or
	// -NF_ACCEPT-1 for a policy (a jump is an offset, >= 0).
	xtStandardTarget = ""
	xtVerdictDrop    = -1
	xtVerdictAccept  = -2
)

// xtHookPolicy reads the policy of the built-in chain on hook from a
// table's blob and ipt_getinfo: "DROP" or "ACCEPT"; "" when the table
// has no chain on that hook. A policy entry that is not a standard
// target with a policy verdict is an error naming its offset.
func xtHookPolicy(blob, info []byte, hook int, l xtEntryLayout) (string, error) {
	if len(info) < xtInfoUnderflowOff+4*5 {
		return "", fmt.Errorf("ipt_getinfo of %d bytes: too short", len(info))
	}
	if binary.NativeEndian.Uint32(info[xtInfoValidHooksOff:])&(1<<hook) == 0 {
		return "", nil
	}
	off := int(binary.NativeEndian.Uint32(info[xtInfoUnderflowOff+4*hook:]))
	e, err := xtParseEntry(blob, off, l)
	if err != nil {
		return "", fmt.Errorf("policy entry: %w", err)
	}
	if e.target != xtStandardTarget {
		return "", fmt.Errorf("policy entry at %d: target %q, want the standard target", off, e.target)
	}
	switch v := e.verdict; v {
	case xtVerdictDrop:
		return "DROP", nil
	case xtVerdictAccept:
		return "ACCEPT", nil
	default:
		return "", fmt.Errorf("policy entry at %d: verdict %d, not a policy", off, v)
	}
}
