//go:build integration

package demo

import (
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/labnet"
)

// demo holds what the rows need, and whether every row matched.
type demo struct {
	t    *testing.T
	plan planFile
	lab  *lab
	ok   bool
}

// peerRule says which client address a backend must see.
type peerRule struct {
	what string // how the row describes it
	ok   func(backend string, peer netip.Addr) bool
}

// masqueraded: the backend sees node-a's address on the link toward it.
func masqueraded(why string) peerRule {
	return peerRule{what: "node-a's address toward the backend: masqueraded (" + why + ")",
		ok: func(backend string, peer netip.Addr) bool {
			addrs, err := linkAddrs(netip.MustParseAddr(backend))
			return err == nil && addrs[peer]
		}}
}

// kept: the backend sees the client's own address.
func kept(c *client, why string) peerRule {
	return peerRule{what: "the client's own address: " + why,
		ok: func(_ string, peer netip.Addr) bool { return peer == c.v4 || peer == c.v6 }}
}

// row is one printed block: a title, a verdict and labelled lines.
type row struct {
	title    string
	lines    [][2]string
	problems []string
}

func (r *row) add(label, format string, args ...any) {
	r.lines = append(r.lines, [2]string{label, fmt.Sprintf(format, args...)})
}

func (r *row) fail(format string, args ...any) {
	r.problems = append(r.problems, fmt.Sprintf(format, args...))
}

// print prints the row and records a mismatch.
func (d *demo) print(r *row) {
	verdict := "ok"
	if len(r.problems) > 0 {
		verdict, d.ok = "MISMATCH", false
	}
	fmt.Printf("\n%s  [%s]\n", r.title, verdict)
	for _, l := range r.lines {
		fmt.Printf("  %-9s %s\n", l[0]+":", l[1])
	}
	for _, p := range r.problems {
		fmt.Printf("  %-9s %s\n", "MISMATCH:", p)
	}
}

// section prints a section header.
func section(format string, args ...any) {
	fmt.Printf("\n=== "+format+"\n", args...)
}

func (v planVS) target() string { return net.JoinHostPort(v.Address, strconv.Itoa(v.Port)) }

func (v planVS) addr() netip.Addr { return netip.MustParseAddr(v.Address) }

func (v planVS) title(from *client) string {
	return fmt.Sprintf("%s %s  %s (%s)  %s, from %s", v.Protocol, v.target(), v.Service, v.PortName, v.Kind, from)
}

// planned renders the plan's destinations as kernelVS does.
func (v planVS) planned() []string {
	var out []string
	for _, d := range v.Destinations {
		out = append(out, formatDest(d.Address, d.Port, d.Weight))
	}
	slices.Sort(out)
	return out
}

// policy renders what the policy decided, with the plan's reason.
func (v planVS) policy() string {
	var extra []string
	if v.NoTrack {
		extra = append(extra, "NOTRACK")
	}
	if v.Scheduler != "rr" {
		extra = append(extra, "scheduler "+v.Scheduler)
	}
	if v.PersistenceTimeoutSeconds > 0 {
		extra = append(extra, fmt.Sprintf("ClientIP affinity %ds", v.PersistenceTimeoutSeconds))
	}
	if len(v.SourceRanges) > 0 {
		extra = append(extra, "source ranges "+strings.Join(v.SourceRanges, ","))
	}
	extra = append(extra, "masquerade "+v.Masquerade)
	return fmt.Sprintf("%s (%s): %s", v.TrafficPolicy, strings.Join(extra, ", "), v.Reason)
}

