package app

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	logsapi "k8s.io/component-base/logs/api/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/apiconv"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// Validate checks the options and sets NodeName. It reports every
// problem at once, each naming its flag, or its file and field when the
// value came from --config.
func (o *Options) Validate() error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if o.HostnameOverride != "" && strings.TrimSpace(o.HostnameOverride) == "" {
		add("--hostname-override: must not be blank")
	}
	o.NodeName = strings.ToLower(strings.TrimSpace(o.Config.HostnameOverride))
	if o.NodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			add("--hostname-override not set and the host name is unknown: %w", err)
		}
		o.NodeName = strings.ToLower(strings.TrimSpace(h))
	}
	if o.Output != OutputJSON && o.Output != OutputText {
		add("--output must be json or text, got %q", o.Output)
	}
	if len(o.Objects) > 0 && !o.DryRun {
		add("--objects needs --dry-run")
	}
	errs = append(errs, o.validatePreflight()...)
	if o.CleanupTableOnly && !o.Cleanup {
		add("--cleanup-table-only needs --cleanup")
	}
	if o.CleanupWait < 0 {
		add("--cleanup-wait must not be negative (0: do not wait), got %s", o.CleanupWait)
	}
	if o.Cleanup && len(o.Objects) > 0 {
		add("--cleanup takes no --objects (--cleanup --dry-run lists what --cleanup would remove)")
	}
	switch name := o.IPVSInterface; {
	case name == "":
		add("%s must not be empty", o.origin("ipvs-interface"))
	case len(name) > 15 || name == "." || name == ".." || strings.ContainsAny(name, "/: \t\n"):
		add("%s %q is not a valid interface name", o.origin("ipvs-interface"), name)
	case name == "lo":
		// The writer refuses any existing link that is not a dummy
		// interface; lo always exists, so say it now.
		add("%s must name a dummy interface (ours, created if missing), not lo", o.origin("ipvs-interface"))
	}
	if o.IPVSGracefulPeriod < 0 {
		add("%s must not be negative, got %s", o.origin("ipvs-graceful-period"), o.IPVSGracefulPeriod)
	}
	if o.MaxVirtualServersPerService < 0 {
		add("%s must not be negative (0: no limit), got %d", o.origin("max-virtual-servers-per-service"), o.MaxVirtualServersPerService)
	}
	if o.MaxVirtualServersPerNode < 0 {
		add("%s must not be negative (0: no limit), got %d", o.origin("max-virtual-servers-per-node"), o.MaxVirtualServersPerNode)
	}
	for _, s := range o.NoTrackServices {
		if ns, name, ok := strings.Cut(s, "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			add("%s: %q is not namespace/name", o.origin("notrack-services"), s)
		}
	}
	if m := o.proxyModeFlag; m != "" && m != ModeIPVS {
		add("--proxy-mode %q: %s", m, onlyIPVS)
	}
	errs = append(errs, o.validateConfig()...)
	if len(errs) == 0 {
		if _, err := policy.New(o.engineConfig()); err != nil {
			errs = append(errs, err)
		}
	}
	for i, err := range errs {
		errs[i] = cutValues(err)
	}
	return errors.Join(errs...)
}

const onlyIPVS = `kube-ipvs-proxy only implements the ipvs proxy mode (set "ipvs" or leave it empty)`

// at names a setting in messages: its flag, or its file and field.
func (o *Options) at(flag, field string) string {
	if o.ConfigFile != "" {
		return o.ConfigFile + ": " + field
	}
	return "--" + flag
}

