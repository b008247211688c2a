package packettrace

import "net/netip"

// connKey names a connection by its original tuple: the client's
// address and port, the destination it connected to, and the protocol.
type connKey struct {
	client, server netip.AddrPort
	proto          uint8
}

// connOf is the connection a packet belongs to: a packet with an
// original destination (Packet.Orig) is a reply, whose destination is
// the client; any other is in the connection's original direction.
func connOf(in Packet, proto uint8) connKey {
	unmap := func(a netip.AddrPort) netip.AddrPort { return netip.AddrPortFrom(a.Addr().Unmap(), a.Port()) }
	if in.Orig.IsValid() {
		return connKey{client: unmap(in.Dst), server: unmap(in.Orig), proto: proto}
	}
	return connKey{client: unmap(in.Src), server: unmap(in.Dst), proto: proto}
}

// connMark is the conntrack mark of the packet's connection when
// conntrack attaches it: 0 for a new connection, and for an established
// one no trace has marked (it was open before the table, or its earlier
// packets were not traced).
func (t *Tracer) connMark(k connKey, ct ctInfo) uint32 {
	if ct != ctEstablished {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.conns[k]
}

// keepConn records the connection's conntrack mark after a trace: an
// established connection keeps whatever its packet's rules set, even
// when the packet was then dropped; a new one only when conntrack
// confirms it (the packet was delivered or sent on). Untracked packets
// have no entry. Called with t.mu held.
func (t *Tracer) keepConn(k connKey, p *pkt, a Action) {
	switch {
	case p.ct == ctEstablished, p.ct == ctNew && (a == Deliver || a == Send):
		t.conns[k] = p.ctmark
	}
}
