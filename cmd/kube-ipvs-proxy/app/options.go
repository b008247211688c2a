package app

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
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

// Options is the parsed command line.
type Options struct {
	HostnameOverride  string
	DryRun            bool
	Objects           []string
	Output            string
	IPVSScheduler     string
	NodePortAddresses []string
	ServiceProxyName  string
	ClusterCIDR       string
	MasqueradeAll     bool
	NoTrackServices   []string
	Cleanup           bool
	IPVSInterface     string
}

// ParseFlags parses args (without the program name). Help goes to out.
func ParseFlags(args []string, out io.Writer) (*Options, error) {
	o := &Options{}
	fs := pflag.NewFlagSet("kube-ipvs-proxy", pflag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&o.HostnameOverride, "hostname-override", "", "the name of this node; defaults to the host name")
	fs.BoolVar(&o.DryRun, "dry-run", false, "compute and print the plan without touching the kernel")
	fs.StringArrayVar(&o.Objects, "objects", nil, "with --dry-run: a manifest file, or a directory of *.yaml, *.yml and *.json files; repeatable")
	fs.StringVar(&o.Output, "output", OutputJSON, "with --dry-run: plan format, json or text")
	fs.StringVar(&o.IPVSScheduler, "ipvs-scheduler", policy.DefaultScheduler, "default IPVS scheduler: "+strings.Join(policy.Schedulers, ", "))
	fs.StringSliceVar(&o.NodePortAddresses, "nodeport-addresses", nil, "CIDRs selecting the node addresses NodePorts listen on, or \"primary\"; default: every InternalIP and ExternalIP")
	fs.StringVar(&o.ServiceProxyName, "service-proxy-name", "", "proxy exactly the services labelled service.kubernetes.io/service-proxy-name=NAME")
	fs.StringVar(&o.ClusterCIDR, "cluster-cidr", "", "the pods' CIDR range, or a comma-separated dual-stack pair; ClusterIP traffic from outside it is masqueraded")
	fs.BoolVar(&o.MasqueradeAll, "masquerade-all", false, "masquerade all traffic sent to cluster IPs")
	fs.StringSliceVar(&o.NoTrackServices, "notrack-services", nil, "services (namespace/name, comma-separated) whose traffic is NOTRACK, as if annotated kube-ipvs-proxy.io/notrack")
	fs.BoolVar(&o.Cleanup, "cleanup", false, "remove our IPVS virtual servers, dummy interface and nftables table, then exit; nothing foreign is touched")
	fs.StringVar(&o.IPVSInterface, "ipvs-interface", "kube-ipvs0", "the dummy interface carrying service addresses")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	return o, nil
}

// Validate checks the options and fills defaults.
func (o *Options) Validate() error {
	var errs []error
	if o.HostnameOverride == "" {
		h, err := os.Hostname()
		if err != nil {
			errs = append(errs, fmt.Errorf("--hostname-override not set and the host name is unknown: %w", err))
		}
		o.HostnameOverride = strings.ToLower(strings.TrimSpace(h))
	}
	if o.Output != OutputJSON && o.Output != OutputText {
		errs = append(errs, fmt.Errorf("--output must be json or text, got %q", o.Output))
	}
	if !policy.IsScheduler(o.IPVSScheduler) {
		errs = append(errs, fmt.Errorf("--ipvs-scheduler: unknown scheduler %q", o.IPVSScheduler))
	}
	if len(o.Objects) > 0 && !o.DryRun {
		errs = append(errs, errors.New("--objects needs --dry-run"))
	}
	if o.DryRun && len(o.Objects) == 0 {
		errs = append(errs, errors.New("--dry-run needs --objects PATH (watching an API server comes with the control plane)"))
	}
	if o.Cleanup && o.DryRun {
		errs = append(errs, errors.New("--cleanup and --dry-run exclude each other"))
	}
	if !o.DryRun && !o.Cleanup {
		errs = append(errs, errors.New("the watch loop is not in this build yet: use --dry-run --objects, or --cleanup"))
	}
	if o.IPVSInterface == "" {
		errs = append(errs, errors.New("--ipvs-interface must not be empty"))
	}
	for _, s := range o.NoTrackServices {
		if ns, name, ok := strings.Cut(s, "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			errs = append(errs, fmt.Errorf("--notrack-services: %q is not namespace/name", s))
		}
	}
	if _, err := policy.New(o.engineConfig()); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (o *Options) clusterCIDRs() []string {
	var out []string
	for _, c := range strings.Split(o.ClusterCIDR, ",") {
		if c = strings.TrimSpace(c); c != "" {
			out = append(out, c)
		}
	}
	return out
}

func (o *Options) engineConfig() policy.Config {
	return policy.Config{
		NodeName:          o.HostnameOverride,
		Scheduler:         o.IPVSScheduler,
		NodePortAddresses: o.NodePortAddresses,
		ClusterCIDRs:      o.clusterCIDRs(),
		MasqueradeAll:     o.MasqueradeAll,
		NoTrackServices:   o.noTrackKeys(),
	}
}

// nftConfig is the nftables writer's configuration. Validate has checked
// the CIDRs.
func (o *Options) nftConfig() nft.Config {
	var cidrs []netip.Prefix
	for _, c := range o.clusterCIDRs() {
		if p, err := netip.ParsePrefix(c); err == nil {
			cidrs = append(cidrs, p.Masked())
		}
	}
	return nft.Config{ClusterCIDRs: cidrs}
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