// validateConfig checks the effective configuration as kube-proxy's
// validation does, for the fields we use.
func (o *Options) validateConfig() []error {
	c := &o.Config
	var errs []error
	add := func(flag, field, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", o.at(flag, field), fmt.Sprintf(format, a...)))
	}
	if c.Mode != ModeIPVS && !(o.ConfigFile == "" && o.proxyModeFlag != "") {
		add("proxy-mode", "mode", "%q: %s", c.Mode, onlyIPVS)
	}
	if s := c.IPVS.Scheduler; s != "" && !policy.IsSchedulerName(s) {
		add("ipvs-scheduler", "ipvs.scheduler", "%q is not an IPVS scheduler name (1 to 15 lowercase letters, digits or _)", s)
	}
	sync, minSync := c.IPVS.SyncPeriod.Duration, c.IPVS.MinSyncPeriod.Duration
	if sync <= 0 {
		add("ipvs-sync-period", "ipvs.syncPeriod", "must be greater than 0, got %s", sync)
	}
	if minSync < 0 {
		add("ipvs-min-sync-period", "ipvs.minSyncPeriod", "must be greater than or equal to 0, got %s", minSync)
	} else if sync > 0 && minSync > sync {
		add("ipvs-min-sync-period", "ipvs.minSyncPeriod", "%s is greater than the sync period %s", minSync, sync)
	}
	if d := c.ConfigSyncPeriod.Duration; d <= 0 {
		add("config-sync-period", "configSyncPeriod", "must be greater than 0, got %s", d)
	}
	for i, s := range c.IPVS.ExcludeCIDRs {
		if _, err := netip.ParsePrefix(s); err != nil {
			add("ipvs-exclude-cidrs", "ipvs.excludeCIDRs["+strconv.Itoa(i)+"]", "invalid CIDR %q", s)
		}
	}
	if err := checkClusterCIDRs(splitList(c.ClusterCIDR)); err != nil {
		add("cluster-cidr", "clusterCIDR", "%v", err)
	}
	o.validateDetectLocal(add)
	for i, s := range c.NodePortAddresses {
		if s == "primary" {
			if len(c.NodePortAddresses) != 1 {
				add("nodeport-addresses", "nodePortAddresses", `"primary" cannot be combined with CIDRs`)
			}
		} else if _, err := netip.ParsePrefix(s); err != nil {
			add("nodeport-addresses", "nodePortAddresses["+strconv.Itoa(i)+"]", "invalid nodeport address %q: want a CIDR or \"primary\"", s)
		}
	}
	if a, err := netip.ParseAddr(c.BindAddress); err != nil || a.Zone() != "" {
		add("bind-address", "bindAddress", "%q is not an IP address", c.BindAddress)
	}
	if err := checkHostPort(c.HealthzBindAddress); err != nil {
		add("healthz-bind-address", "healthzBindAddress", "%v", err)
	}
	if err := checkHostPort(c.MetricsBindAddress); err != nil {
		add("metrics-bind-address", "metricsBindAddress", "%v", err)
	}
	for _, e := range gateErrors(c.FeatureGates) {
		add("feature-gates", "featureGates", "%s", e)
	}
	if a := c.OOMScoreAdj; a != nil && (*a < -1000 || *a > 1000) {
		add("oom-score-adj", "oomScoreAdj", "must be within the range [-1000, 1000], got %d", *a)
	}
	if b := c.IPTables.MasqueradeBit; b != nil && (*b < 0 || *b > 31) {
		add("iptables-masquerade-bit", "iptables.masqueradeBit", "must be within the range [0, 31], got %d", *b)
	}
	if c.ClientConnection.Burst < 0 {
		add("kube-api-burst", "clientConnection.burst", "must be greater than or equal to 0, got %d", c.ClientConnection.Burst)
	}
	validateTimeouts(c, add)
	validateLogging(c, add)
	if v := c.ShowHiddenMetricsForVersion; v != "" && v != showHiddenMetricsVersion {
		add("show-hidden-metrics-for-version", "showHiddenMetricsForVersion", "%q: must be omitted or have the value '%s'; only the previous minor version is allowed", v, showHiddenMetricsVersion)
	}
	if err := o.validateServiceProxyName(); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// validateServiceProxyName refuses a name no label value can hold: the
// label selector would refuse it, and the dry run would skip every
// Service as another proxy's.
func (o *Options) validateServiceProxyName() error {
	s := o.ServiceProxyName
	if s == "" {
		return nil
	}
	if msgs := validation.IsValidLabelValue(s); len(msgs) > 0 {
		return fmt.Errorf("%s: %q is not a valid label value (services are selected by the label %s): %s",
			o.origin("service-proxy-name"), s, apiconv.LabelServiceProxyName, strings.Join(msgs, "; "))
	}
	return nil
}

// showHiddenMetricsVersion is the one value kube-proxy v1.36 takes for
// showHiddenMetricsForVersion: the previous minor version.
const showHiddenMetricsVersion = "1.35"

// validateTimeouts refuses the negative conntrack and IPVS values
// kube-proxy's validation refuses: the conntrack package and the IPVS
// writer would read them as "leave as is" or write them to the kernel.
func validateTimeouts(c *KubeProxyConfiguration, add func(flag, field, format string, a ...any)) {
	for _, n := range []struct {
		flag, field string
		v           *int32
	}{
		{"conntrack-max-per-core", "conntrack.maxPerCore", c.Conntrack.MaxPerCore},
		{"conntrack-min", "conntrack.min", c.Conntrack.Min},
	} {
		if n.v != nil && *n.v < 0 {
			add(n.flag, n.field, "must be greater than or equal to 0, got %d", *n.v)
		}
	}
	duration := func(d *metav1.Duration) time.Duration {
		if d == nil {
			return 0
		}
		return d.Duration
	}
	for _, t := range []struct {
		flag, field string
		d           time.Duration
	}{
		{"ipvs-tcp-timeout", "ipvs.tcpTimeout", c.IPVS.TCPTimeout.Duration},
		{"ipvs-tcpfin-timeout", "ipvs.tcpFinTimeout", c.IPVS.TCPFinTimeout.Duration},
		{"ipvs-udp-timeout", "ipvs.udpTimeout", c.IPVS.UDPTimeout.Duration},
		{"conntrack-tcp-timeout-established", "conntrack.tcpEstablishedTimeout", duration(c.Conntrack.TCPEstablishedTimeout)},
		{"conntrack-tcp-timeout-close-wait", "conntrack.tcpCloseWaitTimeout", duration(c.Conntrack.TCPCloseWaitTimeout)},
		{"conntrack-udp-timeout", "conntrack.udpTimeout", c.Conntrack.UDPTimeout.Duration},
		{"conntrack-udp-timeout-stream", "conntrack.udpStreamTimeout", c.Conntrack.UDPStreamTimeout.Duration},
	} {
		if t.d < 0 {
			add(t.flag, t.field, "must be greater than or equal to 0, got %s", t.d)
		}
	}
}

// validateLogging refuses a negative flushFrequency, as component-base's
// logging validation, run by kube-proxy, does (it is not used here: logs
// are written unbuffered).
func validateLogging(c *KubeProxyConfiguration, add func(flag, field, format string, a ...any)) {
	if d := c.Logging.FlushFrequency.Duration.Duration; d < 0 {
		add("log-flush-frequency", "logging.flushFrequency", "must be greater than zero, got %s", d)
	}
}

// checkFileLogging refuses what component-base's logging validation, run
// by kube-proxy, refuses in the file's verbosity and vmodule, before
// they are given to klog (whose own message names no item): a vmodule
// item klog would read as another ("a=b" or "a,b" as a pattern), and
// levels klog cannot hold.
func checkFileLogging(name string, lc *logsapi.LoggingConfiguration) error {
	var errs []error
	if lc.Verbosity > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("%s: logging.verbosity: must be <= %d, got %d", name, math.MaxInt32, lc.Verbosity))
	}
	for i, item := range lc.VModule {
		field := "logging.vmodule[" + strconv.Itoa(i) + "]"
		switch {
		case item.FilePattern == "":
			errs = append(errs, fmt.Errorf("%s: %s: file pattern must not be empty", name, field))
		case strings.ContainsAny(item.FilePattern, "=,"):
			errs = append(errs, fmt.Errorf("%s: %s: file pattern %q must not contain equal sign or comma", name, field, item.FilePattern))
		}
		if item.Verbosity > math.MaxInt32 {
			errs = append(errs, fmt.Errorf("%s: %s: must be <= %d, got %d", name, field, math.MaxInt32, item.Verbosity))
		}
	}
	return errors.Join(errs...)
}

// checkClusterCIDRs accepts none, one CIDR, or a dual-stack pair.
func checkClusterCIDRs(cidrs []string) error {
	var v4, v6 int
	for _, s := range cidrs {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return fmt.Errorf("invalid cluster CIDR %q: %w", s, err)
		}
		if p.Addr().Is4() {
			v4++
		} else {
			v6++
		}
	}
	if v4 > 1 || v6 > 1 {
		return fmt.Errorf("invalid cluster CIDR list %q: want one CIDR or a dual-stack pair", strings.Join(cidrs, ","))
	}
	return nil
}

// checkHostPort accepts "" (server disabled) or IP:port.
func checkHostPort(s string) error {
	if s == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("%q is not IP:port", s)
	}
	if _, err := netip.ParseAddr(host); err != nil {
		return fmt.Errorf("%q: %q is not an IP address", s, host)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("%q: port must be 1-65535", s)
	}
	return nil
}

// splitList splits a comma-separated list, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, c := range strings.Split(s, ",") {
		if c = strings.TrimSpace(c); c != "" {
			out = append(out, c)
		}
	}
	return out
}
