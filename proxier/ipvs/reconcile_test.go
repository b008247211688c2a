package ipvs

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// The reconciler's rules, one case each, over the desired state and the
// mirror alone: no kernel, no clock.

// wantVS is a desired virtual server of service default/web.
func wantVS(k string, sched string, dests ...Destination) *desiredVS {
	return &desiredVS{svc: policy.ServiceKey{Namespace: "default", Name: "web"},
		vs: VirtualServer{Key: key(k), Scheduler: sched}, dests: newDestList(dests)}
}

// haveVS is a mirrored virtual server.
func haveVS(k string, sched string, dests ...Destination) *actual {
	return &actual{vs: VirtualServer{Key: key(k), Scheduler: sched}, dests: newDestList(dests)}
}

func nat(ap string, weight int32) Destination {
	a := netip.MustParseAddrPort(ap)
	return Destination{Addr: a.Addr(), Port: a.Port(), Weight: weight, Forward: ForwardMasq}
}

func actionStrings(as []action) []string {
	out := []string{}
	for _, a := range as {
		out = append(out, a.phase().String()+": "+a.String())
	}
	return out
}

func TestReconcileVirtualServerRules(t *testing.T) {
	const k = "10.96.0.10:80/TCP"
	for _, tc := range []struct {
		name           string
		want           *desiredVS
		have           *actual
		ours, excluded bool
		actions        []string
	}{
		{
			name: "a planned virtual server missing from the kernel is added, then its destinations",
			want: wantVS(k, "rr", nat("10.244.1.5:8080", 1), nat("10.244.2.5:8080", 3)),
			actions: []string{
				"add: add-vs 10.96.0.10:80/TCP rr flags=0x0 timeout=0",
				"add: add-dest 10.96.0.10:80/TCP 10.244.1.5:8080 weight=1",
				"add: add-dest 10.96.0.10:80/TCP 10.244.2.5:8080 weight=3",
			},
		},
		{
			name:    "a virtual server the kernel holds as planned needs nothing",
			want:    wantVS(k, "rr", nat("10.244.1.5:8080", 1)),
			have:    haveVS(k, "rr", nat("10.244.1.5:8080", 1)),
			ours:    true,
			actions: []string{},
		},
		{
			name:    "a changed scheduler, flags or timeout updates the virtual server in place",
			want:    wantVS(k, "wrr", nat("10.244.1.5:8080", 1)),
			have:    haveVS(k, "rr", nat("10.244.1.5:8080", 1)),
			actions: []string{"update: update-vs 10.96.0.10:80/TCP wrr flags=0x0 timeout=0"},
		},
		{
			name: "a planned destination missing is added, a changed weight updated, one no longer planned retired",
			want: wantVS(k, "rr", nat("10.244.1.5:8080", 2), nat("10.244.3.5:8080", 1)),
			have: haveVS(k, "rr", nat("10.244.1.5:8080", 1), nat("10.244.2.5:8080", 1)),
			actions: []string{
				"update: update-dest 10.96.0.10:80/TCP 10.244.1.5:8080 weight=2",
				"add: add-dest 10.96.0.10:80/TCP 10.244.3.5:8080 weight=1",
				"prune: retire-dest 10.96.0.10:80/TCP 10.244.2.5:8080",
			},
		},
		{
			name: "a destination forwarded otherwise than NAT is set back to NAT",
			want: wantVS(k, "rr", nat("10.244.1.5:8080", 1)),
			have: haveVS(k, "rr", Destination{Addr: netip.MustParseAddr("10.244.1.5"), Port: 8080, Weight: 1, Forward: 2}),
			actions: []string{
				"update: update-dest 10.96.0.10:80/TCP 10.244.1.5:8080 weight=1",
			},
		},
		{
			name:    "a virtual server no longer planned that is ours is deleted",
			have:    haveVS(k, "rr", nat("10.244.1.5:8080", 1)),
			ours:    true,
			actions: []string{"prune: delete-vs 10.96.0.10:80/TCP"},
		},
		{
			name:    "a virtual server that is not ours is never touched",
			have:    haveVS(k, "rr", nat("10.244.1.5:8080", 1)),
			actions: []string{},
		},
		{
			name:     "a virtual server on an excluded address is never deleted, even ours",
			have:     haveVS(k, "rr", nat("10.244.1.5:8080", 1)),
			ours:     true,
			excluded: true,
			actions:  []string{},
		},
		{
			name:    "neither planned nor in the kernel: nothing",
			ours:    true,
			actions: []string{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := actionStrings(reconcileVS(nil, key(k), tc.want, tc.have, tc.ours, tc.excluded))
			if diff := cmp.Diff(tc.actions, got); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReconcileAddressRules(t *testing.T) {
	for _, tc := range []struct {
		name    string
		addr    string
		refs    int
		bound   string // "" when not on the interface
		actions []string
	}{
		{"an address a planned virtual server binds is bound as a /32", "10.96.0.10", 1, "", []string{"add-address: bind 10.96.0.10/32"}},
		{"an IPv6 one as a /128", "fd00::a", 2, "", []string{"add-address: bind fd00::a/128"}},
		{"an address bound and used needs nothing", "10.96.0.10", 1, "10.96.0.10/32", []string{}},
		{"an address none binds any more is unbound", "10.96.0.10", 0, "10.96.0.10/32", []string{"prune-address: unbind 10.96.0.10/32"}},
		{"it is unbound with the prefix it has", "10.96.0.10", 0, "10.96.0.10/24", []string{"prune-address: unbind 10.96.0.10/24"}},
		{"an address neither used nor bound: nothing", "10.96.0.10", 0, "", []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var bound netip.Prefix
			if tc.bound != "" {
				bound = netip.MustParsePrefix(tc.bound)
			}
			got := actionStrings(reconcileAddr(nil, netip.MustParseAddr(tc.addr), tc.refs, bound, tc.bound != ""))
			if diff := cmp.Diff(tc.actions, got); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRetireDecisionRules(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	const grace = 15 * time.Minute
	conns := func(weight int32, active, inactive uint32) Destination {
		return Destination{Weight: weight, ActiveConns: active, InactiveConns: inactive}
	}
	for _, tc := range []struct {
		name    string
		proto   policy.Protocol
		cur     Destination
		present bool
		drain   drainState
		now     time.Time
		want    retireVerdict
	}{
		{"UDP is deleted at once, connections or not", policy.ProtocolUDP, conns(1, 5, 5), true, drainState{}, t0, retireDelete},
		{"SCTP is deleted at once", policy.ProtocolSCTP, conns(1, 5, 0), true, drainState{}, t0, retireDelete},
		{"TCP without connections is deleted", policy.ProtocolTCP, conns(1, 0, 0), true, drainState{}, t0, retireDelete},
		{"TCP with live connections drains at weight 0", policy.ProtocolTCP, conns(1, 2, 0), true, drainState{}, t0, retireDrain},
		{"inactive connections keep it draining", policy.ProtocolTCP, conns(1, 0, 1), true, drainState{}, t0, retireDrain},
		{"TCP at weight 0 already waits", policy.ProtocolTCP, conns(0, 2, 1), true, drainState{t0, true}, t0.Add(time.Minute), retireWait},
		{"a drain is deleted once the graceful period has passed", policy.ProtocolTCP, conns(0, 2, 1), true, drainState{t0, true}, t0.Add(grace), retireDelete},
		{"and kept just before", policy.ProtocolTCP, conns(0, 2, 1), true, drainState{t0, true}, t0.Add(grace - time.Second), retireWait},
		{"TCP gone from the kernel already is forgotten", policy.ProtocolTCP, Destination{}, false, drainState{t0, true}, t0, retireForget},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := retireDecision(tc.proto, tc.cur, tc.present, tc.drain, tc.now, grace); got != tc.want {
				t.Errorf("retireDecision = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestActionPhasesRunInTheOrderOfTheRules: a VIP is bound before the
// virtual servers on it are added, adds come before updates and updates
// before prunes (a virtual server never loses its old destinations
// before it has its new ones), and a VIP is unbound after its virtual
// servers are gone.
func TestActionPhasesRunInTheOrderOfTheRules(t *testing.T) {
	order := []actionKind{actBind, actAddVS, actUpdateVS, actDeleteVS, actUnbind}
	for i := 1; i < len(order); i++ {
		a, b := action{kind: order[i-1]}, action{kind: order[i]}
		if a.phase() >= b.phase() {
			t.Errorf("%s runs in phase %s, not before %s in %s", a, a.phase(), b, b.phase())
		}
	}
	same := [][2]actionKind{{actAddVS, actAddDest}, {actUpdateVS, actUpdateDest}, {actDeleteVS, actRetireDest}}
	for _, p := range same {
		if a, b := (action{kind: p[0]}), (action{kind: p[1]}); a.phase() != b.phase() {
			t.Errorf("%s (phase %s) and %s (phase %s) are not in one phase", a, a.phase(), b, b.phase())
		}
	}
}
