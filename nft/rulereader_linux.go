package nft

import (
	"fmt"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"github.com/mdlayher/netlink/nltest"
	"golang.org/x/sys/unix"
)

// newRuleMsg is the type of the kernel's answers to a rule dump.
const newRuleMsg = netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_NEWRULE)

// RuleReader reads rules (GetRules) decoding the ct expressions
// google/nftables v0.3.0 alone cannot (ctexprs.go): a ct load with a
// direction, and a ct set. Use it only for reads.
type RuleReader struct{ c *nftables.Conn }

// NewRuleReader returns a RuleReader. Each request is sent on a netlink
// socket of its own, in the calling thread's network namespace, as
// google/nftables does, and the answers are rewritten before
// google/nftables decodes them.
func NewRuleReader() (*RuleReader, error) {
	c, err := nftables.New(nftables.WithTestDial(exchangeWidened))
	if err != nil {
		return nil, err
	}
	return &RuleReader{c: c}, nil
}

// GetRules returns a chain's rules as the kernel holds them.
func (r *RuleReader) GetRules(t *nftables.Table, ch *nftables.Chain) ([]*nftables.Rule, error) {
	rules, err := r.c.GetRules(t, ch)
	restoreCtSets(rules)
	return rules, err
}

// exchangeWidened sends req to the kernel and returns its answers, each
// rule's ct expressions rewritten (rewriteCtExprs), as one answer (no multipart flag: the
// dump's end was consumed here) addressed as the test socket's
// (nltest.PID) answer to each request.
func exchangeWidened(req []netlink.Message) ([]netlink.Message, error) {
	if len(req) == 0 {
		return nil, nil
	}
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, nil)
	if err != nil {
		return nil, fmt.Errorf("dial netlink netfilter: %w", err)
	}
	defer c.Close()
	var out []netlink.Message
	for _, m := range req {
		// The real socket numbers and addresses its own request.
		real := m
		real.Header.PID, real.Header.Sequence = 0, 0
		answers, err := c.Execute(real)
		if err != nil {
			return nil, err
		}
		for _, a := range answers {
			// As if from the socket google/nftables sent on, which
			// checks the answers against its request.
			a.Header.PID, a.Header.Sequence = nltest.PID, m.Header.Sequence
			a.Header.Flags &^= netlink.Multi
			if a.Header.Type == newRuleMsg {
				a.Data = rewriteCtExprs(a.Data)
			}
			out = append(out, a)
		}
	}
	return out, nil
}
