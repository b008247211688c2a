package app

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
// kubeproxy.config.k8s.io/v1alpha1 as of Kubernetes v1.36, field for field
// (our own copy of k8s.io/kube-proxy/config/v1alpha1, so that the module
// does not depend on kube-proxy). kube-ipvs-proxy uses clientConnection,
// hostnameOverride, bindAddress, healthzBindAddress, metricsBindAddress,
// bindAddressHardFail, featureGates (warnings only), logging.verbosity and
// logging.vmodule, mode (must be ipvs or empty), the ipvs section,
// iptables.masqueradeAll and iptables.masqueradeBit (which kube-proxy's
// IPVS mode reads from the iptables section), clusterCIDR,
// nodePortAddresses and configSyncPeriod. The other fields are accepted
// and kept so that --write-config-to reproduces them.
type KubeProxyConfiguration struct {
	APIVersion                  string                        `json:"apiVersion,omitempty"`
	Kind                        string                        `json:"kind,omitempty"`
	FeatureGates                map[string]bool               `json:"featureGates,omitempty"`
	ClientConnection            ClientConnectionConfiguration `json:"clientConnection"`
	Logging                     LoggingConfiguration          `json:"logging,omitempty"`
	HostnameOverride            string                        `json:"hostnameOverride"`
	BindAddress                 string                        `json:"bindAddress"`
	HealthzBindAddress          string                        `json:"healthzBindAddress"`
	MetricsBindAddress          string                        `json:"metricsBindAddress"`
	BindAddressHardFail         bool                          `json:"bindAddressHardFail"`
	EnableProfiling             bool                          `json:"enableProfiling"`
	ShowHiddenMetricsForVersion string                        `json:"showHiddenMetricsForVersion"`
	Mode                        string                        `json:"mode"`
	IPTables                    IPTablesConfiguration         `json:"iptables"`
	IPVS                        IPVSConfiguration             `json:"ipvs"`
	NFTables                    NFTablesConfiguration         `json:"nftables"`
	Winkernel                   WinkernelConfiguration        `json:"winkernel"`
	DetectLocalMode             string                        `json:"detectLocalMode"`
	DetectLocal                 DetectLocalConfiguration      `json:"detectLocal"`
	ClusterCIDR                 string                        `json:"clusterCIDR"`
	NodePortAddresses           []string                      `json:"nodePortAddresses"`
	OOMScoreAdj                 *int32                        `json:"oomScoreAdj"`
	Conntrack                   ConntrackConfiguration        `json:"conntrack"`
	ConfigSyncPeriod            metav1.Duration               `json:"configSyncPeriod"`
	PortRange                   string                        `json:"portRange"`
	WindowsRunAsService         bool                          `json:"windowsRunAsService,omitempty"`
}

// ClientConnectionConfiguration is component-base's client connection.
type ClientConnectionConfiguration struct {
	Kubeconfig         string  `json:"kubeconfig"`
	AcceptContentTypes string  `json:"acceptContentTypes"`
	ContentType        string  `json:"contentType"`
	QPS                float32 `json:"qps"`
	Burst              int32   `json:"burst"`
}

// LoggingConfiguration is component-base's logging configuration.
type LoggingConfiguration struct {
	Format         string               `json:"format,omitempty"`
	FlushFrequency FlushFrequency       `json:"flushFrequency"`
	Verbosity      uint32               `json:"verbosity"`
	VModule        []VModuleItem        `json:"vmodule,omitempty"`
	Options        LoggingFormatOptions `json:"options,omitempty"`
}

// VModuleItem is one file pattern's verbosity.
type VModuleItem struct {
	FilePattern string `json:"filePattern"`
	Verbosity   uint32 `json:"verbosity"`
}

// LoggingFormatOptions are the per-format logging options.
type LoggingFormatOptions struct {
	Text LoggingOutputOptions `json:"text,omitempty"`
	JSON LoggingOutputOptions `json:"json,omitempty"`
}

// LoggingOutputOptions is component-base's OutputRoutingOptions.
type LoggingOutputOptions struct {
	SplitStream    bool              `json:"splitStream,omitempty"`
	InfoBufferSize resource.Quantity `json:"infoBufferSize,omitempty"`
}

// FlushFrequency is component-base's TimeOrMetaDuration: a duration string
// ("5s") or integer nanoseconds, written back the way it was read.
type FlushFrequency struct {
	Duration          time.Duration
	SerializeAsString bool
}

