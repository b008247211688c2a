package nft_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft/internal/packettrace"
)

// editedTables reads the testbed's table with some rules replaced and
// chain policies changed: the interpreter's cases the table never has.
type editedTables struct {
	packettrace.Tables
	rules      map[string]map[int][]expr.Any // chain → rule index → expressions
	dropPolicy string                        // a chain whose policy becomes drop
}

func (e editedTables) GetRules(t *nftables.Table, c *nftables.Chain) ([]*nftables.Rule, error) {
	rs, err := e.Tables.GetRules(t, c)
	if err != nil {
		return nil, err
	}
	for i, exprs := range e.rules[c.Name] {
		rs[i].Exprs = exprs
	}
	return rs, nil
}

func (e editedTables) ListChainsOfTableFamily(f nftables.TableFamily) ([]*nftables.Chain, error) {
	cs, err := e.Tables.ListChainsOfTableFamily(f)
	for _, c := range cs {
		if c.Name == e.dropPolicy {
			drop := nftables.ChainPolicyDrop
			c.Policy = &drop
		}
	}
	return cs, err
}

// editedTracer is a tracer over the testbed with edits.
func editedTracer(t *testing.T, e editedTables) *packettrace.Tracer {
	t.Helper()
	tb := newTestbed(t)
	e.Tables = tb.tables
	tr, err := packettrace.New(e, tb.kernel, tb.node)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// podToWeb is a v4 pod's connection to the web ClusterIP: it passes
// every chain of the inbound path (nat-prerouting, filter-input).
func podToWeb(t *testing.T, port string) packettrace.Packet {
	return (&traceCase{src: "pod-b", dst: "web:" + port, backend: "pod-c"}).packet(t, v4)
}

func TestUnsupportedExpressionIsAnError(t *testing.T) {
	for _, tc := range []struct {
		name  string
		chain string
		e     expr.Any
	}{
		{name: "an expression kind the tracer does not model", chain: "filter-input", e: &expr.Log{}},
		{name: "a payload write", chain: "filter-input", e: &expr.Payload{OperationType: expr.PayloadWrite, SourceRegister: unix.NFT_REG_1, Base: expr.PayloadBaseNetworkHeader, Len: 4}},
		{name: "a payload of the link layer", chain: "filter-input", e: &expr.Payload{DestRegister: unix.NFT_REG_1, Base: expr.PayloadBaseLLHeader, Len: 6}},
		{name: "a meta key the tracer does not read", chain: "filter-input", e: &expr.Meta{Key: expr.MetaKeyIIFTYPE, Register: unix.NFT_REG_1}},
		{name: "a ct key other than state and mark", chain: "filter-input", e: &expr.Ct{Key: expr.CtKeyDST, Register: unix.NFT_REG_1}},
		{name: "a ct set of a key other than mark", chain: "filter-input", e: &expr.Ct{Key: expr.CtKeySTATE, Register: unix.NFT_REG_1, SourceRegister: true}},
		{name: "a fib lookup other than daddr type", chain: "filter-input", e: &expr.Fib{Register: unix.NFT_REG_1, FlagSADDR: true, ResultADDRTYPE: true}},
		{name: "a fib lookup of the output interface's index", chain: "filter-input", e: &expr.Fib{Register: unix.NFT_REG_1, FlagDADDR: true, ResultOIF: true}},
		{name: "a verdict the tracer does not model (queue)", chain: "filter-input", e: &expr.Verdict{Kind: expr.VerdictQueue}},
		{name: "snat", chain: "nat-prerouting", e: &expr.NAT{Type: expr.NATTypeSourceNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: unix.NFT_REG_1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := editedTracer(t, editedTables{rules: map[string]map[int][]expr.Any{tc.chain: {0: {tc.e}}}})
			_, err := tr.Trace(podToWeb(t, "80"))
			if !errors.Is(err, packettrace.ErrUnsupported) {
				t.Fatalf("Trace: %v, want ErrUnsupported", err)
			}
			if want := "chain " + tc.chain + " rule 0"; !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %q", err, want)
			}
		})
	}
}

