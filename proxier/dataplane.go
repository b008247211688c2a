package proxier

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/ipvs"
)

// DataPlaneConfig configures both kernel writers.
type DataPlaneConfig struct {
	// Interface is the dummy interface carrying VIPs (--ipvs-interface);
	// default kube-ipvs0.
	Interface string
	// ClusterCIDRs are the pod networks (--cluster-cidr).
	ClusterCIDRs []netip.Prefix
	// MasqueradeBit is the packet mark bit for masquerade; default 14.
	MasqueradeBit int
	// GracefulPeriod bounds the drain of removed destinations
	// (--ipvs-graceful-period); default 15m.
	GracefulPeriod time.Duration
	// ExcludeCIDRs (--ipvs-exclude-cidrs): virtual servers there are never
	// deleted.
	ExcludeCIDRs []netip.Prefix
	// StrictARP (--ipvs-strict-arp).
	StrictARP bool
	// IPVS timeouts (--ipvs-tcp-timeout, --ipvs-tcpfin-timeout,
	// --ipvs-udp-timeout); 0 leaves the kernel's value.
	TCPTimeout, TCPFinTimeout, UDPTimeout time.Duration
}

func (c DataPlaneConfig) ipvsConfig() ipvs.Config {
	return ipvs.Config{
		Interface: c.Interface, GracefulPeriod: c.GracefulPeriod, ExcludeCIDRs: c.ExcludeCIDRs,
		StrictARP: c.StrictARP, TCPTimeout: c.TCPTimeout, TCPFinTimeout: c.TCPFinTimeout, UDPTimeout: c.UDPTimeout,
	}
}

func (c DataPlaneConfig) nftConfig() nft.Config {
	return nft.Config{ClusterCIDRs: c.ClusterCIDRs, MasqueradeBit: c.MasqueradeBit}
}

// writer is what DataPlane asks of each kernel writer.
type writer interface {
	Apply(changes []policy.ServicePlan) error
	Resync(plan policy.Plan) error
	Cleanup() error
	NeedsResync() bool
}

// DataPlane programs plans into IPVS and nftables.
type DataPlane struct {
	nft  writer
	ipvs *ipvs.Writer
}

// NewDataPlane opens both writers on the running kernel.
func NewDataPlane(cfg DataPlaneConfig) (*DataPlane, error) {
	n, err := nft.NewLinux(cfg.nftConfig())
	if err != nil {
		return nil, fmt.Errorf("open nftables: %w", err)
	}
	i, err := ipvs.NewLinux(cfg.ipvsConfig())
	if err != nil {
		return nil, fmt.Errorf("open ipvs: %w", err)
	}
	return &DataPlane{nft: n, ipvs: i}, nil
}

// newDataPlane composes given writers, for tests with fakes.
func newDataPlane(n writer, i *ipvs.Writer) *DataPlane { return &DataPlane{nft: n, ipvs: i} }

// Apply programs per-service changes incrementally. nftables goes first,
// so a new virtual server's filtering and masquerade exist before IPVS
// accepts its traffic. Both writers are always tried; a failure in one
// does not stop the other, and NeedsResync then reports true.
func (d *DataPlane) Apply(changes []policy.ServicePlan) error {
	return errors.Join(wrap("nftables", d.nft.Apply(changes)), wrap("ipvs", d.ipvs.Apply(changes)))
}

// Resync programs the whole plan: the nftables table is replaced in one
// transaction and IPVS is re-read from the kernel and repaired.
func (d *DataPlane) Resync(plan policy.Plan) error {
	return errors.Join(wrap("nftables", d.nft.Resync(plan)), wrap("ipvs", d.ipvs.Resync(plan)))
}

// NeedsResync reports whether the next sync must be a full Resync
// because an earlier one failed.
func (d *DataPlane) NeedsResync() bool { return d.nft.NeedsResync() || d.ipvs.NeedsResync() }

// Cleanup removes our nftables table, our virtual servers and our dummy
// interface, and nothing foreign.
func (d *DataPlane) Cleanup() error {
	return errors.Join(wrap("nftables", d.nft.Cleanup()), wrap("ipvs", d.ipvs.Cleanup()))
}

// IPVSOps counts the IPVS writer's kernel operations by kind.
func (d *DataPlane) IPVSOps() map[string]int { return d.ipvs.Ops() }

// Draining counts destinations draining after leaving the plan.
func (d *DataPlane) Draining() int { return d.ipvs.Draining() }

// Close releases the kernel handles.
func (d *DataPlane) Close() { d.ipvs.Close() }

func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}