// showPlanAndKernel adds the policy, plan and kernel lines, and a
// problem when the kernel differs from the plan. brief adds lines only
// for a difference (the rows repeating an earlier one's virtual server).
func showPlanAndKernel(r *row, v planVS, brief bool) {
	planned, label := v.planned(), "plan"
	if v.expected {
		label = "expect"
	}
	if !brief {
		r.add("policy", "%s", v.policy())
		if len(planned) == 0 {
			r.add(label, "no destinations; when empty: %s", v.WhenEmpty)
		} else {
			r.add(label, "%s", strings.Join(planned, ", "))
		}
	}
	kernel, exists, err := kernelVS(v.Protocol, v.addr(), v.Port)
	var line string
	switch {
	case err != nil:
		line = err.Error()
		r.fail("cannot read the IPVS virtual server: %v", err)
	case !exists:
		line = "no IPVS virtual server"
		r.fail("the plan has a virtual server, the kernel none")
	case len(kernel) == 0:
		line = "an IPVS virtual server without destinations"
	default:
		line = strings.Join(kernel, ", ")
	}
	if exists && !slices.Equal(kernel, planned) {
		r.fail("the kernel's destinations differ from the plan's")
	}
	if !brief || len(r.problems) > 0 {
		r.add("kernel", "%s", line)
	}
}

// served sends traffic from c to a virtual server the plan gives
// destinations and checks who answered and what they saw. brief leaves
// out the policy, plan and kernel lines (shown in an earlier row) unless
// the kernel now differs.
// extras add lines (and problems) after the traffic.
func (d *demo) served(c *client, v planVS, rule peerRule, brief bool, extras ...func(*row, outcome)) outcome {
	r := &row{title: v.title(c)}
	showPlanAndKernel(r, v, brief)
	o := exchange(c, labnet.Proto(strings.ToLower(v.Protocol)), v.target(), nExchanges)
	answered := formatCounts(names(o.answered))
	if o.failed > 0 {
		answered += fmt.Sprintf(" (%d of %d failed; first: %v)", o.failed, nExchanges, o.first)
	}
	r.add("answered", "%s", answered)
	checkAnswers(r, v, o)
	if len(o.peers) > 0 {
		r.add("saw", "%s: %s", formatCounts(o.peers), rule.what)
	}
	for _, s := range slices.SortedFunc(maps.Keys(o.seen), func(a, b seen) int { return strings.Compare(a.backend+a.peer.String(), b.backend+b.peer.String()) }) {
		if !rule.ok(s.backend, s.peer) {
			r.fail("%s saw %s, not %s", s.backend, s.peer, rule.what)
		}
	}
	for _, x := range extras {
		x(r, o)
	}
	d.print(r)
	return o
}

// checkAnswers fails the row unless the answers follow the plan: only
// planned destinations, each of them (or exactly one under ClientIP
// affinity).
func checkAnswers(r *row, v planVS, o outcome) {
	planned := map[string]bool{}
	for _, dst := range v.Destinations {
		if dst.Weight > 0 {
			planned[dst.Address] = true
		}
	}
	if len(o.answered) == 0 {
		r.fail("nobody answered")
	}
	for name := range o.answered {
		if !planned[name] {
			r.fail("%s answered: not a destination of the plan", name)
		}
	}
	if v.PersistenceTimeoutSeconds > 0 {
		if len(o.answered) > 1 {
			r.fail("%d backends answered one client under ClientIP affinity", len(o.answered))
		} else {
			r.add("note", "ClientIP affinity: one client sticks to one backend")
		}
		return
	}
	for name := range planned {
		if o.answered[name] == 0 && len(o.answered) > 0 {
			r.fail("planned destination %s never answered", name)
		}
	}
}

// dropped sends a few connections from c that the plan says are dropped
// and checks that every one timed out.
func (d *demo) dropped(c *client, v planVS, why string, brief bool) {
	r := &row{title: v.title(c)}
	showPlanAndKernel(r, v, brief)
	if v.expected {
		why = "as expected: " + why
	} else {
		why = "as planned: " + why
	}
	d.expectDrop(r, c, v.Protocol, v.target(), why)
	d.print(r)
}

// expectDrop adds the result line of nDrops attempts that must all time
// out.
func (d *demo) expectDrop(r *row, c *client, proto, target, why string) {
	o := exchange(c, labnet.Proto(strings.ToLower(proto)), target, nDrops)
	if o.dropped(nDrops) {
		r.add("answered", "nobody: %d of %d attempts timed out: dropped, %s", o.timeouts, nDrops, why)
		return
	}
	r.add("answered", "%s; %d of %d failed (%d timed out; first: %v)", formatCounts(names(o.answered)), o.failed, nDrops, o.timeouts, o.first)
	r.fail("want every attempt dropped, %s", why)
}
