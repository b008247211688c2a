package proxier

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/apiconv"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// TestTrackerHoldsUnservedServicesClusterIPs: a Service the proxy does
// not serve, another proxy's or one skipped as invalid, still holds its
// ClusterIP: another Service's external IP equal to it is not served,
// and is served once that Service is deleted.
func TestTrackerHoldsUnservedServicesClusterIPs(t *testing.T) {
	grab := service("grab", "10.96.0.99", func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"10.96.0.40"} })
	for _, tc := range []struct {
		name   string
		theirs *corev1.Service
	}{
		{"another proxy's Service", service("theirs", "10.96.0.40", func(s *corev1.Service) {
			s.Labels = map[string]string{apiconv.LabelServiceProxyName: "other-proxy"}
		})},
		{"a Service skipped as invalid", service("theirs", "10.96.0.40", func(s *corev1.Service) { s.Spec.SessionAffinity = "Sticky" })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTestTracker(t)
			tr.upsertService(grab)
			tr.checkout(true, false)
			tr.upsertService(tc.theirs)
			if got := checkedOut(tr.checkout(false, false)); !slices.Contains(got, "default/grab") {
				t.Errorf("checked out %v, want default/grab re-planned", got)
			}
			if servesExternal(tr, "grab") {
				t.Errorf("grab serves 10.96.0.40, the ClusterIP of %s", tc.name)
			}
			tr.deleteService("default", "theirs")
			if got := checkedOut(tr.checkout(false, false)); !slices.Contains(got, "default/grab") {
				t.Errorf("checked out %v after the delete, want default/grab re-planned", got)
			}
			if !servesExternal(tr, "grab") {
				t.Error("grab does not serve 10.96.0.40 once the Service holding it is deleted")
			}
		})
	}
}

func servesExternal(tr *tracker, name string) bool {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	sp, _ := tr.engine.ComputeService(key(name))
	return slices.ContainsFunc(sp.VirtualServers, func(vs policy.VirtualServer) bool { return vs.Kind == policy.KindExternalIP })
}
