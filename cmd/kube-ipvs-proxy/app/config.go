package app

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logsapi "k8s.io/component-base/logs/api/v1"
	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"
	"sigs.k8s.io/yaml"
)

// The --config file's type, and the only proxy mode we implement.
const (
	ConfigAPIVersion = "kubeproxy.config.k8s.io/v1alpha1"
	ConfigKind       = "KubeProxyConfiguration"
	ModeIPVS         = "ipvs"
)

// kube-proxy's default ports (k8s.io/kubernetes/pkg/cluster/ports).
const (
	defaultHealthzPort = 10256
	defaultMetricsPort = 10249
)

// KubeProxyConfiguration is kube-proxy's configuration file,
// kubeproxy.config.k8s.io/v1alpha1, as published in k8s.io/kube-proxy
// (kept at the version of k8s.io/api, so the fields follow the Kubernetes
// release we build against). kube-ipvs-proxy uses clientConnection,
// hostnameOverride, bindAddress, healthzBindAddress, metricsBindAddress,
// bindAddressHardFail, featureGates (warnings only), oomScoreAdj, logging.verbosity and
// logging.vmodule, mode (must be ipvs or empty), the ipvs section,
// iptables.masqueradeAll and iptables.masqueradeBit (which kube-proxy's
// IPVS mode reads from the iptables section), clusterCIDR,
// nodePortAddresses, configSyncPeriod and the conntrack section (set on
// the node at startup, package conntrack). The other fields are accepted
// and kept so that --write-config-to reproduces them. Our own settings
// (--ipvs-graceful-period and the like) are flags on Options and fields
// of the file's second document (OwnConfiguration), so the upstream type
// needs no extension.
type KubeProxyConfiguration = kubeproxyconfig.KubeProxyConfiguration

// VModuleItem is one file pattern's verbosity (logging.vmodule).
type VModuleItem = logsapi.VModuleItem

// DefaultConfig is kube-proxy's v1alpha1 configuration with nothing set:
// what a file holding only apiVersion and kind means.
func DefaultConfig() KubeProxyConfiguration {
	c := KubeProxyConfiguration{TypeMeta: metav1.TypeMeta{APIVersion: ConfigAPIVersion, Kind: ConfigKind}}
	setDefaults(&c)
	return c
}

// setDefaults fills unset fields as kube-proxy's v1alpha1 defaulting does
// (pkg/proxy/apis/config/v1alpha1/defaults.go, in k8s.io/kubernetes, which
// k8s.io/kube-proxy does not publish). Note that ipvs.minSyncPeriod has no
// default there: a file without it means 0.
func setDefaults(c *KubeProxyConfiguration) {
	if c.BindAddress == "" {
		c.BindAddress = "0.0.0.0"
	}
	healthzHost, metricsHost := "0.0.0.0", "127.0.0.1"
	if a, err := netip.ParseAddr(c.BindAddress); err != nil || !a.Unmap().Is4() {
		healthzHost, metricsHost = "::", "::1"
	}
	c.HealthzBindAddress = defaultAddress(c.HealthzBindAddress, healthzHost, defaultHealthzPort)
	c.MetricsBindAddress = defaultAddress(c.MetricsBindAddress, metricsHost, defaultMetricsPort)
	setInt32(&c.OOMScoreAdj, -999)
	setDuration(&c.IPTables.SyncPeriod, 30*time.Second)
	setDuration(&c.IPTables.MinSyncPeriod, time.Second)
	if c.IPTables.LocalhostNodePorts == nil {
		t := true
		c.IPTables.LocalhostNodePorts = &t
	}
	setDuration(&c.IPVS.SyncPeriod, 30*time.Second)
	setDuration(&c.NFTables.SyncPeriod, 30*time.Second)
	setDuration(&c.NFTables.MinSyncPeriod, time.Second)
	setInt32(&c.Conntrack.MaxPerCore, 32*1024)
	setInt32(&c.Conntrack.Min, 128*1024)
	setInt32(&c.IPTables.MasqueradeBit, 14)
	setInt32(&c.NFTables.MasqueradeBit, 14)
	if c.Conntrack.TCPEstablishedTimeout == nil {
		c.Conntrack.TCPEstablishedTimeout = &metav1.Duration{Duration: 24 * time.Hour}
	}
	if c.Conntrack.TCPCloseWaitTimeout == nil {
		c.Conntrack.TCPCloseWaitTimeout = &metav1.Duration{Duration: time.Hour}
	}
	setDuration(&c.ConfigSyncPeriod, 15*time.Minute)
	if c.ClientConnection.ContentType == "" {
		c.ClientConnection.ContentType = "application/vnd.kubernetes.protobuf"
	}
	if c.ClientConnection.QPS == 0 {
		c.ClientConnection.QPS = 5
	}
	if c.ClientConnection.Burst == 0 {
		c.ClientConnection.Burst = 10
	}
	if c.FeatureGates == nil {
		c.FeatureGates = map[string]bool{}
	}
	if c.Logging.Format == "" {
		c.Logging.Format = "text"
	}
	if c.Logging.FlushFrequency.Duration.Duration == 0 {
		c.Logging.FlushFrequency = logsapi.TimeOrMetaDuration{Duration: metav1.Duration{Duration: 5 * time.Second}, SerializeAsString: true}
	}
}

func setInt32(p **int32, v int32) {
	if *p == nil {
		*p = &v
	}
}

func setDuration(d *metav1.Duration, v time.Duration) {
	if d.Duration == 0 {
		d.Duration = v
	}
}

// defaultAddress is kube-proxy's defaulting of a bind address: empty
// means host:port, and a bare IP gets the port.
func defaultAddress(addr, host string, port int) string {
	if addr == "" {
		return net.JoinHostPort(host, strconv.Itoa(port))
	}
	return appendPortIfNeeded(addr, port)
}

// appendPortIfNeeded adds port to a bare IP; anything else is returned as
// is, for validation to judge.
func appendPortIfNeeded(addr string, port int) string {
	if _, _, err := net.SplitHostPort(addr); err == nil {
		return addr
	}
	if _, err := netip.ParseAddr(addr); err != nil {
		return addr
	}
	return net.JoinHostPort(addr, strconv.Itoa(port))
}

// MarshalConfig writes c as a KubeProxyConfiguration YAML document, as
// kube-proxy's --write-config-to does.
func MarshalConfig(c KubeProxyConfiguration) ([]byte, error) {
	c.APIVersion, c.Kind = ConfigAPIVersion, ConfigKind
	data, err := yaml.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", ConfigKind, err)
	}
	return data, nil
}
