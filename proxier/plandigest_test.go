package proxier

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// changed returns v (a field's value) changed, for the kinds of field a
// virtual server has; ok is false for a kind it does not know.
func changed(v reflect.Value) (reflect.Value, bool) {
	out := reflect.New(v.Type()).Elem()
	out.Set(v)
	switch x := v.Interface().(type) {
	case netip.Addr:
		out.Set(reflect.ValueOf(netip.MustParseAddr("192.0.2.99")))
		return out, x != netip.MustParseAddr("192.0.2.99")
	case netip.AddrPort:
		out.Set(reflect.ValueOf(netip.AddrPortFrom(x.Addr(), x.Port()+1)))
		return out, true
	case []netip.Prefix:
		out.Set(reflect.ValueOf(append(append([]netip.Prefix(nil), x...), netip.MustParsePrefix("198.51.100.0/24"))))
		return out, true
	case []policy.Destination:
		out.Set(reflect.ValueOf(append(append([]policy.Destination(nil), x...), policy.Destination{})))
		return out, true
	}
	switch v.Kind() {
	case reflect.String:
		out.SetString(v.String() + "x")
	case reflect.Bool:
		out.SetBool(!v.Bool())
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		out.SetUint(v.Uint() + 1)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		out.SetInt(v.Int() + 1)
	case reflect.Slice:
		if v.Type().Elem().Kind() != reflect.String {
			return out, false
		}
		out.Set(reflect.Append(reflect.AppendSlice(reflect.MakeSlice(v.Type(), 0, v.Len()+1), v), reflect.ValueOf("x")))
	default:
		return out, false
	}
	return out, true
}

// Every field of a virtual server and of its destinations but Reason
// changes the digest (a field added to policy.VirtualServer or
// policy.Destination and forgotten by appendVirtualServer fails here), and
// Reason does not: a changed plan is never taken for an unchanged one.
func TestPlanDigestCoversEveryField(t *testing.T) {
	base := policy.VirtualServer{
		Service: policy.ServiceKey{Namespace: "default", Name: "web"}, PortName: "http", Kind: policy.KindLoadBalancer,
		Address: netip.MustParseAddr("203.0.113.10"), Port: 80, Protocol: policy.ProtocolTCP, Scheduler: "rr",
		SchedulerFlags: []string{"flag-1"}, PersistenceTimeoutSeconds: 10, TrafficPolicy: policy.PolicyCluster,
		Masquerade: policy.MasqueradeNever, InternalVia: netip.MustParseAddrPort("10.96.0.10:80"),
		SourceRanges: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")},
		Destinations: []policy.Destination{{Address: netip.MustParseAddr("10.244.1.5"), Port: 8080, Weight: 1}},
		Reason:       "why",
	}
	digest := func(vs policy.VirtualServer) planDigest {
		d, _ := digestOf([]policy.VirtualServer{vs}, nil)
		return d
	}
	want := digest(base)
	check := func(name string, vs policy.VirtualServer, same bool) {
		t.Helper()
		if got := digest(vs); (got == want) != same {
			t.Errorf("changing %s: digest unchanged = %v, want %v", name, got == want, same)
		}
	}
	vt := reflect.TypeOf(base)
	for i := range vt.NumField() {
		f := vt.Field(i)
		if f.Type == reflect.TypeOf(policy.ServiceKey{}) {
			for j := range f.Type.NumField() {
				vs := base
				sv := reflect.ValueOf(&vs.Service).Elem().Field(j)
				sv.SetString(sv.String() + "x")
				check(f.Name+"."+f.Type.Field(j).Name, vs, false)
			}
			continue
		}
		vs := base
		fv := reflect.ValueOf(&vs).Elem().Field(i)
		nv, ok := changed(fv)
		if !ok {
			t.Fatalf("field %s (%s): the test cannot change it; teach it and appendVirtualServer", f.Name, f.Type)
		}
		fv.Set(nv)
		check(f.Name, vs, f.Name == "Reason")
	}
	dt := reflect.TypeOf(policy.Destination{})
	for i := range dt.NumField() {
		vs := base
		vs.Destinations = append([]policy.Destination(nil), base.Destinations...)
		fv := reflect.ValueOf(&vs.Destinations[0]).Elem().Field(i)
		nv, ok := changed(fv)
		if !ok {
			t.Fatalf("destination field %s (%s): the test cannot change it", dt.Field(i).Name, dt.Field(i).Type)
		}
		fv.Set(nv)
		check("Destinations[0]."+dt.Field(i).Name, vs, false)
	}
	if d, _ := digestOf(nil, nil); d != (planDigest{}) {
		t.Errorf("digest of no virtual servers = %v, want the zero digest", d)
	}
	// Moving a value from one field to its neighbour changes the digest.
	a, b := base, base
	a.PortName, a.Scheduler = "ab", "c"
	b.PortName, b.Scheduler = "a", "bc"
	if digest(a) == digest(b) {
		t.Error("fields run together: PortName ab + Scheduler c digests as a + bc")
	}
}
