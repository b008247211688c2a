package app

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	logsapi "k8s.io/component-base/logs/api/v1"
)

// Exit codes.
const (
	ExitOK    = 0
	ExitError = 1 // a runtime failure
	ExitUsage = 2 // bad flags, or unreadable or malformed input
)

// Output formats of --dry-run.
const (
	OutputJSON = "json"
	OutputText = "text"
)

// DefaultMaxVirtualServersPerService is --max-virtual-servers-per-service's
// default: large enough for what kube-proxy serves in practice (a
// dual-stack Service of 600 UDP ports, 10 ports × 100 external IPs, a
// LoadBalancer of 600 ports with ingress IPs of both families), small
// enough that one Service's worst case costs a node megabytes, not
// gigabytes (README, the per-Service budget).
const DefaultMaxVirtualServersPerService = 10000

// Options is the parsed command line.
type Options struct {
	// Config is the effective kube-proxy configuration: the --config file
	// if given (kube-proxy's other flags are then ignored, as in
	// kube-proxy), otherwise kube-proxy's flags over kube-proxy's
	// defaults; then --hostname-override, -v and --vmodule on top, and an
	// empty mode made "ipvs". RunConfig derives what the run needs.
	Config KubeProxyConfiguration

	ConfigFile       string // --config
	WriteConfigTo    string // --write-config-to
	HostnameOverride string // --hostname-override as given; wins over the file
	Master           string // --master: overrides the kubeconfig's server, also with --config
	Cleanup          bool   // --cleanup
	CleanupTableOnly bool   // --cleanup-table-only
	InitOnly         bool   // --init-only
	Version          string // --version: "false", "true" or "raw"

	// CleanupWait is --cleanup-wait: how long --cleanup-table-only waits
	// for kube-proxy's rules; 0 removes the table at once.
	CleanupWait time.Duration

	// kube-ipvs-proxy's own flags. From ServiceProxyName on, each is
	// also a field of the --config file's KubeIPVSProxyConfiguration
	// document (ownconfig.go); the flag, if given, wins.
	DryRun           bool
	Objects          []string
	Preflight        bool // --preflight
	PreflightStrict  bool // --strict
	Output           string
	ServiceProxyName string
	NoTrackServices  []string
	// RefuseNodeAddressExternalIPs refuses external and load-balancer IPs
	// that are Nodes' addresses, where kube-proxy serves them unbound.
	RefuseNodeAddressExternalIPs bool
	// MaxVirtualServersPerService is the per-Service budget; 0: no limit.
	// Its default, DefaultMaxVirtualServersPerService, is README's
	// (the per-Service budget).
	MaxVirtualServersPerService int
	// MaxVirtualServersPerNode is the node-wide ceiling; 0: no limit.
	MaxVirtualServersPerNode int
	IPVSInterface            string
	IPVSGracefulPeriod       time.Duration

	// NodeName is this node's name: --hostname-override, else the
	// file's hostnameOverride, else the host name; trimmed and lower
	// case. Validate sets it.
	NodeName string

	// proxyModeFlag is --proxy-mode as given, checked even with --config.
	proxyModeFlag string
	// ownFromFile maps each own flag whose value came from the --config
	// file to "file: field", for messages.
	ownFromFile map[string]string
}

