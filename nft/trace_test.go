package nft_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft/internal/packettrace"
)

// traceCase is one packet and the verdict nft/README.md's rules give it.
type traceCase struct {
	name    string // the rule it proves
	host    bool   // sent by a host process (OUTPUT), else from the network or a pod
	src     string // "host" or "host:port"; port 40000 when omitted
	dst     string // "host:port", or "host" for ICMP
	proto   packettrace.Proto
	state   packettrace.State
	backend string // the IPVS destination picked, by host name
	orig    string // the connection's original destination, "host:port" (Packet.Orig); empty: dst
	// after names the case whose packet is traced first, in the same
	// tracer: an earlier packet of the connection, whose conntrack mark
	// this one reads.
	after string
	iif   string // the interface it comes in on; empty: the route to its source's
	want  string // Result.Summary with host names
	// proves lists rules ("chain#n", nft/README.md's numbering per
	// family) that must match, and "!chain#n" rules that must not.
	proves []string
}

// cases is the table of README.md, run in both families.
var cases = []traceCase{
	// ClusterIP, masquerade off-cluster, hairpin.
	{name: "ClusterIP: a pod client is served without masquerade", src: "pod-b", dst: "web:80", backend: "pod-c",
		want: "send dnat=ipvs>pod-c:8080", proves: []string{"!nat-prerouting#2", "!filter-input#5", "!nat-postrouting#1"}},
	{name: "masquerade-off-cluster: a non-pod client of a ClusterIP is marked and masqueraded", src: "other-node", dst: "web:80", backend: "pod-c",
		want: "send masq=mark dnat=ipvs>pod-c:8080", proves: []string{"nat-prerouting#2", "nat-postrouting#1"}},
	{name: "cluster-cidrs: the last address of a cluster CIDR is a pod (not masqueraded)", src: "pod-last", dst: "web:80", backend: "pod-c",
		want: "send dnat=ipvs>pod-c:8080", proves: []string{"!nat-prerouting#2"}},
	{name: "cluster-cidrs: the first address past a cluster CIDR is not a pod (masqueraded)", src: "past-cidr", dst: "web:80", backend: "pod-c",
		want: "send masq=mark dnat=ipvs>pod-c:8080", proves: []string{"nat-prerouting#2"}},
	{name: "hairpin: a local destination reaching itself through its ClusterIP is masqueraded", src: "pod-a", dst: "web:80", backend: "pod-a",
		want: "send masq=hairpin dnat=ipvs>pod-a:8080", proves: []string{"nat-postrouting#2"}},
	{name: "hairpin: another pod reaching a local destination is not masqueraded", src: "pod-b", dst: "web:80", backend: "pod-a",
		want: "send dnat=ipvs>pod-a:8080", proves: []string{"!nat-postrouting#2"}},
	{name: "nat-output masquerade-off-cluster: the host's connection to a ClusterIP is masqueraded", host: true, src: "node", dst: "web:80", backend: "pod-c",
		want: "send masq=mark dnat=ipvs>pod-c:8080", proves: []string{"nat-output#2", "nat-postrouting#1"}},

	// Services without destinations.
	{name: "empty-services Reject: TCP to a service without endpoints gets a reset", src: "pod-b", dst: "empty:80",
		want: "reject-tcp-reset", proves: []string{"filter-input#3", "reject-packet#1"}},
	{name: "empty-services Reject: UDP to a service without endpoints gets port unreachable", src: "pod-b", dst: "empty:53", proto: packettrace.UDP,
		want: "reject-icmp(port-unreachable)", proves: []string{"filter-input#3", "!reject-packet#1", "reject-packet#2"}},
	{name: "filter-output: the host's connection to a service without endpoints is reset", host: true, src: "node", dst: "empty:80",
		want: "reject-tcp-reset", proves: []string{"filter-output#1", "reject-packet#1"}},
	{name: "empty-services Drop: an external client of an eTP=Local ExternalIP without local endpoints is dropped", src: "client", dst: "local-ext:80",
		want: "drop", proves: []string{"filter-input#3"}},
	{name: "empty-services Drop: an external client of an eTP=Local NodePort without local endpoints is dropped", src: "client", dst: "node:30030",
		want: "drop", proves: []string{"filter-input#3"}},

	// NodePort and ExternalIP: masquerade always.
	{name: "masquerade-always: an external client of a NodePort is masqueraded", src: "client", dst: "node:30080", backend: "pod-c",
		want: "send masq=mark dnat=ipvs>pod-c:8080", proves: []string{"nat-prerouting#1", "nat-postrouting#1"}},
	{name: "nat-output masquerade-always: the host's connection to its own NodePort is masqueraded", host: true, src: "node", dst: "node:30080", backend: "pod-c",
		want: "send masq=mark dnat=ipvs>pod-c:8080", proves: []string{"nat-output#1", "nat-postrouting#1"}},
	{name: "service-ips: a port of a node address that is no service is delivered, not filtered", src: "client", dst: "node:22",
		want: "deliver", proves: []string{"!filter-input#5"}},
	{name: "nodeport-services: an external IP that is the node's address is served there, masqueraded", src: "client", dst: "node:8443", backend: "pod-c",
		want: "send masq=mark dnat=ipvs>pod-c:8443", proves: []string{"nat-prerouting#1", "nat-postrouting#1"}},
	{name: "service-ips: an external IP that is the node's address leaves the node's other ports alone", src: "client", dst: "node:8444",
		want: "deliver", proves: []string{"!filter-input#5"}},
	{name: "masquerade-always: an external client of an ExternalIP is masqueraded", src: "client", dst: "web-ext:80", backend: "pod-c",
		want: "send masq=mark dnat=ipvs>pod-c:8080", proves: []string{"nat-prerouting#1", "nat-postrouting#1"}},

	// LoadBalancer source ranges.
	{name: "lb-source-allowed: a client inside loadBalancerSourceRanges passes", src: "allowed", dst: "ranged-lb:443",
		want: "send masq=mark dnat=ipvs>pod-c:8443", proves: []string{"!filter-input#4", "nat-prerouting#1"}},
	{name: "lb-source-allowed: the last address of a source range passes", src: "range-last", dst: "ranged-lb:443",
		want: "send masq=mark dnat=ipvs>pod-c:8443", proves: []string{"!filter-input#4"}},
	{name: "lb-source-ranged: a client outside loadBalancerSourceRanges is dropped", src: "client", dst: "ranged-lb:443",
		want: "drop", proves: []string{"filter-input#4"}},
	{name: "lb-source-ranged: the first address past a source range is dropped", src: "range-next", dst: "ranged-lb:443",
		want: "drop", proves: []string{"filter-input#4"}},
	{name: "lb-source-ranged: pods are held to the ranges too (a ranged load balancer has no internal-via)", src: "pod-b", dst: "ranged-lb:443",
		want: "drop", proves: []string{"filter-input#4", "!nat-prerouting#3"}},
	{name: "lb-source-ranged: the service's ClusterIP is not ranged", src: "pod-b", dst: "ranged:443",
		want: "send dnat=ipvs>pod-c:8443", proves: []string{"!filter-input#4"}},

	// The node's own connections, held to the ranges in filter-output
	// before IPVS takes them in LOCAL_OUT (README.md, "Findings").
	{name: "lb-source-ranged: the node's own connection is dropped when no range holds the node's IP", host: true, src: "ranged-lb", dst: "ranged-lb:443",
		want: "drop", proves: []string{"filter-output#2"}},
	{name: "lb-source-ranged: the node's connection from its own address outside the ranges is dropped", host: true, src: "node", dst: "ranged-lb:443",
		want: "drop", proves: []string{"filter-output#2"}},
	{name: "lb-source-allowed: the node's own connection passes when a range holds the node's IP", host: true, src: "node-ranged-lb", dst: "node-ranged-lb:443",
		want: "send masq=mark dnat=ipvs>pod-c:8443", proves: []string{"!filter-output#2", "nat-output#1"}},
	{name: "lb-source-allowed: the node's connection from its address inside a range passes", host: true, src: "node", dst: "node-ranged-lb:443",
		want: "send masq=mark dnat=ipvs>pod-c:8443", proves: []string{"!filter-output#2"}},

	// eTP=Local: in-cluster clients via the ClusterIP, external ones kept.
	{name: "internal-via: a pod client of an eTP=Local load balancer goes to the ClusterIP", src: "pod-b", dst: "localep-lb:80", backend: "pod-c",
		want: "send dnat=nat-prerouting#3>localep:80,ipvs>pod-c:8080", proves: []string{"nat-prerouting#3"}},
	{name: "internal-via: a pod client of an eTP=Local ExternalIP without local endpoints is served via the ClusterIP", src: "pod-b", dst: "local-ext:80",
		want: "send dnat=nat-prerouting#3>local:80,ipvs>pod-c:8080", proves: []string{"nat-prerouting#3", "!filter-input#3"}},
	{name: "internal-via: a pod client of an eTP=Local NodePort goes to the ClusterIP", src: "pod-b", dst: "node:30030",
		want: "send dnat=nat-prerouting#3>local:80,ipvs>pod-c:8080", proves: []string{"nat-prerouting#3", "!filter-input#3"}},
	{name: "masquerade never: an external client of an eTP=Local load balancer keeps its address", src: "client", dst: "localep-lb:80",
		want: "send dnat=ipvs>pod-a:8080", proves: []string{"!nat-prerouting#3", "!nat-postrouting#1"}},
	{name: "internal-via-keys: the host's connection to an eTP=Local load balancer is marked and sent to the ClusterIP", host: true, src: "node", dst: "localep-lb:80", backend: "pod-c",
		want: "send masq=mark dnat=nat-output#4>localep:80,ipvs>pod-c:8080", proves: []string{"nat-output#3", "nat-output#4", "nat-postrouting#1"}},
	{name: "internal-via-keys: the host sourcing from the load balancer address on kube-ipvs0 is masqueraded too", host: true, src: "localep-lb", dst: "localep-lb:80", backend: "pod-c",
		want: "send masq=mark dnat=nat-output#4>localep:80,ipvs>pod-c:8080", proves: []string{"nat-output#3", "nat-output#4"}},
	{name: "service-ips source: the host's connection from a VIP to a ClusterIP is masqueraded without a cluster CIDR", host: true, src: "no-cidr", dst: "no-cidr:80", backend: "pod-c",
		want: "send masq=service-ips dnat=ipvs>pod-c:8080", proves: []string{"!nat-output#2", "!nat-postrouting#1", "nat-postrouting#3"}},
	{name: "masquerade never: the host's connection from its node address to a ClusterIP without a cluster CIDR keeps it", host: true, src: "node", dst: "no-cidr:80", backend: "pod-c",
		want: "send dnat=ipvs>pod-c:8080", proves: []string{"!nat-output#2", "!nat-postrouting#1", "!nat-postrouting#3"}},
	{name: "service-ips source: the host's connection from a VIP to one of its own addresses is not masqueraded", host: true, src: "no-cidr", dst: "node:22",
		want: "deliver", proves: []string{"!nat-postrouting#3"}},
	{name: "filter-output: the host's connection to an eTP=Local address without local endpoints is not dropped", host: true, src: "node", dst: "local-ext:80",
		want: "send masq=mark dnat=nat-output#4>local:80,ipvs>pod-c:8080", proves: []string{"!filter-output#1", "nat-output#4"}},

	// NOTRACK.
	{name: "notrack-services: a pod's packet to a NOTRACK ClusterIP is untracked", src: "pod-b", dst: "dns:53", proto: packettrace.UDP, backend: "pod-c",
		want: "send notrack dnat=ipvs>pod-c:5353", proves: []string{"raw-prerouting#1", "!filter-input#1"}},
	{name: "notrack-services: a non-pod client of a NOTRACK service stays tracked and is masqueraded", src: "other-node", dst: "dns:53", proto: packettrace.UDP, backend: "pod-c",
		want: "send masq=mark dnat=ipvs>pod-c:5353", proves: []string{"!raw-prerouting#1", "nat-prerouting#2"}},
	{name: "notrack-endpoints: a pod's packet to a NOTRACK destination (sent by another node's IPVS) is untracked", src: "pod-d", dst: "pod-a:5353", proto: packettrace.UDP,
		want: "send notrack", proves: []string{"raw-prerouting#2"}},
	{name: "notrack-endpoints: a pod's packet to a host-network NOTRACK destination is untracked and delivered", src: "pod-d", dst: "node:5353", proto: packettrace.UDP,
		want: "deliver notrack", proves: []string{"raw-prerouting#2"}},
	{name: "notrack reply: a NOTRACK destination's reply to a pod is untracked", src: "pod-c:5353", dst: "pod-b:40000", proto: packettrace.UDP, state: packettrace.StateEstablished,
		want: "send notrack", proves: []string{"raw-prerouting#3"}},
	{name: "notrack-endpoint-addrs: a NOTRACK destination's own packet to its service stays tracked; its hairpin is masqueraded", src: "pod-a", dst: "dns:53", proto: packettrace.UDP, backend: "pod-a",
		want: "send masq=hairpin dnat=ipvs>pod-a:5353", proves: []string{"!raw-prerouting#1", "nat-postrouting#2"}},
	{name: "notrack-endpoint-addrs: a reply to a NOTRACK destination pod stays tracked", src: "pod-c:5353", dst: "pod-a:40000", proto: packettrace.UDP, state: packettrace.StateEstablished,
		want: "send", proves: []string{"!raw-prerouting#3"}},
	{name: "fib daddr type local: a NOTRACK destination's reply to the node's pod-network address stays tracked", src: "pod-c:5353", dst: "bridge:40000", proto: packettrace.UDP, state: packettrace.StateEstablished,
		want: "deliver", proves: []string{"!raw-prerouting#3"}},
	{name: "raw-output: a host-network NOTRACK destination's reply to a pod is untracked", host: true, src: "node:5353", dst: "pod-b:40000", proto: packettrace.UDP, state: packettrace.StateEstablished,
		want: "send notrack", proves: []string{"raw-output#1"}},
	{name: "raw-output: the node's own packet to a NOTRACK service stays tracked and is masqueraded", host: true, src: "node", dst: "dns:53", proto: packettrace.UDP, backend: "pod-c",
		want: "send masq=mark dnat=ipvs>pod-c:5353", proves: []string{"!raw-output#1", "nat-output#2"}},

	// Forwarded packets of service connections, marked for the accept
	// rules in other tables' forward chains (nft/README.md, "Forwarded
	// service traffic"): filter-input gives the connection the conntrack
	// mark, filter-forward turns it into the masquerade mark.
	{name: "filter-input: a client's connection to a ClusterIP gets the conntrack mark", src: "client:40010", dst: "web:80", backend: "pod-c",
		want: "send masq=mark dnat=ipvs>pod-c:8080", proves: []string{"filter-input#1", "!filter-input#2"}},
	{name: "filter-input: a client's connection to a NodePort gets the conntrack mark", src: "client:40011", dst: "node:30080", backend: "pod-c",
		want: "send masq=mark dnat=ipvs>pod-c:8080", proves: []string{"!filter-input#1", "filter-input#2"}},
	{name: "filter-input: a marked connection's later packets are not looked up again", src: "client:40010", dst: "web:80", backend: "pod-c", state: packettrace.StateEstablished,
		after: "filter-input: a client's connection to a ClusterIP gets the conntrack mark",
		want:  "send dnat=ipvs>pod-c:8080", proves: []string{"!filter-input#1", "!filter-input#2"}},
	{name: "filter-forward: a remote destination's reply to an external client of a ClusterIP is marked", src: "pod-c:8080", dst: "client:40010", orig: "web:80", state: packettrace.StateEstablished,
		after: "filter-input: a client's connection to a ClusterIP gets the conntrack mark",
		want:  "send marked=0x4000", proves: []string{"filter-forward#1"}},
	{name: "filter-forward: a remote destination's reply to an external client of a NodePort is marked", src: "pod-c:8080", dst: "client:40011", orig: "node:30080", state: packettrace.StateEstablished,
		after: "filter-input: a client's connection to a NodePort gets the conntrack mark",
		want:  "send marked=0x4000", proves: []string{"filter-forward#1"}},
	{name: "filter-input: a connection open before the table gets the conntrack mark from its client's next packet", src: "client:40012", dst: "web:80", backend: "pod-c", state: packettrace.StateEstablished,
		want: "send dnat=ipvs>pod-c:8080", proves: []string{"filter-input#1"}},
	{name: "filter-forward: a reply of a connection open before the table is marked after its client's next packet", src: "pod-c:8080", dst: "client:40012", orig: "web:80", state: packettrace.StateEstablished,
		after: "filter-input: a connection open before the table gets the conntrack mark from its client's next packet",
		want:  "send marked=0x4000", proves: []string{"filter-forward#1"}},
	{name: "filter-forward: a reply of a connection open before the table is not marked before its client's next packet", src: "pod-c:8080", dst: "client:40013", orig: "web:80", state: packettrace.StateEstablished,
		want: "send", proves: []string{"!filter-forward#1"}},
	{name: "filter-forward: forwarded traffic of a connection to no virtual server is not marked", src: "pod-c:8080", dst: "client:40000", state: packettrace.StateEstablished,
		want: "send", proves: []string{"!filter-forward#1"}},
	{name: "filter-forward: a new forwarded connection is not marked", src: "client:40000", dst: "pod-c:8080",
		want: "send", proves: []string{"!filter-input#1", "!filter-forward#1"}},

	// The VIP filter (kube-proxy's KUBE-IPVS-FILTER).
	{name: "service-ports: a TCP connection to a VIP on a port that is no service is rejected", src: "pod-b", dst: "web:81",
		want: "reject-icmp(port-unreachable)", proves: []string{"filter-input#5"}},
	{name: "service-ports: a UDP packet to a VIP on a port that is no service is rejected", src: "client", dst: "web-ext:9999", proto: packettrace.UDP,
		want: "reject-icmp(port-unreachable)", proves: []string{"filter-input#5"}},
	{name: "service-ports: the host's connection to a VIP port that is no service is rejected on loopback input", host: true, src: "node", dst: "web:81",
		want: "reject-icmp(port-unreachable)", proves: []string{"filter-input#5"}},
	{name: "service-ips: ping to a VIP is delivered (only tcp, udp and sctp are filtered)", src: "pod-b", dst: "web", proto: packettrace.ICMP,
		want: "deliver", proves: []string{"!filter-input#5"}},
	{name: "service-ports: only new connections are filtered", src: "client", dst: "web:81", state: packettrace.StateEstablished,
		want: "deliver", proves: []string{"!filter-input#5"}},
}

