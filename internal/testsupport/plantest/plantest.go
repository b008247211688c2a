package plantest

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// Service builds the ServicePlan of default/<name> with these virtual
// servers, stamping their Service field.
func Service(name string, vss ...policy.VirtualServer) policy.ServicePlan {
	key := policy.ServiceKey{Namespace: "default", Name: name}
	for i := range vss {
		vss[i].Service = key
	}
	return policy.ServicePlan{Service: key, VirtualServers: vss}
}

// VirtualServer builds a virtual server (scheduler rr) from
// "Kind addr:port/PROTO" and destinations "addr:port" or
// "addr:port*weight" (weight 1 by default).
func VirtualServer(spec string, dests ...string) policy.VirtualServer {
	kind, rest, _ := strings.Cut(spec, " ")
	ap, proto, _ := strings.Cut(rest, "/")
	a := netip.MustParseAddrPort(ap)
	v := policy.VirtualServer{Kind: policy.Kind(kind), Address: a.Addr(), Port: a.Port(),
		Protocol: policy.Protocol(proto), Scheduler: "rr", Destinations: []policy.Destination{}}
	for _, d := range dests {
		ds, w, ok := strings.Cut(d, "*")
		weight := int64(1)
		if ok {
			weight, _ = strconv.ParseInt(w, 10, 32)
		}
		dap := netip.MustParseAddrPort(ds)
		v.Destinations = append(v.Destinations, policy.Destination{Address: dap.Addr(), Port: dap.Port(), Weight: int32(weight)})
	}
	return v
}

// Plan flattens service plans into a sorted Plan.
func Plan(sps ...policy.ServicePlan) policy.Plan {
	var p policy.Plan
	for _, sp := range sps {
		p.VirtualServers = append(p.VirtualServers, sp.VirtualServers...)
	}
	policy.SortVirtualServers(p.VirtualServers)
	return p
}

// Groups is the plan's virtual servers grouped by service, in the order
// and groups Plan.Services yields, each group its own copy: the shape a
// writer's Apply takes, for tests that apply a plan service by service.
func Groups(p policy.Plan) []policy.ServicePlan {
	var out []policy.ServicePlan
	for svc, vss := range p.Services() {
		out = append(out, policy.ServicePlan{Service: svc, VirtualServers: slices.Clone(vss)})
	}
	return out
}
