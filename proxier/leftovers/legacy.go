package leftovers

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// LegacyRemoval is what was cut from one iptables-legacy table.
type LegacyRemoval struct {
	// Table is the family and table, as "ip nat".
	Table string
	// Chains are kube-proxy's chains removed.
	Chains []string
	// Rules are the rules removed from chains that stay, as
	// "PREROUTING -> KUBE-SERVICES".
	Rules []string
	// KeptForward says that KUBE-FORWARD stays if there, the table's
	// FORWARD policy being DROP (legacyDoomed).
	KeptForward bool
}

// xtKernel is the x_tables calls a table's removal makes; xtSockets is
// the running kernel's.
type xtKernel interface {
	// read returns a table's entries and its ipt_getinfo.
	read(v6 bool, table string) (blob, info []byte, err error)
	// replace writes a table over one of oldEntries entries (EAGAIN if
	// it no longer has that many) and returns the old table's counters.
	replace(v6 bool, table string, sp xtSplice, oldEntries uint32) (old []byte, err error)
	// addCounters adds counters, one per entry, to a table's.
	addCounters(v6 bool, table string, counters []byte) error
}

// xtReplaceTries is how many times a table is read, spliced and written
// while the kernel says it changed in between (EAGAIN).
const xtReplaceTries = 5

// removeLegacyTable splices kube-proxy's chains out of one table and
// writes it back, reading it again when it changed under us, then gives
// the entries that stayed the counters they had.
func removeLegacyTable(k xtKernel, v6 bool, table string) (LegacyRemoval, error) {
	fam, l := "ip", iptEntry
	if v6 {
		fam, l = "ip6", ip6tEntry
	}
	r := LegacyRemoval{Table: fam + " " + table}
	for range xtReplaceTries {
		blob, rawInfo, err := k.read(v6, table)
		if err != nil {
			return r, fmt.Errorf("read: %w", err)
		}
		info, err := parseXtInfo(rawInfo)
		if err != nil {
			return r, err
		}
		policy := ""
		if table == "filter" {
			if policy, err = xtHookPolicy(blob, rawInfo, xtHookForward, l); err != nil {
				return r, fmt.Errorf("not changed: FORWARD: %w", err)
			}
		}
		r.KeptForward = policy == "DROP"
		sp, err := spliceXtTable(blob, info, l, legacyDoomed(table, policy))
		if err != nil {
			return r, fmt.Errorf("not changed: %w", err)
		}
		if len(sp.Chains) == 0 {
			return r, nil
		}
		old, err := k.replace(v6, table, sp, info.NumEntries)
		if errors.Is(err, unix.EAGAIN) {
			continue
		}
		if err != nil {
			return r, fmt.Errorf("IPT_SO_SET_REPLACE: %w", err)
		}
		r.Chains, r.Rules = sp.Chains, sp.Rules
		if err := k.addCounters(v6, table, xtCarryCounters(sp.Kept, old)); err != nil {
			return r, fmt.Errorf("replaced; carrying the rules' counters over: %w", err)
		}
		return r, nil
	}
	return r, fmt.Errorf("IPT_SO_SET_REPLACE: the table kept changing: %w", unix.EAGAIN)
}

// xtCounterSize is xt_counters': packets and bytes, u64 each.
const xtCounterSize = 16

// xtCarryCounters orders the old table's counters (one per old entry)
// as the new table's entries: kept is the old index of each new entry.
func xtCarryCounters(kept []int, old []byte) []byte {
	out := make([]byte, xtCounterSize*len(kept))
	for i, o := range kept {
		if xtCounterSize*(o+1) <= len(old) {
			copy(out[xtCounterSize*i:], old[xtCounterSize*o:xtCounterSize*(o+1)])
		}
	}
	return out
}
