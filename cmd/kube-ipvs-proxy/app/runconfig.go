package app

import (
	"maps"
	"net/netip"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/conntrack"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier"
)

// RunConfig is everything the run mode needs, resolved from the options
// (flags or --config file). Build it with Options.RunConfig after
// Validate.
type RunConfig struct {
	// NodeName is this node (--hostname-override / hostnameOverride /
	// the host name).
	NodeName string
	// Policy configures the policy engine.
	Policy policy.Config
	// ServiceProxyName is --service-proxy-name, for apiconv.Service.
	ServiceProxyName string
	// DataPlane configures the IPVS and nftables writers.
	DataPlane proxier.DataPlaneConfig
	// SyncPeriod is the periodic full resync (--ipvs-sync-period,
	// ipvs.syncPeriod; > 0); MinSyncPeriod the minimum interval between
	// syncs (--ipvs-min-sync-period, ipvs.minSyncPeriod; 0 means every
	// change syncs at once).
	SyncPeriod, MinSyncPeriod time.Duration
	// ConfigSyncPeriod is the informers' resync period
	// (--config-sync-period, configSyncPeriod).
	ConfigSyncPeriod time.Duration
	// BindAddress overrides the node's primary IP unless it is
	// unspecified (0.0.0.0 or ::), as kube-proxy's bindAddress.
	BindAddress netip.Addr
	// HealthzBindAddress and MetricsBindAddress are host:port; empty
	// disables the server. BindAddressHardFail makes a failure to bind
	// them fatal.
	HealthzBindAddress, MetricsBindAddress string
	BindAddressHardFail                    bool
	// EnableProfiling serves /debug/pprof/ on the metrics server
	// (--profiling, enableProfiling).
	EnableProfiling bool
	// Client configures the API client.
	Client ClientConfig
	// FeatureGates are the gates given; gateWarnings has named those we
	// ignore.
	FeatureGates map[string]bool
	// OOMScoreAdj, when set, is written to /proc/self/oom_score_adj at
	// startup in the real mode (--oom-score-adj, oomScoreAdj), as
	// kube-proxy.
	OOMScoreAdj *int32
	// Conntrack are the netfilter conntrack sysctls to set at startup in
	// the real mode (--conntrack-*, conntrack), as kube-proxy.
	Conntrack conntrack.Settings
}

// ClientConfig is the API client's configuration.
type ClientConfig struct {
	Kubeconfig string // --kubeconfig, clientConnection.kubeconfig; empty means in-cluster
	Master     string // --master: overrides the kubeconfig's server
	QPS        float32
	Burst      int
	// ContentType is the request content type (default protobuf);
	// AcceptContentTypes the Accept header, empty for client-go's default.
	ContentType, AcceptContentTypes string
}

