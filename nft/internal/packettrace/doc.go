// Package packettrace owns the unit-test model of the data plane's packet
// path: it traces one packet through the committed state of the nftables
// table (read from nft.Fake, or any reader with its four read methods)
// and of IPVS (read from ipvs.FakeKernel), hook by hook in the kernel's
// order (nft/README.md "Hooks"), and reports the verdict: delivered, sent
// on, dropped or rejected; whether it was NOTRACK'd, DNATed (by the
// table's internal-via map or by IPVS) and masqueraded (by mark or
// hairpin); and every (chain, rule) that matched, for coverage. It keeps
// each connection's conntrack mark from one trace to the next, so a
// reply sees what its connection's earlier packets set.
//
// Rules are interpreted expression by expression (meta, payload, cmp,
// bitwise, ct, fib daddr type and oifname over the node's routes, lookup
// in sets, verdict and data maps, nat, masq, notrack, reject, verdicts):
// the tracer knows no policy and no rule by name, so a wrong expression in
// nft/rules.go shows up as a wrong verdict. An expression it does not
// model is an error naming the chain and rule, never a silent pass. What
// the model leaves out (IPVS's reverse NAT of replies, the NAT binding of
// established connections) is in README.md.
//
// It is test support: it is imported only from _test.go files, the
// packet-trace cases beside the rules they test (nft/trace_*_test.go),
// and it lives under nft/internal so that nothing outside nft/ can import
// it (internal/layering checks that only tests do). It reads google/nftables
// expressions, because interpreting them is its job, and ipvs.Kernel's
// listing of virtual servers; it never programs a kernel and imports no
// client-go.
package packettrace
