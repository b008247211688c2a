package app

import (
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// Reasons for accepting a kube-proxy flag and ignoring it.
const (
	notIPVS      = "not used in ipvs mode"
	windowsOnly  = "Windows only"
	removed      = "removed from kube-proxy"
	notSupported = "not supported by kube-ipvs-proxy"
	fileWins     = "--config is given, and as in kube-proxy the file wins"
)

// kubeProxyFlag is a kube-proxy flag bound to a field of the flag
// configuration (or to a throwaway variable).
type kubeProxyFlag struct {
	name  string
	ptr   any // *string, *bool, *int32, *float32, *time.Duration, *[]string or pflag.Value
	usage string
	// ignored, when set, is why the flag is accepted but has no effect;
	// supported, when set, tells the values that are nonetheless honoured.
	ignored   string
	supported func(value string) bool
	// inConfig: the value lives in KubeProxyConfiguration, so --config
	// replaces it.
	inConfig bool
}

// flagState is what parsing needs besides Options: the flags' own
// configuration, the deprecated port flags and the klog flags.
type flagState struct {
	cfg                      KubeProxyConfiguration
	healthzPort, metricsPort int32
	table                    []kubeProxyFlag
	klog                     *flag.FlagSet
}

// newFlagConfig is the configuration kube-proxy's flags start from:
// kube-proxy's defaults, with --ipvs-min-sync-period 1s (kube-proxy's flag
// default, which a file without ipvs.minSyncPeriod does not have).
func newFlagConfig() KubeProxyConfiguration {
	c := DefaultConfig()
	c.IPVS.MinSyncPeriod.Duration = time.Second
	return c
}

// kubeProxyFlags lists kube-proxy v1.36's Linux flags (and its Windows
// ones), bound to s.cfg.
func (s *flagState) kubeProxyFlags() []kubeProxyFlag {
	c := &s.cfg
	var throwaway struct {
		bootID, machineID, infoText, infoJSON, rootHNS, portRange string
		udpTimeout                                                time.Duration
		dsr, fwdVIP                                               bool
	}
	throwaway.bootID, throwaway.machineID = "/proc/sys/kernel/random/boot_id", "/etc/machine-id,/var/lib/dbus/machine-id"
	throwaway.rootHNS = "cbr0"
	used := func(name string, ptr any, usage string) kubeProxyFlag {
		return kubeProxyFlag{name: name, ptr: ptr, usage: usage + " Ignored if --config is given.", inConfig: true}
	}
	ign := func(name string, ptr any, reason string, inConfig bool) kubeProxyFlag {
		return kubeProxyFlag{name: name, ptr: ptr, usage: "Accepted for kube-proxy compatibility and ignored: " + reason + ".", ignored: reason, inConfig: inConfig}
	}
	isLogFormat := func(v string) bool { return v == "text" || v == "json" }
	return []kubeProxyFlag{
		used("kubeconfig", &c.ClientConnection.Kubeconfig, "Path to a kubeconfig file with authorization information (--master overrides its server)."),
		used("kube-api-content-type", &c.ClientConnection.ContentType, "Content type of requests sent to the apiserver."),
		used("kube-api-burst", &c.ClientConnection.Burst, "Burst to use while talking with the apiserver."),
		used("kube-api-qps", &c.ClientConnection.QPS, "QPS to use while talking with the apiserver."),
		used("bind-address", &c.BindAddress, "Overrides the node's primary IP (kube-proxy's historical name; no socket is bound to it)."),
		used("healthz-bind-address", &c.HealthzBindAddress, "IP address and port of the health check server; empty disables it."),
		used("metrics-bind-address", &c.MetricsBindAddress, "IP address and port of the metrics server (0.0.0.0:10249 or [::]:10249 for all interfaces); empty disables it."),
		used("bind-address-hard-fail", &c.BindAddressHardFail, "Treat failure to bind the health or metrics port as fatal."),
		{name: "proxy-mode", ptr: (*string)(&c.Mode), inConfig: true,
			usage: "Proxy mode: only \"ipvs\" (or empty, meaning ipvs) is accepted; any other value exits 2, also with --config."},
		used("iptables-masquerade-bit", c.IPTables.MasqueradeBit, "The fwmark bit marking packets to masquerade, 0-31 (kube-proxy's IPVS mode uses it too)."),
		used("masquerade-all", &c.IPTables.MasqueradeAll, "Masquerade all traffic sent to cluster IPs."),
		used("ipvs-sync-period", &c.IPVS.SyncPeriod.Duration, "How often IPVS and nftables are fully resynchronised (e.g. '5s', '1m'); must be greater than 0."),
		used("ipvs-min-sync-period", &c.IPVS.MinSyncPeriod.Duration, "Minimum interval between syncs; 0 syncs on every Service or EndpointSlice change."),
		used("ipvs-scheduler", &c.IPVS.Scheduler, "Default IPVS scheduler, empty meaning rr: any the kernel has (e.g. "+strings.Join(policy.Schedulers, ", ")+", twos, none), checked at start."),
		used("ipvs-exclude-cidrs", &c.IPVS.ExcludeCIDRs, "Comma-separated CIDRs whose IPVS virtual servers are never touched."),
		used("ipvs-strict-arp", &c.IPVS.StrictARP, "Enable strict ARP (arp_ignore=1, arp_announce=2)."),
		used("ipvs-tcp-timeout", &c.IPVS.TCPTimeout.Duration, "IPVS timeout of idle TCP connections; 0 leaves the kernel's value."),
		used("ipvs-tcpfin-timeout", &c.IPVS.TCPFinTimeout.Duration, "IPVS timeout of TCP connections after a FIN; 0 leaves the kernel's value."),
		used("ipvs-udp-timeout", &c.IPVS.UDPTimeout.Duration, "IPVS timeout of UDP packets; 0 leaves the kernel's value."),
		used("cluster-cidr", &c.ClusterCIDR, "The pods' CIDR range, or a comma-separated dual-stack pair; ClusterIP traffic from outside it is masqueraded."),
		used("nodeport-addresses", &c.NodePortAddresses, "CIDRs selecting the node IPs NodePorts accept connections on, or \"primary\" (the Node's primary IP per family); "+
			"default: every address of the host's interfaces but kube-ipvs0's, loopback and IPv6 link-local ones (--dry-run, without a host: the Node's InternalIP and ExternalIP addresses)."),
		used("profiling", &c.EnableProfiling, "Serve Go's profiles (/debug/pprof/) and the log verbosity (/debug/flags/v) on the metrics server, as kube-proxy."),
		used("config-sync-period", &c.ConfigSyncPeriod.Duration, "How often the informers resync from the apiserver; must be greater than 0."),
		used("feature-gates", &featureGatesValue{m: &c.FeatureGates}, "key=bool pairs of kube-proxy feature gates, client-go's among them (e.g. WatchListClient=false); a gate kube-proxy acts on and we do not implement refuses the start, unknown gates are warned about and ignored."),
		used("healthz-port", &s.healthzPort, "Deprecated: port of the health check server, 0 to disable; use --healthz-bind-address."),
		used("metrics-port", &s.metricsPort, "Deprecated: port of the metrics server, 0 to disable; use --metrics-bind-address."),

		ign("iptables-sync-period", &c.IPTables.SyncPeriod.Duration, notIPVS, true),
		ign("iptables-min-sync-period", &c.IPTables.MinSyncPeriod.Duration, notIPVS, true),
		ign("iptables-localhost-nodeports", c.IPTables.LocalhostNodePorts, notIPVS, true),
		used("detect-local-mode", (*string)(&c.DetectLocalMode), "Mode to use to detect local traffic (traffic from this node's pods): "+strings.Join(localModes, ", ")+"; empty means ClusterCIDR."),
		used("pod-bridge-interface", &c.DetectLocal.BridgeInterface, "A bridge interface name: with --detect-local-mode BridgeInterface, traffic coming in on it is local."),
		used("pod-interface-name-prefix", &c.DetectLocal.InterfaceNamePrefix, "An interface name prefix: with --detect-local-mode InterfaceNamePrefix, traffic coming in on an interface whose name starts with it is local."),
		used("conntrack-max-per-core", c.Conntrack.MaxPerCore, "Maximum number of NAT connections to track per CPU core (0 to leave the limit as-is and ignore conntrack-min)."),
		used("conntrack-min", c.Conntrack.Min, "Minimum number of conntrack entries to allocate, regardless of conntrack-max-per-core (set conntrack-max-per-core=0 to leave the limit as-is)."),
		used("conntrack-tcp-timeout-established", &c.Conntrack.TCPEstablishedTimeout.Duration, "Idle timeout for established TCP connections (0 to leave as-is)."),
		used("conntrack-tcp-timeout-close-wait", &c.Conntrack.TCPCloseWaitTimeout.Duration, "NAT timeout for TCP connections in the CLOSE_WAIT state (0 to leave as-is)."),
		used("conntrack-tcp-be-liberal", &c.Conntrack.TCPBeLiberal, "Enable liberal mode for tracking TCP packets by setting nf_conntrack_tcp_be_liberal to 1."),
		used("conntrack-udp-timeout", &c.Conntrack.UDPTimeout.Duration, "Idle timeout for UNREPLIED UDP connections (0 to leave as-is)."),
		used("conntrack-udp-timeout-stream", &c.Conntrack.UDPStreamTimeout.Duration, "Idle timeout for ASSURED UDP connections (0 to leave as-is)."),
		used("oom-score-adj", c.OOMScoreAdj, "The oom_score_adj value for the proxy process, within [-1000, 1000], written to /proc/self/oom_score_adj at startup."),
		ign("show-hidden-metrics-for-version", &c.ShowHiddenMetricsForVersion, "no metrics are hidden", true),
		// Used for text and json; only another format is ignored, so the
		// help says what the flag does before what it ignores.
		withSupported(kubeProxyFlag{name: "logging-format", ptr: &c.Logging.Format, inConfig: true,
			usage:   "Log format: text or json, as kube-proxy's; another format is accepted for kube-proxy compatibility and ignored (logs are text).",
			ignored: "only text and json logging are implemented"}, isLogFormat),
		ign("log-flush-frequency", &c.Logging.FlushFrequency.Duration.Duration, "logs are written unbuffered", true),
		ign("log-text-split-stream", &c.Logging.Options.Text.SplitStream, notSupported, true),
		ign("log-text-info-buffer-size", &throwaway.infoText, notSupported, false),
		ign("log-json-split-stream", &c.Logging.Options.JSON.SplitStream, notSupported, true),
		ign("log-json-info-buffer-size", &throwaway.infoJSON, notSupported, false),
		ign("boot-id-file", &throwaway.bootID, "not used by kube-ipvs-proxy", false),
		ign("machine-id-file", &throwaway.machineID, "not used by kube-ipvs-proxy", false),
		ign("windows-service", &c.WindowsRunAsService, windowsOnly, true),
		ign("source-vip", &c.Winkernel.SourceVip, windowsOnly, true),
		ign("network-name", &c.Winkernel.NetworkName, windowsOnly, true),
		ign("enable-dsr", &throwaway.dsr, windowsOnly, false),
		ign("root-hnsendpoint-name", &throwaway.rootHNS, windowsOnly, false),
		ign("forward-healthcheck-vip", &throwaway.fwdVIP, windowsOnly, false),
		ign("proxy-port-range", &throwaway.portRange, removed, false),
		ign("udp-timeout", &throwaway.udpTimeout, removed, false),
	}
}

func withSupported(f kubeProxyFlag, supported func(string) bool) kubeProxyFlag {
	f.supported = supported
	return f
}

// register adds the table's flags to fs, each with its current value as
// default.
func (s *flagState) register(fs *pflag.FlagSet) {
	s.table = s.kubeProxyFlags()
	for _, f := range s.table {
		switch p := f.ptr.(type) {
		case *string:
			fs.StringVar(p, f.name, *p, f.usage)
		case *bool:
			fs.BoolVar(p, f.name, *p, f.usage)
		case *int32:
			fs.Int32Var(p, f.name, *p, f.usage)
		case *float32:
			fs.Float32Var(p, f.name, *p, f.usage)
		case *time.Duration:
			fs.DurationVar(p, f.name, *p, f.usage)
		case *[]string:
			fs.StringSliceVar(p, f.name, *p, f.usage)
		case pflag.Value:
			fs.Var(p, f.name, f.usage)
		default:
			panic(fmt.Sprintf("flag %s: unsupported type %T", f.name, f.ptr))
		}
	}
	_ = fs.MarkDeprecated("healthz-port", "use --healthz-bind-address instead.")
	_ = fs.MarkDeprecated("metrics-port", "use --metrics-bind-address instead.")
	s.klog = klogFlags()
	fs.AddGoFlagSet(s.klog)
}

// notices returns one "ignoring --flag: why" line per kube-proxy flag
// given on the command line that has no effect, in flag name order.
func (s *flagState) notices(fs *pflag.FlagSet, withConfig bool) []string {
	var out []string
	for _, f := range s.table {
		if !fs.Changed(f.name) {
			continue
		}
		reason := f.ignored
		if reason != "" && f.supported != nil && f.supported(fs.Lookup(f.name).Value.String()) {
			reason = ""
		}
		if reason == "" && withConfig && f.inConfig {
			reason = fileWins
		}
		if reason != "" {
			out = append(out, fmt.Sprintf("ignoring --%s: %s", f.name, reason))
		}
	}
	slices.Sort(out)
	return out
}

// klogFlags are kube-proxy's klog flags, -v and --vmodule (as
// component-base registers them), bound to klog's global state.
func klogFlags() *flag.FlagSet {
	var all flag.FlagSet
	klog.InitFlags(&all)
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	for _, name := range []string{"v", "vmodule"} {
		f := all.Lookup(name)
		fs.Var(f.Value, f.Name, f.Usage)
	}
	return fs
}

// wordSepNormalize accepts foo_bar for --foo-bar, as kube-proxy does.
func wordSepNormalize(_ *pflag.FlagSet, name string) pflag.NormalizedName {
	return pflag.NormalizedName(strings.ReplaceAll(name, "_", "-"))
}

// featureGatesValue is --feature-gates: comma-separated key=bool pairs; a
// repeated flag adds to the first.
type featureGatesValue struct {
	m   *map[string]bool
	set bool
}

func (v *featureGatesValue) String() string {
	var pairs []string
	for k, b := range *v.m {
		pairs = append(pairs, k+"="+strconv.FormatBool(b))
	}
	slices.Sort(pairs)
	return strings.Join(pairs, ",")
}

func (v *featureGatesValue) Set(s string) error {
	if !v.set {
		*v.m = map[string]bool{}
		v.set = true
	}
	for _, pair := range strings.Split(s, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, val, ok := strings.Cut(pair, "=")
		if !ok {
			return fmt.Errorf("malformed pair %q, want key=bool", pair)
		}
		b, err := strconv.ParseBool(strings.TrimSpace(val))
		if err != nil {
			return fmt.Errorf("invalid value of %s: %q is not a bool", k, val)
		}
		(*v.m)[strings.TrimSpace(k)] = b
	}
	return nil
}

func (v *featureGatesValue) Type() string { return "mapStringBool" }