// RunConfig returns what the run mode needs. Call it after Validate,
// which has checked every value parsed here.
func (o *Options) RunConfig() RunConfig {
	c := &o.Config
	bind, _ := netip.ParseAddr(c.BindAddress)
	podIf, podIfPrefix := o.podInterface()
	return RunConfig{
		NodeName:         o.NodeName,
		Policy:           o.engineConfig(),
		ServiceProxyName: o.ServiceProxyName,
		DataPlane: proxier.DataPlaneConfig{
			Interface:          o.IPVSInterface,
			ClusterCIDRs:       prefixes(splitList(c.ClusterCIDR)),
			PodInterface:       podIf,
			PodInterfacePrefix: podIfPrefix,
			MasqueradeBit:      int(deref(c.IPTables.MasqueradeBit, 14)),
			GracefulPeriod:     o.IPVSGracefulPeriod,
			ExcludeCIDRs:       prefixes(c.IPVS.ExcludeCIDRs),
			StrictARP:          c.IPVS.StrictARP,
			TCPTimeout:         c.IPVS.TCPTimeout.Duration,
			TCPFinTimeout:      c.IPVS.TCPFinTimeout.Duration,
			UDPTimeout:         c.IPVS.UDPTimeout.Duration,
			Scheduler:          c.IPVS.Scheduler,
		},
		SyncPeriod:          c.IPVS.SyncPeriod.Duration,
		MinSyncPeriod:       c.IPVS.MinSyncPeriod.Duration,
		ConfigSyncPeriod:    c.ConfigSyncPeriod.Duration,
		BindAddress:         bind,
		HealthzBindAddress:  c.HealthzBindAddress,
		MetricsBindAddress:  c.MetricsBindAddress,
		BindAddressHardFail: c.BindAddressHardFail,
		EnableProfiling:     c.EnableProfiling,
		Client: ClientConfig{
			Kubeconfig:         c.ClientConnection.Kubeconfig,
			Master:             o.Master,
			QPS:                c.ClientConnection.QPS,
			Burst:              int(c.ClientConnection.Burst),
			ContentType:        c.ClientConnection.ContentType,
			AcceptContentTypes: c.ClientConnection.AcceptContentTypes,
		},
		FeatureGates: maps.Clone(c.FeatureGates),
		OOMScoreAdj:  c.OOMScoreAdj,
		Conntrack: conntrack.Settings{
			MaxPerCore:            deref(c.Conntrack.MaxPerCore, 0),
			Min:                   deref(c.Conntrack.Min, 0),
			TCPEstablishedTimeout: durationOf(c.Conntrack.TCPEstablishedTimeout),
			TCPCloseWaitTimeout:   durationOf(c.Conntrack.TCPCloseWaitTimeout),
			TCPBeLiberal:          c.Conntrack.TCPBeLiberal,
			UDPTimeout:            c.Conntrack.UDPTimeout.Duration,
			UDPStreamTimeout:      c.Conntrack.UDPStreamTimeout.Duration,
		},
	}
}

// durationOf is d's duration, 0 when unset.
func durationOf(d *metav1.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return d.Duration
}

func (o *Options) engineConfig() policy.Config {
	bind, _ := netip.ParseAddr(o.Config.BindAddress)
	podIf, _ := o.podInterface()
	return policy.Config{
		NodeName:          o.NodeName,
		BindAddress:       bind,
		Scheduler:         o.Config.IPVS.Scheduler,
		NodePortAddresses: o.Config.NodePortAddresses,
		ClusterCIDRs:      splitList(o.Config.ClusterCIDR),
		LocalByInterface:  podIf != "",
		MasqueradeAll:     o.Config.IPTables.MasqueradeAll,
		NoTrackServices:   o.noTrackKeys(),

		RefuseNodeAddresses: o.RefuseNodeAddressExternalIPs,
		MaxVirtualServers:   o.MaxVirtualServersPerService,

		MaxVirtualServersPerNode: o.MaxVirtualServersPerNode,
	}
}

// nftConfig is the nftables renderer's configuration for --dry-run.
func (o *Options) nftConfig() nft.Config {
	podIf, podIfPrefix := o.podInterface()
	return nft.Config{
		ClusterCIDRs:       prefixes(splitList(o.Config.ClusterCIDR)),
		PodInterface:       podIf,
		PodInterfacePrefix: podIfPrefix,
		MasqueradeBit:      int(deref(o.Config.IPTables.MasqueradeBit, 14)),
	}
}

func (o *Options) noTrackKeys() []policy.ServiceKey {
	var keys []policy.ServiceKey
	for _, s := range o.NoTrackServices {
		if ns, name, ok := strings.Cut(s, "/"); ok {
			keys = append(keys, policy.ServiceKey{Namespace: ns, Name: name})
		}
	}
	return keys
}

// prefixes parses CIDRs, masked; Validate has rejected bad ones.
func prefixes(cidrs []string) []netip.Prefix {
	var out []netip.Prefix
	for _, c := range cidrs {
		if p, err := netip.ParsePrefix(strings.TrimSpace(c)); err == nil {
			out = append(out, p.Masked())
		}
	}
	return out
}

func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
