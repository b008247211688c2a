package app

import (
	"context"
	"fmt"
	"io"

	"k8s.io/klog/v2"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/conntrack"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/sysctl"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier"
)

// nodeInit is what --init-only changes on the node: the IPVS side
// (proxier.InitKernel) and the conntrack sysctls. Tests replace it.
type nodeInit struct {
	ipvs    func(proxier.DataPlaneConfig) error
	sysctls sysctl.Files
}

// hostInit is the running node's.
var hostInit = nodeInit{ipvs: proxier.InitKernel, sysctls: sysctl.Host{}}

// runInitOnly does kube-proxy's --init-only in IPVS mode: the privileged
// initialisation, then exit 0, for a privileged init container before
// a main container with CAP_NET_ADMIN alone (whose first sync then
// finds the sysctls set and writes none of them). It checks that the
// kernel has IPVS and the scheduler, sets the IPVS sysctls and timeouts
// and the conntrack sysctls, and touches nothing else: no API server, no
// virtual server, address or nftables table.
func runInitOnly(ctx context.Context, o *Options, stderr io.Writer, n nodeInit) int {
	setupLogging(o, stderr)
	logger := klog.FromContext(ctx)
	if err := initNode(logger, o.RunConfig(), n); err != nil {
		fmt.Fprintf(stderr, "kube-ipvs-proxy: --init-only: %v\n", err)
		return ExitError
	}
	logger.Info("System initialized and --init-only specified")
	return ExitOK
}

// initNode makes --init-only's changes. IPVS goes first: its module
// check names ip_vs, which brings nf_conntrack with it.
func initNode(logger klog.Logger, rc RunConfig, n nodeInit) error {
	if err := n.ipvs(rc.DataPlane); err != nil {
		return err
	}
	if err := conntrack.Apply(logger, n.sysctls, rc.Conntrack); err != nil {
		return fmt.Errorf("set the conntrack sysctls from the configuration: %w", err)
	}
	return nil
}
