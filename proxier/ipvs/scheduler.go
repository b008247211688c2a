package ipvs

import (
	"errors"
	"fmt"
	"net/netip"
	"syscall"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// schedulerProbe is the virtual server kube-proxy's CanUseIPVSProxier
// adds to learn whether the kernel has a scheduler: an address of
// TEST-NET-2 (RFC 5737), reserved for documentation, which no node or
// Service should use.
var schedulerProbe = Key{Address: netip.MustParseAddr("198.51.100.0"), Protocol: policy.ProtocolTCP, Port: 20000}

// CheckScheduler reports whether the kernel has IPVS scheduler name
// ("" is rr), as kube-proxy checks it at start: a virtual server that
// already uses it is enough (a restart); otherwise a probe virtual
// server is added with it, which makes the kernel load its module
// (ip_vs_<name>) if it can, and deleted. "none", the kernel's name for
// no scheduler, needs no module. The error names the module.
func (w *Writer) CheckScheduler(name string) error { return checkScheduler(w.kernel, name) }

func checkScheduler(k Kernel, name string) error {
	if name == "" {
		name = policy.DefaultScheduler
	}
	vss, err := k.VirtualServers()
	if err != nil {
		return fmt.Errorf("check IPVS scheduler %q: list the virtual servers: %w", name, err)
	}
	for _, vs := range vss {
		if vs.Scheduler == name {
			return nil
		}
	}
	probe := VirtualServer{Key: schedulerProbe, Scheduler: name}
	err = k.AddVirtualServer(probe)
	if errors.Is(err, syscall.EEXIST) { // left by a start that stopped between the two
		if err = k.DeleteVirtualServer(schedulerProbe); err == nil {
			err = k.AddVirtualServer(probe)
		}
	}
	if err != nil {
		if errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("IPVS scheduler %q: the kernel has no such scheduler (module ip_vs_%s): %w", name, name, err)
		}
		return fmt.Errorf("check IPVS scheduler %q: add probe virtual server %s: %w", name, schedulerProbe, err)
	}
	if err := k.DeleteVirtualServer(schedulerProbe); err != nil {
		return fmt.Errorf("check IPVS scheduler %q: delete probe virtual server %s: %w", name, schedulerProbe, err)
	}
	return nil
}