// The vmap rule of filter-input (rule 4, IPv4) is replaced by a jump or
// a goto to reject-packet, whose first rule becomes a return: after a
// jump the calling chain goes on (and its rule 5 rejects port 81); after
// a goto the return ends the base chain with its policy (accept), and
// the packet reaches IPVS.
func TestReturnResumesAfterJumpNotAfterGoto(t *testing.T) {
	for _, tc := range []struct {
		name string
		kind expr.VerdictKind
		want string
	}{
		{name: "jump: return resumes the calling chain", kind: expr.VerdictJump, want: "reject-icmp(port-unreachable)"},
		{name: "goto: return ends the base chain", kind: expr.VerdictGoto, want: "deliver"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := editedTracer(t, editedTables{rules: map[string]map[int][]expr.Any{
				"filter-input":  {4: {&expr.Verdict{Kind: tc.kind, Chain: "reject-packet"}}},
				"reject-packet": {0: {&expr.Verdict{Kind: expr.VerdictReturn}}},
			}})
			res, err := tr.Trace(podToWeb(t, "81"))
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Summary(nameOf); got != tc.want {
				t.Errorf("verdict %q, want %q\n  %s", got, tc.want, strings.Join(res.Steps, "\n  "))
			}
		})
	}
}

func TestChainPolicyDropDropsWhatNoRuleAccepts(t *testing.T) {
	tr := editedTracer(t, editedTables{dropPolicy: "filter-input"})
	res, err := tr.Trace((&traceCase{src: "client", dst: "node:22"}).packet(t, v4))
	if err != nil {
		t.Fatal(err)
	}
	if res.Action != packettrace.Drop || res.By != "filter-input policy" {
		t.Errorf("action %s by %q, want drop by filter-input policy", res.Action, res.By)
	}
}

// ip_vs_leave: a virtual server IPVS cannot schedule (here a packet of an
// established connection to a service without endpoints, which
// filter-input's ct state test lets through) answers port unreachable.
func TestIPVSWithoutDestinationRejects(t *testing.T) {
	tr := newTracer(t)
	res, err := tr.Trace((&traceCase{src: "pod-b", dst: "empty:80", state: packettrace.StateEstablished}).packet(t, v6))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Summary(nameOf); got != "reject-icmp(port-unreachable)" || res.By != "ipvs" {
		t.Errorf("verdict %q by %q, want reject-icmp(port-unreachable) by ipvs", got, res.By)
	}
}

func TestPacketErrors(t *testing.T) {
	tr := newTracer(t)
	mixed := podToWeb(t, "80")
	mixed.Dst = addrPort(t, "web:80", v6)
	notBackend := podToWeb(t, "80")
	notBackend.Backend = addr(t, "pod-d", v4)
	badProto := podToWeb(t, "80")
	badProto.Proto = "gre"
	for _, tc := range []struct {
		name string
		p    packettrace.Packet
		want string
	}{
		{name: "addresses of two families", p: mixed, want: "two addresses of one family"},
		{name: "a backend that is no destination", p: notBackend, want: "is no destination"},
		{name: "an unknown protocol", p: badProto, want: "want tcp, udp, sctp or icmp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tr.Trace(tc.p); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Trace: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// nat-postrouting's first rule clears the masquerade mark (bit 14) and
// masquerades fully-random; the hairpin rule masquerades plainly.
func TestMasqueradeByMarkClearsItAndIsFullyRandom(t *testing.T) {
	tr := newTracer(t)
	for _, tc := range []struct {
		name        string
		c           traceCase
		why         string
		fullyRandom bool
	}{
		{name: "by mark", c: traceCase{src: "other-node", dst: "web:80"}, why: "mark", fullyRandom: true},
		{name: "hairpin", c: traceCase{src: "pod-a", dst: "web:80", backend: "pod-a"}, why: "hairpin"},
	} {
		for fam := range 2 {
			t.Run(famName(fam)+"/"+tc.name, func(t *testing.T) {
				res, err := tr.Trace(tc.c.packet(t, fam))
				if err != nil {
					t.Fatal(err)
				}
				if res.Masquerade != tc.why || res.FullyRandom != tc.fullyRandom || res.Mark&0x4000 != 0 {
					t.Errorf("masquerade %q fully-random %t mark %#x, want %q %t and bit 14 clear",
						res.Masquerade, res.FullyRandom, res.Mark, tc.why, tc.fullyRandom)
				}
			})
		}
	}
}
