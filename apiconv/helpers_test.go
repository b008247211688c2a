package apiconv

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

func ptr[T any](v T) *T { return &v }

// cmpOpts compares converted values: netip.Addr by ==, and nil slices and
// maps equal to empty ones (the converters do not promise either form).
var cmpOpts = []cmp.Option{cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{}), cmpopts.EquateEmpty()}

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, 0, len(ss))
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

// checkObjectError asserts err is a *policy.ObjectError wrapping sentinel
// (and not the other sentinel) that names object and field and says
// something.
func checkObjectError(t *testing.T, err, sentinel error, object, field string) *policy.ObjectError {
	t.Helper()
	if err == nil {
		t.Fatalf("got nil error, want one wrapping %v", sentinel)
	}
	if !errors.Is(err, sentinel) {
		t.Fatalf("error %q does not wrap %v", err, sentinel)
	}
	other := policy.ErrInvalid
	if sentinel == policy.ErrInvalid {
		other = policy.ErrNotProxied
	}
	if errors.Is(err, other) {
		t.Errorf("error %q wraps %v as well as %v", err, other, sentinel)
	}
	var oe *policy.ObjectError
	if !errors.As(err, &oe) {
		t.Fatalf("error %q (%T) is not a *policy.ObjectError", err, err)
	}
	if oe.Object != object {
		t.Errorf("Object = %q, want %q", oe.Object, object)
	}
	if oe.Field != field {
		t.Errorf("Field = %q, want %q (error %q)", oe.Field, field, err)
	}
	if oe.Message == "" {
		t.Errorf("error %q has an empty Message", err)
	}
	return oe
}

func TestObjectName(t *testing.T) {
	tests := []struct {
		name, kind, namespace, obj, want string
	}{
		{name: "namespaced object is Kind namespace/name", kind: "Service", namespace: "shop", obj: "web", want: "Service shop/web"},
		{name: "cluster-scoped object is Kind name", kind: "Node", obj: "node-a", want: "Node node-a"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ObjectName(tc.kind, tc.namespace, tc.obj); got != tc.want {
				t.Errorf("ObjectName(%q, %q, %q) = %q, want %q", tc.kind, tc.namespace, tc.obj, got, tc.want)
			}
		})
	}
}