// ParseFlags parses args (without the program name) as kube-proxy does:
// kube-proxy's flags, then the --config file if given. Notices about
// ignored flags, warnings about the file, and help go to out.
func ParseFlags(args []string, out io.Writer) (*Options, error) {
	o := &Options{}
	s := &flagState{cfg: newFlagConfig(), healthzPort: defaultHealthzPort, metricsPort: defaultMetricsPort}
	fs := newFlagSet(o, s, out)
	if len(args) == 1 && args[0] == "help" {
		fs.Usage()
		return nil, pflag.ErrHelp
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if err := o.complete(fs, s, out); err != nil {
		return nil, err
	}
	return o, nil
}

func newFlagSet(o *Options, s *flagState, out io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet("kube-ipvs-proxy", pflag.ContinueOnError)
	fs.SetOutput(out)
	fs.SetNormalizeFunc(wordSepNormalize)
	o.addFlags(fs)
	s.register(fs)
	fs.Usage = func() {
		fmt.Fprint(out, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// synopsis opens --help: the modes, before the flags that tune them.
const synopsis = `kube-ipvs-proxy: a node proxy on IPVS and nftables, a drop-in for kube-proxy's IPVS mode.

Usage:
  kube-ipvs-proxy [--config FILE] [flags]         the proxy (kubeadm's DaemonSet runs it so)
  kube-ipvs-proxy --dry-run --objects PATH ...    the plan of a node for manifests, no cluster or kernel
  kube-ipvs-proxy --preflight --kubeconfig K ...  what a live cluster's node would be served differently from kube-proxy
  kube-ipvs-proxy --init-only [--config FILE]     kube-proxy's privileged initialisation, then exit
  kube-ipvs-proxy --cleanup [--dry-run]           remove our state (list it with --dry-run), then exit
  kube-ipvs-proxy --cleanup --cleanup-table-only  after a rollback: our nftables table only
  kube-ipvs-proxy --write-config-to FILE          the effective KubeProxyConfiguration
  kube-ipvs-proxy --version                       the version

Flags:
`

func (o *Options) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.ConfigFile, "config", "", "Path to a KubeProxyConfiguration file (kubeproxy.config.k8s.io/v1alpha1, YAML or JSON). As in kube-proxy, the file then replaces every kube-proxy flag except --hostname-override, --master, --cleanup, --write-config-to, --init-only, -v and --vmodule; kube-ipvs-proxy's own flags still apply.")
	fs.StringVar(&o.WriteConfigTo, "write-config-to", "", "Write the effective configuration to this file as KubeProxyConfiguration YAML, and exit.")
	fs.StringVar(&o.HostnameOverride, "hostname-override", "", "The name of this node, winning over the file's hostnameOverride; defaults to the host name.")
	fs.StringVar(&o.Master, "master", "", "The address of the Kubernetes API server (overrides any value in kubeconfig).")
	fs.BoolVar(&o.Cleanup, "cleanup", false, "Remove our IPVS virtual servers, dummy interface and nftables table, list them on stderr, then exit; nothing foreign is touched. With --dry-run, list what it would remove and remove nothing.")
	fs.BoolVar(&o.CleanupTableOnly, "cleanup-table-only", false, "With --cleanup, remove only our nftables table: after a rollback to kube-proxy, which has taken the IPVS virtual servers and kube-ipvs0 back.")
	fs.DurationVar(&o.CleanupWait, "cleanup-wait", 5*time.Minute, "With --cleanup-table-only, how long to wait for kube-proxy's rules (iptables-nft, iptables-legacy or its nftables mode) before removing our table; past it the table stays, a Node Event says so, and the exit is 0. 0 removes the table at once.")
	fs.BoolVar(&o.InitOnly, "init-only", false, "Do the privileged initialisation (check IPVS and the scheduler; set the IPVS and conntrack sysctls and the IPVS timeouts) and exit, as kube-proxy's, for a privileged init container.")
	fs.StringVar(&o.Version, "version", "false", "Print version information and exit.")
	fs.Lookup("version").NoOptDefVal = "true"

	fs.BoolVar(&o.DryRun, "dry-run", false, "Compute and print the plan without touching the kernel.")
	fs.StringArrayVar(&o.Objects, "objects", nil, "With --dry-run: a manifest file, or a directory of *.yaml, *.yml and *.json files; repeatable.")
	fs.BoolVar(&o.Preflight, "preflight", false, "List the cluster's Services, EndpointSlices and Nodes once, through --kubeconfig (which here wins over the --config file's clientConnection.kubeconfig) or in-cluster, and print what this node (--hostname-override) would serve differently from kube-proxy, and why; on the node, check its kernel too. Exits 1 on anything kube-proxy serves that would not be served.")
	fs.BoolVar(&o.PreflightStrict, "strict", false, "With --preflight: exit 1 on warnings too, for CI.")
	fs.StringVar(&o.Output, "output", OutputJSON, "With --dry-run: plan format, json or text.")
	fs.StringVar(&o.ServiceProxyName, "service-proxy-name", "", "Proxy exactly the services labelled service.kubernetes.io/service-proxy-name=NAME.")
	fs.StringSliceVar(&o.NoTrackServices, "notrack-services", nil, "Services (namespace/name, comma-separated) whose traffic is NOTRACK, as if annotated kube-ipvs-proxy.io/notrack.")
	fs.BoolVar(&o.RefuseNodeAddressExternalIPs, "refuse-node-address-external-ips", false, "Serve no external or load-balancer IP that is a Node's InternalIP or ExternalIP. By default, as kube-proxy's IPVS mode, it is served on the Service's ports without being bound on the dummy interface, with a warning Event.")
	fs.IntVar(&o.MaxVirtualServersPerService, "max-virtual-servers-per-service", DefaultMaxVirtualServersPerService, "The most IPVS virtual servers one Service may have on a node: its ports times its ClusterIPs, external and load-balancer IPs (NodePorts are not counted). A Service asking for more is not served, with a TooManyVirtualServers Event; 0 means no limit.")
	fs.IntVar(&o.MaxVirtualServersPerNode, "max-virtual-servers-per-node", 0, "The most IPVS virtual servers of all Services on a node, NodePorts included. Services are admitted oldest first while they fit; one that does not is not served, with a TooManyVirtualServers Event. 0 (the default) means no limit.")
	fs.StringVar(&o.IPVSInterface, "ipvs-interface", "kube-ipvs0", "The dummy interface carrying service addresses: kube-ipvs0, or another name for a dummy interface this proxy creates. An existing link this proxy did not create (another agent's dummy interface, say) is refused, its addresses left alone, and --cleanup never deletes it.")
	fs.DurationVar(&o.IPVSGracefulPeriod, "ipvs-graceful-period", 15*time.Minute, "How long a removed TCP destination may drain at weight 0 before it is deleted.")
}

// complete makes Config the effective configuration, as kube-proxy's
// Options.Complete: the file replaces the flags' configuration, except
// that -v and --vmodule given on the command line win, and a non-empty
// --hostname-override wins.
func (o *Options) complete(fs *pflag.FlagSet, s *flagState, out io.Writer) error {
	if fs.Changed("proxy-mode") {
		o.proxyModeFlag = string(s.cfg.Mode)
	}
	kubeconfig := o.preflightKubeconfig(fs, s)
	for _, n := range s.notices(fs, o.ConfigFile != "") {
		if kubeconfig == "" || !strings.HasPrefix(n, "ignoring --kubeconfig:") {
			fmt.Fprintln(out, n)
		}
	}
	if o.ConfigFile == "" {
		o.Config = s.cfg
		o.Config.HealthzBindAddress = addressFromPort(o.Config.HealthzBindAddress, s.healthzPort)
		o.Config.MetricsBindAddress = addressFromPort(o.Config.MetricsBindAddress, s.metricsPort)
	} else {
		cfg, own, warnings, err := loadConfigFile(o.ConfigFile)
		for _, w := range warnings {
			fmt.Fprintln(out, "warning: "+w)
		}
		if err != nil {
			return err
		}
		o.Config = cfg
		if kubeconfig != "" {
			o.Config.ClientConnection.Kubeconfig = kubeconfig
		}
		if err := o.applyOwn(own, fs); err != nil {
			return err
		}
		for _, w := range o.unsupportedValues() {
			fmt.Fprintln(out, "warning: "+w)
		}
	}
	if err := o.completeLogging(fs, s); err != nil {
		return err
	}
	if h := strings.ToLower(strings.TrimSpace(o.HostnameOverride)); h != "" {
		o.Config.HostnameOverride = h
	}
	if o.Config.Mode == "" {
		o.Config.Mode = ModeIPVS
	}
	for _, w := range gateWarnings(o.Config.FeatureGates) {
		fmt.Fprintln(out, "warning: "+w)
	}
	return nil
}

// unsupportedValues warns about file values that change kube-proxy's
// behaviour in ways we do not implement.
func (o *Options) unsupportedValues() []string {
	var out []string
	if f := o.Config.Logging.Format; f != "text" && f != "json" {
		out = append(out, fmt.Sprintf("%s: logging.format: %q is not implemented, logging as text; ignored", o.ConfigFile, f))
	}
	return out
}

// completeLogging merges -v and --vmodule with the configuration: given
// on the command line they win (vmodule entries go first); otherwise the
// file's values are applied to klog.
func (o *Options) completeLogging(fs *pflag.FlagSet, s *flagState) error {
	lc := &o.Config.Logging
	flagV, flagVModule := fs.Changed("v"), fs.Changed("vmodule")
	if o.ConfigFile != "" {
		if err := checkFileLogging(o.ConfigFile, lc); err != nil {
			return err
		}
	}
	if o.ConfigFile == "" || flagV {
		v, err := strconv.ParseUint(s.klog.Lookup("v").Value.String(), 10, 32)
		if err != nil {
			return fmt.Errorf("-v: %w", err)
		}
		lc.Verbosity = logsapi.VerbosityLevel(v)
	} else if err := s.klog.Set("v", strconv.FormatUint(uint64(lc.Verbosity), 10)); err != nil {
		return fmt.Errorf("%s: logging.verbosity: %w", o.ConfigFile, err)
	}
	flagItems, err := parseVModule(s.klog.Lookup("vmodule").Value.String())
	if err != nil {
		return fmt.Errorf("--vmodule: %w", err)
	}
	switch {
	case o.ConfigFile == "":
		lc.VModule = flagItems
	case flagVModule:
		lc.VModule = append(flagItems, lc.VModule...)
	case len(lc.VModule) > 0:
		if err := s.klog.Set("vmodule", formatVModule(lc.VModule)); err != nil {
			return fmt.Errorf("%s: logging.vmodule: %w", o.ConfigFile, err)
		}
	}
	return nil
}

func parseVModule(s string) ([]VModuleItem, error) {
	var items []VModuleItem
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		pattern, level, ok := strings.Cut(part, "=")
		v, err := strconv.ParseUint(level, 10, 32)
		if !ok || pattern == "" || err != nil {
			return nil, fmt.Errorf("%q is not pattern=N", part)
		}
		items = append(items, VModuleItem{FilePattern: pattern, Verbosity: logsapi.VerbosityLevel(v)})
	}
	return items, nil
}

func formatVModule(items []VModuleItem) string {
	parts := make([]string, len(items))
	for i, it := range items {
		parts[i] = it.FilePattern + "=" + strconv.FormatUint(uint64(it.Verbosity), 10)
	}
	return strings.Join(parts, ",")
}

// addressFromPort applies a deprecated --healthz-port or --metrics-port:
// 0 disables the server, otherwise the port is added to a bare IP.
func addressFromPort(addr string, port int32) string {
	if port == 0 {
		return ""
	}
	return appendPortIfNeeded(addr, int(port))
}