// packet resolves a case's packet in a family.
func (tc *traceCase) packet(t testing.TB, fam int) packettrace.Packet {
	t.Helper()
	src := tc.src
	if !strings.Contains(src, ":") && tc.proto != packettrace.ICMP {
		src += ":40000"
	}
	p := packettrace.Packet{Src: addrPort(t, src, fam), Dst: addrPort(t, tc.dst, fam), Proto: tc.proto,
		FromHost: tc.host, State: tc.state, InIface: tc.iif}
	if p.Proto == "" {
		p.Proto = packettrace.TCP
	}
	if tc.backend != "" {
		p.Backend = addr(t, tc.backend, fam)
	}
	if tc.orig != "" {
		p.Orig = addrPort(t, tc.orig, fam)
	}
	return p
}

// trace traces the case's packet in a family, after the packet of the
// case it names in after.
func (tc *traceCase) trace(t testing.TB, tr *packettrace.Tracer, fam int) (*packettrace.Result, error) {
	t.Helper()
	if tc.after != "" {
		i := slices.IndexFunc(cases, func(c traceCase) bool { return c.name == tc.after })
		if i < 0 {
			t.Fatalf("%s: after %q: no such case", tc.name, tc.after)
		}
		if _, err := tr.Trace(cases[i].packet(t, fam)); err != nil {
			return nil, err
		}
	}
	return tr.Trace(tc.packet(t, fam))
}

func TestTrace(t *testing.T) {
	tr := newTracer(t)
	for fam := range 2 {
		for _, tc := range cases {
			t.Run(famName(fam)+"/"+tc.name, func(t *testing.T) { tc.check(t, tr, fam) })
		}
	}
}

// check traces the case's packet in a family and compares the verdict
// and the rules it proves.
func (tc *traceCase) check(t *testing.T, tr *packettrace.Tracer, fam int) {
	t.Helper()
	res, err := tc.trace(t, tr, fam)
	if err != nil {
		t.Fatal(err)
	}
	bad := false
	if got := res.Summary(nameOf); got != tc.want {
		t.Errorf("verdict %q, want %q", got, tc.want)
		bad = true
	}
	for _, ref := range tc.proves {
		want := !strings.HasPrefix(ref, "!")
		if res.MatchedRule(strings.TrimPrefix(ref, "!")) != want {
			t.Errorf("rule %s: matched %t, want %t", strings.TrimPrefix(ref, "!"), !want, want)
			bad = true
		}
	}
	if bad {
		t.Logf("trace:\n  %s", strings.Join(res.Steps, "\n  "))
	}
}
