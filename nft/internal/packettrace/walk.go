package packettrace

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft"
)

// Tracer traces packets through a snapshot of the nftables table and
// IPVS, taken by New. It counts the rules each trace matched, for
// coverage. It is safe for concurrent use.
type Tracer struct {
	tab    *table
	ipvs   map[vsKey][]ipvsDest
	local  map[netip.Addr]bool
	routes []Route
	hooks  map[nftables.ChainHook][]stage

	mu    sync.Mutex
	hits  map[RuleRef]int
	conns map[connKey]uint32 // conntrack marks, by connection
}

// stage is one step of a hook: a base chain, or the kernel's conntrack
// or IPVS, at its priority.
type stage struct {
	prio  int32
	kind  stageKind
	chain *chain
}

type stageKind uint8

const (
	stageChain stageKind = iota
	stageConntrack
	stageIPVS
)

// Kernel priorities of the stages that are not ours: conntrack at -200
// (NF_IP_PRI_CONNTRACK) in PREROUTING and OUTPUT; IPVS handles requests
// at 99 in LOCAL_IN (NF_IP_PRI_NAT_SRC - 1) and at -98 in LOCAL_OUT
// (NF_IP_PRI_NAT_DST + 2).
const (
	prioConntrack = -200
	prioIPVSIn    = 99
	prioIPVSOut   = -98
)

// New snapshots the table inet nft.TableName from tables and the virtual
// servers from k. Later changes to either are not seen: make a new
// Tracer.
func New(tables Tables, k IPVS, node Node) (*Tracer, error) {
	tab, err := readTable(tables, nft.TableName)
	if err != nil {
		return nil, err
	}
	vss, err := readIPVS(k)
	if err != nil {
		return nil, err
	}
	t := &Tracer{tab: tab, ipvs: vss, local: map[netip.Addr]bool{}, routes: node.Routes, hooks: map[nftables.ChainHook][]stage{},
		hits: map[RuleRef]int{}, conns: map[connKey]uint32{}}
	for _, a := range node.Local {
		t.local[a.Unmap()] = true
	}
	kernel := map[nftables.ChainHook][]stage{
		*nftables.ChainHookPrerouting: {{prio: prioConntrack, kind: stageConntrack}},
		*nftables.ChainHookInput:      {{prio: prioIPVSIn, kind: stageIPVS}},
		*nftables.ChainHookOutput:     {{prio: prioConntrack, kind: stageConntrack}, {prio: prioIPVSOut, kind: stageIPVS}},
	}
	for _, h := range []*nftables.ChainHook{nftables.ChainHookPrerouting, nftables.ChainHookInput,
		nftables.ChainHookForward, nftables.ChainHookOutput, nftables.ChainHookPostrouting} {
		st := kernel[*h]
		for _, c := range tab.hookChains(*h) {
			st = append(st, stage{prio: c.priority, kind: stageChain, chain: c})
		}
		// Stable: at equal priority the kernel's hooks, registered first,
		// run first.
		slices.SortStableFunc(st, func(a, b stage) int { return int(a.prio) - int(b.prio) })
		t.hooks[*h] = st
	}
	return t, nil
}

// Rules lists every rule of the table, chain by chain (by name).
func (t *Tracer) Rules() []RuleRef { return t.tab.allRules() }

// Hits returns how many traces so far matched rule r.
func (t *Tracer) Hits(r RuleRef) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.hits[r]
}

// Uncovered lists the rules no trace has matched yet.
func (t *Tracer) Uncovered() []RuleRef {
	var out []RuleRef
	for _, r := range t.Rules() {
		if t.Hits(r) == 0 {
			out = append(out, r)
		}
	}
	return out
}

// ctInfo is the packet's conntrack attachment.
type ctInfo uint8

const (
	ctNone ctInfo = iota // not seen by conntrack yet
	ctNew                // the first packet of a connection
	ctEstablished
	ctUntracked
)

// pkt is the packet in flight.
type pkt struct {
	src, dst     netip.Addr
	sport, dport uint16
	proto        uint8
	mark         uint32
	ct           ctInfo
	// conn is the connection it belongs to, and ctmark that
	// connection's conntrack mark once conntrack has attached it.
	conn   connKey
	ctmark uint32
	// iif and oif are the interfaces meta iifname and meta oifname read
	// in the hook being run: no input interface on the OUTPUT path, no
	// output interface before routing.
	iif, oif string
}