// MarshalJSON writes a string or nanoseconds, as read.
func (f FlushFrequency) MarshalJSON() ([]byte, error) {
	if f.SerializeAsString {
		return json.Marshal(f.Duration.String())
	}
	return json.Marshal(int64(f.Duration))
}

// UnmarshalJSON reads "5s" or 5000000000.
func (f *FlushFrequency) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		*f = FlushFrequency{Duration: d, SerializeAsString: true}
		return nil
	}
	var n int64
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("invalid duration %s: want a string such as \"5s\" or integer nanoseconds", b)
	}
	*f = FlushFrequency{Duration: time.Duration(n)}
	return nil
}

// IPTablesConfiguration is the iptables section; kube-proxy's IPVS mode
// reads masqueradeAll and masqueradeBit from it.
type IPTablesConfiguration struct {
	MasqueradeBit      *int32          `json:"masqueradeBit"`
	MasqueradeAll      bool            `json:"masqueradeAll"`
	LocalhostNodePorts *bool           `json:"localhostNodePorts"`
	SyncPeriod         metav1.Duration `json:"syncPeriod"`
	MinSyncPeriod      metav1.Duration `json:"minSyncPeriod"`
}

// IPVSConfiguration is the ipvs section.
type IPVSConfiguration struct {
	SyncPeriod    metav1.Duration `json:"syncPeriod"`
	MinSyncPeriod metav1.Duration `json:"minSyncPeriod"`
	Scheduler     string          `json:"scheduler"`
	ExcludeCIDRs  []string        `json:"excludeCIDRs"`
	StrictARP     bool            `json:"strictARP"`
	TCPTimeout    metav1.Duration `json:"tcpTimeout"`
	TCPFinTimeout metav1.Duration `json:"tcpFinTimeout"`
	UDPTimeout    metav1.Duration `json:"udpTimeout"`
}

// NFTablesConfiguration is the nftables section (unused).
type NFTablesConfiguration struct {
	MasqueradeBit *int32          `json:"masqueradeBit"`
	MasqueradeAll bool            `json:"masqueradeAll"`
	SyncPeriod    metav1.Duration `json:"syncPeriod"`
	MinSyncPeriod metav1.Duration `json:"minSyncPeriod"`
}

// ConntrackConfiguration is the conntrack section (unused: we do not
// manage conntrack sysctls).
type ConntrackConfiguration struct {
	MaxPerCore            *int32           `json:"maxPerCore"`
	Min                   *int32           `json:"min"`
	TCPEstablishedTimeout *metav1.Duration `json:"tcpEstablishedTimeout"`
	TCPCloseWaitTimeout   *metav1.Duration `json:"tcpCloseWaitTimeout"`
	TCPBeLiberal          bool             `json:"tcpBeLiberal"`
	UDPTimeout            metav1.Duration  `json:"udpTimeout"`
	UDPStreamTimeout      metav1.Duration  `json:"udpStreamTimeout"`
}

// WinkernelConfiguration is the Windows section (unused).
type WinkernelConfiguration struct {
	NetworkName           string `json:"networkName"`
	SourceVip             string `json:"sourceVip"`
	EnableDSR             bool   `json:"enableDSR"`
	RootHnsEndpointName   string `json:"rootHnsEndpointName"`
	ForwardHealthCheckVip bool   `json:"forwardHealthCheckVip"`
}

// DetectLocalConfiguration is the detectLocal section (unused: only
// detectLocalMode ClusterCIDR is implemented).
type DetectLocalConfiguration struct {
	BridgeInterface     string `json:"bridgeInterface"`
	InterfaceNamePrefix string `json:"interfaceNamePrefix"`
}

// DefaultConfig is kube-proxy's v1alpha1 configuration with nothing set:
// what a file holding only apiVersion and kind means.
func DefaultConfig() KubeProxyConfiguration {
	c := KubeProxyConfiguration{APIVersion: ConfigAPIVersion, Kind: ConfigKind}
	c.setDefaults()
	return c
}

// setDefaults fills unset fields as kube-proxy's v1alpha1 defaulting does
// (pkg/proxy/apis/config/v1alpha1/defaults.go). Note that ipvs.minSyncPeriod
// has no default there: a file without it means 0.
func (c *KubeProxyConfiguration) setDefaults() {
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
	if c.Logging.FlushFrequency.Duration == 0 {
		c.Logging.FlushFrequency = FlushFrequency{Duration: 5 * time.Second, SerializeAsString: true}
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
