package apiconv

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// Bits of FuzzEndpointSlice's flags argument.
const (
	fzReadySet = 1 << iota
	fzReady
	fzServingSet
	fzServing
	fzTerminatingSet
	fzTerminating
	fzPortNil
	fzProtocolNil
	fzNoLabel
	fzHints
)

// FuzzEndpointSlice checks that EndpointSlice never panics and either
// refuses a slice with an ErrInvalid error, ignores it with (nil, nil), or
// returns a slice whose every endpoint is of the slice's family, with the
// API's defaults applied.
func FuzzEndpointSlice(f *testing.F) {
	f.Add("IPv4", "10.1.0.1", "10.1.0.2", int32(8080), "TCP", uint16(0), "zone-1", "node-a")
	f.Add("IPv6", "fd00::1", "10.1.0.2", int32(53), "UDP", uint16(fzReadySet|fzServingSet|fzServing|fzHints), "zone-1", "node-a")
	f.Add("IPv4", "fd00::1", "", int32(0), "SCTP", uint16(fzPortNil), "", "")
	f.Add("IPv6", "::ffff:10.1.0.1", "fe80::1%eth0", int32(65536), "tcp", uint16(fzProtocolNil|fzTerminatingSet|fzTerminating), "z", "n")
	f.Add("FQDN", "db.example.com", "", int32(-1), "", uint16(fzHints), "", "")
	f.Add("IPX", "1.2.3.4", "1.2.3.4", int32(1), "ICMP", uint16(fzNoLabel), "", "")
	f.Add("IPv4", "127.0.0.1", "10.1.0.2", int32(8080), "TCP", uint16(0), "zone-1", "node-a")
	f.Fuzz(func(t *testing.T, addressType, addr0, addr1 string, port int32, proto string, flags uint16, zone, node string) {
		has := func(bit uint16) bool { return flags&bit != 0 }
		p := discoveryv1.EndpointPort{Name: ptr("p"), Port: ptr(port), Protocol: ptr(corev1.Protocol(proto))}
		if has(fzPortNil) {
			p.Port = nil
		}
		if has(fzProtocolNil) {
			p.Protocol = nil
		}
		var cond discoveryv1.EndpointConditions
		if has(fzReadySet) {
			cond.Ready = ptr(has(fzReady))
		}
		if has(fzServingSet) {
			cond.Serving = ptr(has(fzServing))
		}
		if has(fzTerminatingSet) {
			cond.Terminating = ptr(has(fzTerminating))
		}
		e := discoveryv1.Endpoint{Addresses: []string{addr0}, Conditions: cond, NodeName: ptr(node), Zone: ptr(zone)}
		if addr1 != "" {
			e.Addresses = append(e.Addresses, addr1)
		}
		if has(fzHints) {
			e.Hints = &discoveryv1.EndpointHints{
				ForZones: []discoveryv1.ForZone{{Name: zone}},
				ForNodes: []discoveryv1.ForNode{{Name: node}},
			}
		}
		// A second endpoint whose address is addr1, so a bad second
		// endpoint is also exercised.
		e2 := discoveryv1.Endpoint{Addresses: []string{addr1}}
		s := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "shop", Name: "web-fuzz"},
			AddressType: discoveryv1.AddressType(addressType),
			Ports:       []discoveryv1.EndpointPort{p},
			Endpoints:   []discoveryv1.Endpoint{e, e2},
		}
		if !has(fzNoLabel) {
			s.Labels = map[string]string{LabelServiceName: "web"}
		}

		got, err := checkedEndpointSlice(t, s)

		if err != nil {
			if got != nil {
				t.Fatalf("got slice %+v with error %v", got, err)
			}
			if !errors.Is(err, policy.ErrInvalid) {
				t.Fatalf("error %q does not wrap ErrInvalid", err)
			}
			var oe *policy.ObjectError
			if !errors.As(err, &oe) || oe.Object != "EndpointSlice shop/web-fuzz" || oe.Field == "" {
				t.Fatalf("error %q is not an ObjectError naming the slice and a field", err)
			}
			return
		}
		ignored := has(fzNoLabel) || s.AddressType == discoveryv1.AddressTypeFQDN
		if got == nil {
			if !ignored {
				t.Fatalf("(nil, nil) for a labelled %q slice", addressType)
			}
			return
		}
		if ignored {
			t.Fatalf("converted a slice that should be ignored: %+v", got)
		}
		wantIPv4 := s.AddressType == discoveryv1.AddressTypeIPv4
		if !wantIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 {
			t.Fatalf("accepted address type %q", addressType)
		}
		if got.IPv4 != wantIPv4 {
			t.Fatalf("IPv4 = %v for address type %q", got.IPv4, addressType)
		}
		if got.Name != "web-fuzz" || got.Service != (policy.ServiceKey{Namespace: "shop", Name: "web"}) {
			t.Fatalf("Name/Service = %q/%v", got.Name, got.Service)
		}
		for i, ep := range got.Endpoints {
			if why := policy.AddressRefusal(ep.Address); why != "" {
				t.Fatalf("endpoint %d kept on %v, %s", i, ep.Address, why)
			}
		}
		refused := 0
		for _, e := range s.Endpoints {
			if a, err := netip.ParseAddr(e.Addresses[0]); err == nil && policy.AddressRefusal(a) != "" {
				refused++
			}
		}
		if refused > 0 {
			// Left out, with a warning per class; the others are checked
			// by the inputs without such addresses.
			if len(got.Endpoints)+refused != len(s.Endpoints) || len(got.Warnings) == 0 {
				t.Fatalf("%d endpoints kept and warnings %v, with %d of %d refused", len(got.Endpoints), got.Warnings, refused, len(s.Endpoints))
			}
			return
		}
		if len(got.Endpoints) != len(s.Endpoints) {
			t.Fatalf("got %d endpoints, want %d", len(got.Endpoints), len(s.Endpoints))
		}
		for i, ep := range got.Endpoints {
			a := ep.Address
			if !a.IsValid() || a.Is4() != got.IPv4 || a.Zone() != "" || a.Is4In6() {
				t.Fatalf("endpoint %d address %v in a slice with IPv4=%v", i, a, got.IPv4)
			}
			if first, _ := netip.ParseAddr(s.Endpoints[i].Addresses[0]); a != first {
				t.Fatalf("endpoint %d address %v is not the first address %q", i, a, s.Endpoints[i].Addresses[0])
			}
		}
		ep := got.Endpoints[0]
		wantReady := cond.Ready == nil || *cond.Ready
		wantServing := wantReady
		if cond.Serving != nil {
			wantServing = *cond.Serving
		}
		wantTerminating := cond.Terminating != nil && *cond.Terminating
		if ep.Ready != wantReady || ep.Serving != wantServing || ep.Terminating != wantTerminating {
			t.Fatalf("conditions %+v gave ready=%v serving=%v terminating=%v", cond, ep.Ready, ep.Serving, ep.Terminating)
		}
		if ep.NodeName() != node || ep.Zone() != zone || (ep.Place == nil) != (node == "" && zone == "") {
			t.Fatalf("nodeName/zone = %q/%q (place %v), want %q/%q", ep.NodeName(), ep.Zone(), ep.Place, node, zone)
		}
		if has(fzHints) != (slices.Equal(ep.ForZones(), []string{zone}) && slices.Equal(ep.ForNodes(), []string{node})) {
			t.Fatalf("hints %v gave forZones %q forNodes %q", has(fzHints), ep.ForZones(), ep.ForNodes())
		}
		if e2 := got.Endpoints[1]; !e2.Ready || !e2.Serving || e2.Terminating {
			t.Fatalf("endpoint without conditions got %+v", e2)
		}
		if has(fzPortNil) {
			if len(got.Ports) != 0 {
				t.Fatalf("nil port gave ports %+v", got.Ports)
			}
		} else {
			if len(got.Ports) != 1 {
				t.Fatalf("got ports %+v, want one", got.Ports)
			}
			gp := got.Ports[0]
			if int32(gp.Port) != port || gp.Port == 0 || gp.Name != "p" {
				t.Fatalf("port %+v from port %d", gp, port)
			}
			wantProto := policy.ProtocolTCP
			if p.Protocol != nil && *p.Protocol != "" {
				wantProto = policy.Protocol(*p.Protocol)
			}
			if gp.Protocol != wantProto {
				t.Fatalf("protocol %q from %v", gp.Protocol, p.Protocol)
			}
		}
	})
}