func (p *pkt) nfproto() uint8 {
	if p.dst.Is4() {
		return unix.NFPROTO_IPV4
	}
	return unix.NFPROTO_IPV6
}

// ctStateBits is what "ct state" reads: INVALID before conntrack.
func (p *pkt) ctStateBits() uint32 {
	switch p.ct {
	case ctNew:
		return expr.CtStateBitNEW
	case ctEstablished:
		return expr.CtStateBitESTABLISHED
	case ctUntracked:
		return expr.CtStateBitUNTRACKED
	}
	return expr.CtStateBitINVALID
}

// networkHeader is an IPv4 or IPv6 header with the fields rules read.
func (p *pkt) networkHeader() []byte {
	if p.dst.Is4() {
		h := make([]byte, 20)
		h[0], h[9] = 0x45, p.proto
		copy(h[12:], p.src.AsSlice())
		copy(h[16:], p.dst.AsSlice())
		return h
	}
	h := make([]byte, 40)
	h[0], h[6] = 0x60, p.proto
	copy(h[8:], p.src.AsSlice())
	copy(h[24:], p.dst.AsSlice())
	return h
}

// transportHeader starts with the ports for TCP, UDP and SCTP; for ICMP
// it is an echo request (type, code, checksum, id, sequence).
func (p *pkt) transportHeader() []byte {
	switch p.proto {
	case unix.IPPROTO_ICMP:
		return []byte{8, 0, 0, 0, 0, 1, 0, 1}
	case unix.IPPROTO_ICMPV6:
		return []byte{128, 0, 0, 0, 0, 1, 0, 1}
	}
	h := make([]byte, 20)
	h[0], h[1], h[2], h[3] = byte(p.sport>>8), byte(p.sport), byte(p.dport>>8), byte(p.dport)
	return h
}

// walk is one trace.
type walk struct {
	t        *Tracer
	in       Packet
	p        *pkt
	res      *Result
	natInit  [2]bool // the dst and src NAT manips are decided (nf_nat_initialized)
	ipvsDone bool    // IPVS has handled the packet (skb->ipvs_property)
}

const (
	manipDst = 0
	manipSrc = 1
)

// Trace walks one packet through the hooks and returns its verdict. The
// error names the chain and rule of an expression the tracer cannot
// evaluate.
func (t *Tracer) Trace(in Packet) (*Result, error) {
	p, err := newPkt(in)
	if err != nil {
		return nil, err
	}
	w := &walk{t: t, in: in, p: p, res: &Result{}}
	w.step("%s", in)
	if in.FromHost {
		err = w.outbound()
	} else {
		err = w.inbound()
	}
	if err != nil {
		return nil, fmt.Errorf("trace %s: %w", in, err)
	}
	w.res.Dst, w.res.Mark, w.res.CtMark = netip.AddrPortFrom(p.dst, p.dport), p.mark, p.ctmark
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range w.res.Matched {
		t.hits[r]++
	}
	t.keepConn(p.conn, p, w.res.Action)
	return w.res, nil
}

func newPkt(in Packet) (*pkt, error) {
	src, dst := in.Src.Addr().Unmap(), in.Dst.Addr().Unmap()
	if !src.IsValid() || !dst.IsValid() || src.Is4() != dst.Is4() {
		return nil, fmt.Errorf("packet %s: want two addresses of one family", in)
	}
	if in.Backend.IsValid() && in.Backend.Unmap().Is4() != dst.Is4() {
		return nil, fmt.Errorf("packet %s: backend %s of another family", in, in.Backend)
	}
	proto, err := in.Proto.number(dst.Is4())
	if err != nil {
		return nil, fmt.Errorf("packet %s: %w", in, err)
	}
	switch in.State {
	case "", StateNew, StateEstablished, StateUntracked:
	default:
		return nil, fmt.Errorf("packet %s: state %q: want new, established or untracked", in, in.State)
	}
	p := &pkt{src: src, dst: dst, proto: proto}
	if in.Proto != ICMP {
		p.sport, p.dport = in.Src.Port(), in.Dst.Port()
	}
	if in.Orig.IsValid() && in.Orig.Addr().Unmap().Is4() != dst.Is4() {
		return nil, fmt.Errorf("packet %s: original destination %s of another family", in, in.Orig)
	}
	p.conn = connOf(in, proto)
	return p, nil
}

