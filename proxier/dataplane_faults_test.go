package proxier

import (
	"errors"
	"syscall"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/ipvs"
)

// TestDataPlaneConfinesServiceFailures: an IPVS failure confined to one
// service (a scheduler module the kernel cannot load: ENOENT) is not an
// error of Apply or Resync: ServiceFailures, Failing and NextRetry report
// it, and no full resync is asked for. A deleted kube-ipvs0 or table is
// noticed by Check and asks for one.
func TestDataPlaneConfinesServiceFailures(t *testing.T) {
	f := newFakes(t)
	f.kernel.Fault = func(op, target string) error {
		if op == "add-service" && target == "10.96.0.1:80/TCP" {
			return syscall.ENOENT
		}
		return nil
	}
	sp := webPlan("10.244.1.5")
	for what, err := range map[string]error{
		"Resync": f.dp.Resync(policy.Plan{Node: "node-a", VirtualServers: sp.VirtualServers}),
		"Apply":  f.dp.Apply([]policy.ServicePlan{webPlan("10.244.1.5", "10.244.1.6")}),
	} {
		if err != nil || f.dp.NeedsResync() {
			t.Errorf("%s: %v, NeedsResync %v; want nil and false", what, err, f.dp.NeedsResync())
		}
	}
	fs := f.dp.ServiceFailures()
	if len(fs) != 1 || fs[0].Service != sp.Service || fs[0].Reason != ipvs.ReasonKernelError || !errors.Is(fs[0].Err, syscall.ENOENT) {
		t.Errorf("ServiceFailures %v, want default/web's KernelError (ENOENT)", fs)
	}
	if got := f.dp.Failing(); len(got) != 1 || got[0] != sp.Service {
		t.Errorf("Failing %v, want [default/web]", got)
	}
	if f.dp.NextRetry().IsZero() {
		t.Error("NextRetry zero with a failing service")
	}
	if err := f.dp.Check(); err != nil {
		t.Errorf("Check with everything in place: %v", err)
	}
	if err := f.links.DeleteLink(ipvs.DefaultInterface); err != nil {
		t.Fatal(err)
	}
	if err := f.dp.Check(); !errors.Is(err, ipvs.ErrLinkChanged) || !f.dp.NeedsResync() {
		t.Errorf("Check after kube-ipvs0 was deleted: %v, NeedsResync %v; want ErrLinkChanged, true", err, f.dp.NeedsResync())
	}
}
