package proxier

import (
	"encoding/binary"
	"hash/maphash"
	"net/netip"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// planDigest is a 128-bit digest of a service's virtual servers as the
// kernel sees them: every field but the human-readable Reason. The loop
// keeps it, not the plan, to tell a changed plan from an unchanged one:
// the plans (their destinations and reasons) were the largest part of
// the heap nothing else read (benchmarks/NOTES.md, memory). The zero
// digest is that of no virtual servers.
type planDigest [2]uint64

// digestSeeds are two independent seeds, for 128 bits: a collision
// (a changed plan taken for unchanged) is beyond any cluster's lifetime.
// The digests never leave the process.
var digestSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

// digestOf returns the digest of vss; buf is scratch space, returned
// grown for the next call.
func digestOf(vss []policy.VirtualServer, buf []byte) (planDigest, []byte) {
	if len(vss) == 0 {
		return planDigest{}, buf
	}
	b := binary.AppendUvarint(buf[:0], uint64(len(vss)))
	for i := range vss {
		b = appendVirtualServer(b, &vss[i])
	}
	return planDigest{maphash.Bytes(digestSeeds[0], b), maphash.Bytes(digestSeeds[1], b)}, b
}

// appendVirtualServer encodes every field of vs but Reason, each string
// and list prefixed by its length so that no two encodings run together.
// A field added to policy.VirtualServer or policy.Destination must be
// added here: TestPlanDigestCoversEveryField fails until it is.
func appendVirtualServer(b []byte, vs *policy.VirtualServer) []byte {
	b = appendString(b, vs.Service.Namespace)
	b = appendString(b, vs.Service.Name)
	b = appendString(b, vs.PortName)
	b = appendString(b, string(vs.Kind))
	b = appendAddr(b, vs.Address)
	b = binary.BigEndian.AppendUint16(b, vs.Port)
	b = appendString(b, string(vs.Protocol))
	b = appendString(b, vs.Scheduler)
	b = binary.AppendUvarint(b, uint64(len(vs.SchedulerFlags)))
	for _, f := range vs.SchedulerFlags {
		b = appendString(b, f)
	}
	b = binary.BigEndian.AppendUint32(b, vs.PersistenceTimeoutSeconds)
	b = appendString(b, string(vs.TrafficPolicy))
	b = appendBool(b, vs.NoTrack)
	b = appendString(b, string(vs.Masquerade))
	b = appendString(b, string(vs.WhenEmpty))
	b = appendAddr(b, vs.InternalVia.Addr())
	b = binary.BigEndian.AppendUint16(b, vs.InternalVia.Port())
	b = binary.AppendUvarint(b, uint64(len(vs.SourceRanges)))
	for _, p := range vs.SourceRanges {
		b = appendAddr(b, p.Addr())
		b = binary.AppendVarint(b, int64(p.Bits()))
	}
	b = appendBool(b, vs.NodeInSourceRanges)
	b = appendBool(b, vs.OnNodeAddress)
	b = binary.AppendUvarint(b, uint64(len(vs.Destinations)))
	for _, d := range vs.Destinations {
		b = appendAddr(b, d.Address)
		b = binary.BigEndian.AppendUint16(b, d.Port)
		b = appendBool(b, d.Local)
		b = binary.BigEndian.AppendUint32(b, uint32(d.Weight))
	}
	return b
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// appendAddr encodes a's family (0 for the zero Addr), its 16 bytes and
// its zone.
func appendAddr(b []byte, a netip.Addr) []byte {
	b = append(b, byte(a.BitLen()/8))
	a16 := a.As16() // all zero for the zero Addr
	b = append(b, a16[:]...)
	return appendString(b, a.Zone())
}