func (w *walk) step(format string, args ...any) {
	w.res.Steps = append(w.res.Steps, fmt.Sprintf(format, args...))
}

// stop records the final action; the first one stands.
func (w *walk) stop(a Action, by string) {
	if w.res.Action != "" {
		return
	}
	w.res.Action, w.res.By = a, by
	if by != "" {
		w.step("%s by %s", a, by)
	} else {
		w.step("%s", a)
	}
}

func (w *walk) dnat(by string, to netip.AddrPort) {
	w.res.DNAT = append(w.res.DNAT, Rewrite{By: by, To: to})
	w.step("%s: dnat to %s", by, to)
	w.p.dst, w.p.dport = to.Addr(), to.Port()
}

// inbound is a packet from the network or a pod: PREROUTING, then the
// routing decision on its (possibly DNATed) destination.
func (w *walk) inbound() error {
	w.p.iif = w.in.InIface
	if w.p.iif == "" {
		w.p.iif = w.t.route(w.p.src)
	}
	if ok, err := w.hook(nftables.ChainHookPrerouting, "prerouting"); !ok || err != nil {
		return err
	}
	if w.t.local[w.p.dst] {
		return w.deliver()
	}
	w.p.oif = w.t.route(w.p.dst)
	if ok, err := w.hook(nftables.ChainHookForward, "forward"); !ok || err != nil {
		return err
	}
	return w.sendOn()
}

// outbound is a packet a host process sends: OUTPUT, POSTROUTING, and
// for a local destination back in through loopback.
func (w *walk) outbound() error {
	w.p.oif = w.t.route(w.p.dst)
	if ok, err := w.hook(nftables.ChainHookOutput, "output"); !ok || err != nil {
		return err
	}
	if !w.t.local[w.p.dst] {
		return w.sendOn()
	}
	if ok, err := w.hook(nftables.ChainHookPostrouting, "postrouting"); !ok || err != nil {
		return err
	}
	// Loopback: PREROUTING again with conntrack attached (so notrack and
	// the NAT chains do nothing), then INPUT.
	w.step("loopback")
	w.p.iif, w.p.oif = loopback, ""
	if ok, err := w.hook(nftables.ChainHookPrerouting, "prerouting"); !ok || err != nil {
		return err
	}
	return w.deliver()
}

// deliver runs INPUT (where IPVS may take the packet) and delivers it.
func (w *walk) deliver() error {
	if ok, err := w.hook(nftables.ChainHookInput, "input"); !ok || err != nil {
		return err
	}
	w.stop(Deliver, "")
	return nil
}

// sendOn runs POSTROUTING and sends the packet off the node.
func (w *walk) sendOn() error {
	if ok, err := w.hook(nftables.ChainHookPostrouting, "postrouting"); !ok || err != nil {
		return err
	}
	w.stop(Send, "")
	return nil
}

// hook runs a hook's stages in priority order. It returns false when the
// packet went no further: dropped, rejected, or taken by IPVS and sent.
func (w *walk) hook(h *nftables.ChainHook, name string) (bool, error) {
	stages := w.t.hooks[*h]
	lastNAT := -1
	for i, s := range stages {
		if s.kind == stageChain && s.chain.nat {
			lastNAT = i
		}
	}
	manip := manipDst
	if *h == *nftables.ChainHookInput || *h == *nftables.ChainHookPostrouting {
		manip = manipSrc
	}
	w.step("hook %s", name)
	for i, s := range stages {
		switch s.kind {
		case stageConntrack:
			w.conntrack()
		case stageIPVS:
			if ok, err := w.ipvs(); !ok || err != nil {
				return false, err
			}
		case stageChain:
			// NAT chains see only the first packet of a tracked
			// connection, once per manip: a later hook (IPVS sending
			// the packet on through LOCAL_OUT, loopback) finds the
			// NAT decided.
			if s.chain.nat && (w.p.ct != ctNew || w.natInit[manip]) {
				w.step("%s: skipped (NAT decided or not a new connection)", s.chain.name)
			} else if ok, err := w.runBase(s.chain); !ok || err != nil {
				return false, err
			}
		}
		if i == lastNAT && w.p.ct == ctNew {
			w.natInit[manip] = true
		}
	}
	return true, nil
}

