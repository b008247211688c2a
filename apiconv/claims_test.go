package apiconv

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// TestHeldClusterIPsWhateverTheService: a Service holds every ClusterIP
// that reads as an address, leniently, whether or not it is valid for
// the engine; None and unreadable entries hold nothing.
func TestHeldClusterIPsWhateverTheService(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec corev1.ServiceSpec
		want []netip.Addr
	}{
		{"both families", corev1.ServiceSpec{ClusterIP: "10.96.0.1", ClusterIPs: []string{"10.96.0.1", "fd00::1"}},
			[]netip.Addr{netip.MustParseAddr("10.96.0.1"), netip.MustParseAddr("fd00::1")}},
		{"spec.clusterIP alone", corev1.ServiceSpec{ClusterIP: "10.96.0.2"}, []netip.Addr{netip.MustParseAddr("10.96.0.2")}},
		{"legacy forms read as kube-proxy reads them", corev1.ServiceSpec{ClusterIPs: []string{"010.096.000.003", "::ffff:10.96.0.4"}},
			[]netip.Addr{netip.MustParseAddr("10.96.0.3"), netip.MustParseAddr("10.96.0.4")}},
		{"an unreadable entry is skipped, the rest held", corev1.ServiceSpec{ClusterIPs: []string{"10.96.0.300", "10.96.0.5"}},
			[]netip.Addr{netip.MustParseAddr("10.96.0.5")}},
		{"headless holds nothing", corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, ClusterIPs: []string{corev1.ClusterIPNone}}, nil},
		{"not allocated holds nothing", corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := HeldClusterIPs(&corev1.Service{Spec: tc.spec})
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
