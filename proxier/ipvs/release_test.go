package ipvs

import (
	"strings"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testsupport/plantest"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// TestApplyReleasesBeforeClaiming: one Apply that moves a virtual server
// from one service to another (the old one deleted, a new one created
// with the same ClusterIP) programs the new owner, whatever the order of
// the changes, and fails nothing.
func TestApplyReleasesBeforeClaiming(t *testing.T) {
	for _, order := range []string{"new first", "old first"} {
		t.Run(order, func(t *testing.T) {
			e := newEnv(t, Config{})
			e.mustApply(plantest.Service("old", plantest.VirtualServer("ClusterIP 10.96.0.50:80/TCP", "10.244.1.5:8080")))
			moved := plantest.Service("a-new", plantest.VirtualServer("ClusterIP 10.96.0.50:80/TCP", "10.244.1.9:8080"))
			gone := plantest.Service("old")
			batch := []policy.ServicePlan{moved, gone}
			if order == "old first" {
				batch = []policy.ServicePlan{gone, moved}
			}
			if err := e.apply(batch...); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if d := e.dump(); !strings.Contains(d, "10.244.1.9:8080") || strings.Contains(d, "10.244.1.5:8080") {
				t.Errorf("after the move the kernel holds:\n%s\nwant 10.96.0.50:80 -> 10.244.1.9:8080 only", d)
			}
			if e.w.NeedsResync() {
				t.Error("the move asks for a resync")
			}
		})
	}
}