// conntrack attaches the packet's state and its connection's mark,
// unless it is untracked or attached already.
func (w *walk) conntrack() {
	if w.p.ct != ctNone {
		return
	}
	switch w.in.State {
	case StateEstablished:
		w.p.ct = ctEstablished
	case StateUntracked:
		w.p.ct = ctUntracked
	default:
		w.p.ct = ctNew
	}
	w.p.ctmark = w.t.connMark(w.p.conn, w.p.ct)
}

// ipvs is IPVS's request hook: a packet for a virtual server is DNATed
// to a destination; one for a local real server goes on up the stack,
// any other is sent on through LOCAL_OUT and POSTROUTING from here
// (ip_vs_nat_send_or_cont), conntrack attached.
func (w *walk) ipvs() (bool, error) {
	if w.ipvsDone {
		return true, nil
	}
	dests, ok := w.t.ipvs[vsKey{addr: w.p.dst, proto: w.p.proto, port: w.p.dport}]
	if !ok {
		return true, nil
	}
	w.ipvsDone = true
	to, err := w.schedule(dests)
	if err != nil {
		return false, err
	}
	if !to.IsValid() {
		// ip_vs_leave: no destination to schedule, ICMP port unreachable.
		w.stop(RejectICMP, "ipvs")
		w.res.ICMPCode = "port-unreachable"
		return false, nil
	}
	w.dnat("ipvs", to)
	if w.t.local[to.Addr()] {
		return true, nil
	}
	w.step("ipvs: sent on through LOCAL_OUT")
	w.p.iif, w.p.oif = "", w.t.route(w.p.dst)
	if ok, err := w.hook(nftables.ChainHookOutput, "output"); !ok || err != nil {
		return false, err
	}
	return false, w.sendOn()
}

// schedule picks the destination the packet asks for, or the first that
// takes new connections (weight above 0).
func (w *walk) schedule(dests []ipvsDest) (netip.AddrPort, error) {
	if b := w.in.Backend.Unmap(); b.IsValid() {
		for _, d := range dests {
			if d.to.Addr() == b {
				return d.to, nil
			}
		}
		return netip.AddrPort{}, fmt.Errorf("backend %s is no destination of %s:%d", b, w.p.dst, w.p.dport)
	}
	for _, d := range dests {
		if d.weight > 0 {
			return d.to, nil
		}
	}
	return netip.AddrPort{}, nil
}

// runBase runs a base chain with its jumps and gotos; false means the
// packet was dropped (or rejected).
func (w *walk) runBase(base *chain) (bool, error) {
	type frame struct {
		c    *chain
		next int
	}
	var stack []frame
	c, i := base, 0
	for {
		if i >= len(c.rules) {
			if len(stack) == 0 {
				return w.policy(base), nil
			}
			c, i, stack = stack[len(stack)-1].c, stack[len(stack)-1].next, stack[:len(stack)-1]
			continue
		}
		r := &c.rules[i]
		v, matched, err := w.evalRule(c, r)
		if err != nil {
			return false, err
		}
		if matched {
			w.res.Matched = append(w.res.Matched, r.ref)
			w.step("%s matched", r.ref)
		}
		if v == nil {
			i++
			continue
		}
		switch v.Kind {
		case expr.VerdictAccept:
			return true, nil
		case expr.VerdictDrop:
			w.stop(Drop, r.ref.String())
			return false, nil
		case expr.VerdictReturn:
			i = len(c.rules) // as if at the chain's end
		case expr.VerdictJump, expr.VerdictGoto:
			target := w.t.tab.chains[v.Chain]
			if target == nil || target.hook != nil {
				return false, fmt.Errorf("%s: jump to %q, not a regular chain of the table", r.ref, v.Chain)
			}
			if len(stack) > 16 {
				return false, fmt.Errorf("%s: jumps nested beyond 16", r.ref)
			}
			if v.Kind == expr.VerdictJump {
				stack = append(stack, frame{c: c, next: i + 1})
				w.step("%s: jump %s", r.ref, v.Chain)
			} else {
				w.step("%s: goto %s", r.ref, v.Chain)
			}
			c, i = target, 0
		}
	}
}

// policy applies a base chain's policy at its end.
func (w *walk) policy(c *chain) bool {
	if c.drop {
		w.stop(Drop, c.name+" policy")
		return false
	}
	return true
}
