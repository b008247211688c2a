package nft

import (
	"errors"
	"fmt"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
)

// The accept rule we keep in other tables' forward chains. nftables runs
// every base chain of a hook, and a drop in any of them is final: an
// accept in our filter-forward cannot let a packet through a chain of
// policy drop (Docker's iptables-nft `-P FORWARD DROP`, a hardened inet
// filter table). filter-forward marks the forwarded packets of service
// connections; this rule, at the head of each such chain, accepts what
// carries the mark. It is the one form iptables-nft can list too
// (`-m mark --mark 0x4000/0x4000 -m comment --comment "..." -j ACCEPT`):
// a meta mark test, an accept, and the comment in the rule's user data.

// forwardCommentPrefix starts the comment of every accept rule we keep:
// a rule whose comment starts with it is ours, whatever its mark.
const forwardCommentPrefix = "kube-ipvs-proxy: accept forwarded service traffic"

// forwardComment is the comment of the rule for mark.
func forwardComment(mark uint32) string {
	return fmt.Sprintf("%s (mark 0x%x, table inet %s)", forwardCommentPrefix, mark, TableName)
}

// forwardAcceptRule is the rule we keep in chain c.
func forwardAcceptRule(c *nftables.Chain, mark uint32) *nftables.Rule {
	b := newRule(nil).markTest(mark).then("accept", &expr.Verdict{Kind: expr.VerdictAccept})
	return &nftables.Rule{Table: c.Table, Chain: c, Exprs: b.exprs,
		UserData: userdata.AppendString(nil, userdata.TypeComment, forwardComment(mark))}
}

// forwardFamilies are the families whose forward chains see forwarded
// IP packets.
var forwardFamilies = []nftables.TableFamily{nftables.TableFamilyIPv4, nftables.TableFamilyIPv6, nftables.TableFamilyINet}

// foreignChain is a base chain of another table on the forward hook,
// with its rules as read.
type foreignChain struct {
	chain *nftables.Chain
	rules []*nftables.Rule
}

// forwardOp is one change to a foreign chain: insert our rule at its
// head, or delete the rule with handle.
type forwardOp struct {
	chain  *nftables.Chain
	insert bool
	handle uint64
}

// needsForwardAccept says whether a forward chain drops what no rule
// accepts and runs after filter-forward, so that our rule there sees
// the mark: a filter chain of policy drop at a priority above ours.
func needsForwardAccept(c *nftables.Chain) bool {
	return c.Hooknum != nil && *c.Hooknum == *nftables.ChainHookForward && c.Type == nftables.ChainTypeFilter &&
		c.Policy != nil && *c.Policy == nftables.ChainPolicyDrop &&
		c.Priority != nil && *c.Priority > priorityFilterForward
}

// planForwardAccepts returns the changes that leave exactly one rule of
// ours, with comment want, in each chain keep holds, and none in the
// others: a missing rule is inserted, rules of ours with another
// comment (another mark) and duplicates are deleted. Rules of others are
// never touched. The order is the chains', deletes first in each.
func planForwardAccepts(chains []foreignChain, want string, keep func(*nftables.Chain) bool) []forwardOp {
	var ops []forwardOp
	for _, fc := range chains {
		needs, kept := keep(fc.chain), false
		for _, r := range fc.rules {
			c, ok := userdata.GetString(r.UserData, userdata.TypeComment)
			if !ok || !strings.HasPrefix(c, forwardCommentPrefix) {
				continue
			}
			if needs && !kept && c == want {
				kept = true
				continue
			}
			ops = append(ops, forwardOp{chain: fc.chain, handle: r.Handle})
		}
		if needs && !kept {
			ops = append(ops, forwardOp{chain: fc.chain, insert: true})
		}
	}
	return ops
}

// ForwardStats says what the last sync did to other tables' forward
// chains (ResyncStats.Forward).
type ForwardStats struct {
	// Chains names the chains that hold our accept rule ("ip filter
	// FORWARD"), sorted as read.
	Chains []string
	// Inserted and Deleted count the rules changed.
	Inserted, Deleted int
}

// readForwardChains reads every forward base chain of other tables, with
// its rules. A chain that went away between the two reads is skipped.
func (w *Writer) readForwardChains() ([]foreignChain, error) {
	var out []foreignChain
	var errs []error
	for _, fam := range forwardFamilies {
		chains, err := w.conn.ListChainsOfTableFamily(fam)
		if err != nil {
			errs = append(errs, fmt.Errorf("list chains of family %s: %w", familyName(fam), err))
			continue
		}
		for _, c := range chains {
			if c.Hooknum == nil || *c.Hooknum != *nftables.ChainHookForward ||
				c.Table.Family == w.table.Family && c.Table.Name == w.table.Name {
				continue
			}
			rules, err := w.conn.GetRules(c.Table, c)
			if err != nil {
				errs = append(errs, fmt.Errorf("read rules of chain %s: %w", chainText(c), err))
				continue
			}
			out = append(out, foreignChain{chain: c, rules: rules})
		}
	}
	return out, errors.Join(errs...)
}

func chainText(c *nftables.Chain) string { return tableText(c.Table) + " " + c.Name }

// syncForwardAccepts reads the forward chains of other tables and applies
// planForwardAccepts, one batch per chain, so that a chain we cannot
// change (gone meanwhile, or a table its owner locked) leaves the others
// done. It returns what it did and every error, joined.
func (w *Writer) syncForwardAccepts(keep func(*nftables.Chain) bool) (ForwardStats, error) {
	var st ForwardStats
	chains, err := w.readForwardChains()
	errs := []error{err}
	mark := w.cfg.mark()
	ops := planForwardAccepts(chains, forwardComment(mark), keep)
	for i := 0; i < len(ops); {
		c, j := ops[i].chain, i
		var ins, del int
		for ; j < len(ops) && ops[j].chain == c; j++ {
			if ops[j].insert {
				w.conn.InsertRule(forwardAcceptRule(c, mark))
				ins++
			} else if err := w.conn.DelRule(&nftables.Rule{Table: c.Table, Chain: c, Handle: ops[j].handle}); err != nil {
				errs = append(errs, fmt.Errorf("delete rule %d of chain %s: %w", ops[j].handle, chainText(c), err))
			} else {
				del++
			}
		}
		if err := w.conn.Flush(); err != nil {
			errs = append(errs, fmt.Errorf("chain %s: %d accept rules to insert, %d to delete: %w", chainText(c), ins, del, err))
		} else {
			st.Inserted, st.Deleted = st.Inserted+ins, st.Deleted+del
		}
		i = j
	}
	for _, fc := range chains {
		if keep(fc.chain) {
			st.Chains = append(st.Chains, chainText(fc.chain))
		}
	}
	return st, errors.Join(errs...)
}

// ensureForwardAccepts keeps our accept rule in every forward chain that
// needs it (needsForwardAccept) and removes it from the others. A
// failure is returned once: the same failure again (a table whose owner
// refuses us, at every sync) is only kept in LastResync, so that it does
// not fail every sync of a proxy whose own table is fine.
func (w *Writer) ensureForwardAccepts() error {
	st, err := w.syncForwardAccepts(needsForwardAccept)
	w.last.Forward = st
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	w.last.ForwardErr = msg
	if err == nil || msg == w.forwardErr {
		w.forwardErr = msg
		return nil
	}
	w.forwardErr = msg
	return fmt.Errorf("%w: %w", ErrForwardAccepts, err)
}

// ErrForwardAccepts wraps a failure to keep our accept rules in other
// tables' forward chains; our own table is programmed.
var ErrForwardAccepts = errors.New("accept rules in other tables' forward chains")
