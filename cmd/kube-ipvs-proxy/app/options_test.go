package app

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"
)

// parse runs ParseFlags and returns the options, what went to stderr, and
// the error.
func parse(t *testing.T, args ...string) (*Options, string, error) {
	t.Helper()
	t.Cleanup(resetKlog)
	var out bytes.Buffer
	o, err := ParseFlags(args, &out)
	return o, out.String(), err
}

// mustParse parses and validates, failing the test on an error.
func mustParse(t *testing.T, args ...string) (*Options, string) {
	t.Helper()
	o, out, err := parse(t, args...)
	if err == nil {
		err = o.Validate()
	}
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return o, out
}

// cmpOpts compare netip values and quantities by value.
var cmpOpts = cmp.Options{
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
	cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 }),
}

// resetKlog undoes -v and --vmodule, which set klog's global state.
func resetKlog() {
	var fs flag.FlagSet
	klog.InitFlags(&fs)
	_ = fs.Set("v", "0")
	_ = fs.Set("vmodule", "")
}

// kubeProxyV136Flags are the flags of kube-proxy v1.36 on Linux
// (cmd/kube-proxy/app/options.go AddFlags, logsapi.AddFlags, the
// --boot-id-file and --machine-id-file Go flags, and --version), plus its
// Windows-only flags.
var kubeProxyV136Flags = []string{
	"config", "write-config-to", "cleanup", "feature-gates", "kubeconfig", "master",
	"kube-api-content-type", "kube-api-burst", "kube-api-qps", "hostname-override", "bind-address",
	"healthz-bind-address", "metrics-bind-address", "bind-address-hard-fail", "profiling",
	"show-hidden-metrics-for-version", "init-only", "proxy-mode", "iptables-masquerade-bit",
	"masquerade-all", "iptables-localhost-nodeports", "iptables-sync-period", "iptables-min-sync-period",
	"ipvs-sync-period", "ipvs-min-sync-period", "ipvs-scheduler", "ipvs-exclude-cidrs", "ipvs-strict-arp",
	"ipvs-tcp-timeout", "ipvs-tcpfin-timeout", "ipvs-udp-timeout", "detect-local-mode",
	"pod-bridge-interface", "pod-interface-name-prefix", "cluster-cidr", "nodeport-addresses",
	"oom-score-adj", "conntrack-max-per-core", "conntrack-min", "conntrack-tcp-timeout-established",
	"conntrack-tcp-timeout-close-wait", "conntrack-tcp-be-liberal", "conntrack-udp-timeout",
	"conntrack-udp-timeout-stream", "config-sync-period", "healthz-port", "metrics-port",
	"logging-format", "log-flush-frequency", "v", "vmodule", "log-text-split-stream",
	"log-text-info-buffer-size", "log-json-split-stream", "log-json-info-buffer-size",
	"boot-id-file", "machine-id-file", "version",
	"windows-service", "source-vip", "network-name", "enable-dsr", "root-hnsendpoint-name", "forward-healthcheck-vip",
}

func TestEveryKubeProxyFlagIsAccepted(t *testing.T) {
	s := &flagState{cfg: newFlagConfig()}
	o := &Options{}
	fs := newFlagSet(o, s, io.Discard)
	for _, name := range kubeProxyV136Flags {
		if fs.Lookup(name) == nil {
			t.Errorf("kube-proxy flag --%s is not accepted", name)
		}
	}
}

// TestUsedFlags: every kube-proxy flag we honour parses its kube-proxy
// value syntax and lands where the run mode reads it.
func TestUsedFlags(t *testing.T) {
	tests := []struct {
		args []string
		got  func(o *Options, rc RunConfig) any
		want any
	}{
		{[]string{"--kubeconfig", "/k.conf"}, func(_ *Options, rc RunConfig) any { return rc.Client.Kubeconfig }, "/k.conf"},
		{[]string{"--master", "https://10.0.0.1:6443"}, func(_ *Options, rc RunConfig) any { return rc.Client.Master }, "https://10.0.0.1:6443"},
		{[]string{"--kube-api-qps", "20.5"}, func(_ *Options, rc RunConfig) any { return rc.Client.QPS }, float32(20.5)},
		{[]string{"--kube-api-burst=40"}, func(_ *Options, rc RunConfig) any { return rc.Client.Burst }, 40},
		{[]string{"--kube-api-content-type", "application/json"}, func(_ *Options, rc RunConfig) any { return rc.Client.ContentType }, "application/json"},
		{[]string{"--hostname-override", " Node-A "}, func(_ *Options, rc RunConfig) any { return rc.NodeName }, "node-a"},
		{[]string{"--bind-address", "10.1.2.3"}, func(_ *Options, rc RunConfig) any { return rc.BindAddress }, netip.MustParseAddr("10.1.2.3")},
		{[]string{"--bind-address-hard-fail"}, func(_ *Options, rc RunConfig) any { return rc.BindAddressHardFail }, true},
		{[]string{"--healthz-bind-address", "10.1.2.3"}, func(_ *Options, rc RunConfig) any { return rc.HealthzBindAddress }, "10.1.2.3:10256"},
		{[]string{"--healthz-bind-address="}, func(_ *Options, rc RunConfig) any { return rc.HealthzBindAddress }, ""},
		{[]string{"--metrics-bind-address", "[::]:9000"}, func(_ *Options, rc RunConfig) any { return rc.MetricsBindAddress }, "[::]:9000"},
		{[]string{"--healthz-port", "0"}, func(_ *Options, rc RunConfig) any { return rc.HealthzBindAddress }, ""},
		{[]string{"--metrics-bind-address", "0.0.0.0", "--metrics-port", "9100"}, func(_ *Options, rc RunConfig) any { return rc.MetricsBindAddress }, "0.0.0.0:9100"},
		{[]string{"--proxy-mode", "ipvs"}, func(o *Options, _ RunConfig) any { return string(o.Config.Mode) }, "ipvs"},
		{[]string{"--proxy-mode="}, func(o *Options, _ RunConfig) any { return string(o.Config.Mode) }, "ipvs"},
		{[]string{"--masquerade-all"}, func(_ *Options, rc RunConfig) any { return rc.Policy.MasqueradeAll }, true},
		{[]string{"--iptables-masquerade-bit", "9"}, func(_ *Options, rc RunConfig) any { return rc.DataPlane.MasqueradeBit }, 9},
		{[]string{"--cluster-cidr", "10.244.0.0/16,fd00:244::/48"}, func(_ *Options, rc RunConfig) any { return rc.DataPlane.ClusterCIDRs },
			[]netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:244::/48")}},
		{[]string{"--cluster-cidr", "10.244.1.0/16"}, func(_ *Options, rc RunConfig) any { return rc.Policy.ClusterCIDRs }, []string{"10.244.1.0/16"}},
		{[]string{"--nodeport-addresses", "10.0.0.0/8,fd00::/8"}, func(_ *Options, rc RunConfig) any { return rc.Policy.NodePortAddresses }, []string{"10.0.0.0/8", "fd00::/8"}},
		{[]string{"--nodeport-addresses", "primary"}, func(_ *Options, rc RunConfig) any { return rc.Policy.NodePortAddresses }, []string{"primary"}},
		{[]string{"--ipvs-scheduler", "wlc"}, func(_ *Options, rc RunConfig) any { return rc.Policy.Scheduler }, "wlc"},
		{[]string{"--refuse-node-address-external-ips"}, func(_ *Options, rc RunConfig) any { return rc.Policy.RefuseNodeAddresses }, true},
		{nil, func(_ *Options, rc RunConfig) any { return rc.Policy.RefuseNodeAddresses }, false},
		{[]string{"--max-virtual-servers-per-service", "50"}, func(_ *Options, rc RunConfig) any { return rc.Policy.MaxVirtualServers }, 50},
		{nil, func(_ *Options, rc RunConfig) any { return rc.Policy.MaxVirtualServers }, 10000},
		{[]string{"--max-virtual-servers-per-node", "200000"}, func(_ *Options, rc RunConfig) any { return rc.Policy.MaxVirtualServersPerNode }, 200000},
		{[]string{"--ipvs-sync-period", "2h22m"}, func(_ *Options, rc RunConfig) any { return rc.SyncPeriod }, 2*time.Hour + 22*time.Minute},
		{[]string{"--ipvs-min-sync-period", "0"}, func(_ *Options, rc RunConfig) any { return rc.MinSyncPeriod }, time.Duration(0)},
		{[]string{"--ipvs-strict-arp"}, func(_ *Options, rc RunConfig) any { return rc.DataPlane.StrictARP }, true},
		{[]string{"--ipvs-tcp-timeout", "15m"}, func(_ *Options, rc RunConfig) any { return rc.DataPlane.TCPTimeout }, 15 * time.Minute},
		{[]string{"--ipvs-tcpfin-timeout", "30s"}, func(_ *Options, rc RunConfig) any { return rc.DataPlane.TCPFinTimeout }, 30 * time.Second},
		{[]string{"--ipvs-udp-timeout", "5s"}, func(_ *Options, rc RunConfig) any { return rc.DataPlane.UDPTimeout }, 5 * time.Second},
		{[]string{"--ipvs-exclude-cidrs", "192.168.1.5/24", "--ipvs-exclude-cidrs", "fd00::/64"}, func(_ *Options, rc RunConfig) any { return rc.DataPlane.ExcludeCIDRs },
			[]netip.Prefix{netip.MustParsePrefix("192.168.1.0/24"), netip.MustParsePrefix("fd00::/64")}},
		{[]string{"--config-sync-period", "1m"}, func(_ *Options, rc RunConfig) any { return rc.ConfigSyncPeriod }, time.Minute},
		{[]string{"--feature-gates", "AllowServiceExternalIPs=true,WinDSR=false"}, func(_ *Options, rc RunConfig) any { return rc.FeatureGates },
			map[string]bool{"AllowServiceExternalIPs": true, "WinDSR": false}},
		{[]string{"-v", "4"}, func(o *Options, _ RunConfig) any { return uint32(o.Config.Logging.Verbosity) }, uint32(4)},
		{[]string{"--v=3", "--vmodule", "proxier*=6"}, func(o *Options, _ RunConfig) any { return []VModuleItem(o.Config.Logging.VModule) },
			[]VModuleItem{{FilePattern: "proxier*", Verbosity: 6}}},
		{[]string{"--ipvs_sync_period", "40s"}, func(_ *Options, rc RunConfig) any { return rc.SyncPeriod }, 40 * time.Second},
		{[]string{"--service-proxy-name", "mine"}, func(_ *Options, rc RunConfig) any { return rc.ServiceProxyName }, "mine"},
		{[]string{"--ipvs-interface", "kipvs1"}, func(_ *Options, rc RunConfig) any { return rc.DataPlane.Interface }, "kipvs1"},
		{[]string{"--ipvs-graceful-period", "1m"}, func(_ *Options, rc RunConfig) any { return rc.DataPlane.GracefulPeriod }, time.Minute},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			o, out := mustParse(t, tc.args...)
			if strings.Contains(out, "ignoring") {
				t.Errorf("a used flag printed a notice: %s", out)
			}
			if diff := cmp.Diff(tc.want, tc.got(o, o.RunConfig()), cmpOpts); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestIgnoredFlags: each flag meaningful only to other modes parses with
// its kube-proxy value type and prints exactly one notice.
func TestIgnoredFlags(t *testing.T) {
	tests := []struct {
		args   []string
		notice string // "" means no notice: the value is what we implement
	}{
		{[]string{"--iptables-sync-period", "30s"}, "ignoring --iptables-sync-period: not used in ipvs mode"},
		{[]string{"--iptables-min-sync-period=5s"}, "ignoring --iptables-min-sync-period: not used in ipvs mode"},
		{[]string{"--iptables-localhost-nodeports=false"}, "ignoring --iptables-localhost-nodeports: not used in ipvs mode"},
		{[]string{"--detect-local-mode", "NodeCIDR"}, ""},
		{[]string{"--detect-local-mode", "BridgeInterface", "--pod-bridge-interface", "cbr0"}, ""},
		{[]string{"--detect-local-mode", "InterfaceNamePrefix", "--pod-interface-name-prefix", "veth"}, ""},
		{[]string{"--detect-local-mode", "ClusterCIDR"}, ""},
		{[]string{"--pod-bridge-interface", "cbr0"}, ""},
		{[]string{"--pod-interface-name-prefix", "veth"}, ""},
		{[]string{"--conntrack-max-per-core", "0"}, ""},
		{[]string{"--conntrack-min", "131072"}, ""},
		{[]string{"--conntrack-tcp-timeout-established", "24h"}, ""},
		{[]string{"--conntrack-tcp-timeout-close-wait", "1h"}, ""},
		{[]string{"--conntrack-tcp-be-liberal"}, ""},
		{[]string{"--conntrack-udp-timeout", "30s"}, ""},
		{[]string{"--conntrack-udp-timeout-stream", "2m"}, ""},
		{[]string{"--oom-score-adj", "-999"}, ""},
		{[]string{"--show-hidden-metrics-for-version", "1.35"}, "ignoring --show-hidden-metrics-for-version: no metrics are hidden"},
		{[]string{"--logging-format", "json"}, ""},
		{[]string{"--logging-format", "yaml"}, "ignoring --logging-format: only text and json logging are implemented"},
		{[]string{"--logging-format", "text"}, ""},
		{[]string{"--log-flush-frequency", "10s"}, "ignoring --log-flush-frequency: logs are written unbuffered"},
		{[]string{"--log-text-split-stream"}, "ignoring --log-text-split-stream: " + notSupported},
		{[]string{"--log-text-info-buffer-size", "2Ki"}, "ignoring --log-text-info-buffer-size: " + notSupported},
		{[]string{"--log-json-split-stream"}, "ignoring --log-json-split-stream: " + notSupported},
		{[]string{"--log-json-info-buffer-size", "1M"}, "ignoring --log-json-info-buffer-size: " + notSupported},
		{[]string{"--boot-id-file", "/x"}, "ignoring --boot-id-file: not used by kube-ipvs-proxy"},
		{[]string{"--machine_id_file", "/y"}, "ignoring --machine-id-file: not used by kube-ipvs-proxy"},
		{[]string{"--windows-service"}, "ignoring --windows-service: Windows only"},
		{[]string{"--source-vip", "10.0.0.1"}, "ignoring --source-vip: Windows only"},
		{[]string{"--network-name", "l2"}, "ignoring --network-name: Windows only"},
		{[]string{"--enable-dsr"}, "ignoring --enable-dsr: Windows only"},
		{[]string{"--root-hnsendpoint-name", "x"}, "ignoring --root-hnsendpoint-name: Windows only"},
		{[]string{"--forward-healthcheck-vip"}, "ignoring --forward-healthcheck-vip: Windows only"},
		{[]string{"--proxy-port-range", "30000-32767"}, "ignoring --proxy-port-range: removed from kube-proxy"},
		{[]string{"--udp-timeout", "250ms"}, "ignoring --udp-timeout: removed from kube-proxy"},
	}
	var all []string
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, out := mustParse(t, append(tc.args, "--hostname-override", "n")...)
			want := ""
			if tc.notice != "" {
				want = tc.notice + "\n"
			}
			if out != want {
				t.Errorf("stderr %q, want %q", out, want)
			}
		})
		if tc.notice != "" {
			all = append(all, tc.args...)
		}
	}
	t.Run("all at once, one notice each", func(t *testing.T) {
		_, out := mustParse(t, append(all, "--hostname-override", "n")...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if ignored := len(slices.DeleteFunc(slices.Clone(tests), func(tc struct {
			args   []string
			notice string
		}) bool {
			return tc.notice == ""
		})); len(lines) != ignored {
			t.Errorf("%d notices for %d ignored flags:\n%s", len(lines), ignored, out)
		}
	})
}

func TestProxyMode(t *testing.T) {
	dir := t.TempDir()
	iptablesFile := writeFile(t, dir, "iptables.yaml", "apiVersion: "+ConfigAPIVersion+"\nkind: "+ConfigKind+"\nmode: iptables\n")
	tests := []struct {
		name string
		args []string
		want string // error substring; "" means valid
	}{
		{"ipvs", []string{"--proxy-mode", "ipvs"}, ""},
		{"empty means ipvs", []string{"--proxy-mode", ""}, ""},
		{"iptables is refused, naming it", []string{"--proxy-mode", "iptables"}, `--proxy-mode "iptables": kube-ipvs-proxy only implements the ipvs proxy mode`},
		{"nftables is refused", []string{"--proxy-mode=nftables"}, `--proxy-mode "nftables": kube-ipvs-proxy only implements the ipvs`},
		{"the file's mode is refused naming the file", []string{"--config", iptablesFile}, iptablesFile + `: mode: "iptables": kube-ipvs-proxy only implements the ipvs`},
		{"a bad flag mode is refused even with --config", []string{"--config", filepath.Join("testdata", "kubeadm-config.conf"), "--proxy-mode", "kernelspace"}, `--proxy-mode "kernelspace"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, _, err := parse(t, append(tc.args, "--hostname-override", "n")...)
			if err == nil {
				err = o.Validate()
			}
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// TestDefaults: with no flags, the values are kube-proxy v1.36's flag
// defaults (in ipvs mode).
func TestDefaults(t *testing.T) {
	o, out := mustParse(t)
	if out != "" {
		t.Errorf("stderr %q", out)
	}
	rc := o.RunConfig()
	checks := []struct {
		name      string
		got, want any
	}{
		{"ipvs-sync-period", rc.SyncPeriod, 30 * time.Second},
		{"ipvs-min-sync-period", rc.MinSyncPeriod, time.Second},
		{"config-sync-period", rc.ConfigSyncPeriod, 15 * time.Minute},
		{"healthz-bind-address", rc.HealthzBindAddress, "0.0.0.0:10256"},
		{"metrics-bind-address", rc.MetricsBindAddress, "127.0.0.1:10249"},
		{"bind-address", rc.BindAddress, netip.MustParseAddr("0.0.0.0")},
		{"kube-api-qps", rc.Client.QPS, float32(5)},
		{"kube-api-burst", rc.Client.Burst, 10},
		{"kube-api-content-type", rc.Client.ContentType, "application/vnd.kubernetes.protobuf"},
		{"iptables-masquerade-bit", rc.DataPlane.MasqueradeBit, 14},
		{"ipvs-scheduler (empty: rr)", rc.Policy.Scheduler, ""},
		{"masquerade-all", rc.Policy.MasqueradeAll, false},
		{"ipvs-strict-arp", rc.DataPlane.StrictARP, false},
		{"ipvs timeouts", []time.Duration{rc.DataPlane.TCPTimeout, rc.DataPlane.TCPFinTimeout, rc.DataPlane.UDPTimeout}, []time.Duration{0, 0, 0}},
		{"ipvs-graceful-period", rc.DataPlane.GracefulPeriod, 15 * time.Minute},
		{"ipvs-interface", rc.DataPlane.Interface, "kube-ipvs0"},
		{"mode", string(o.Config.Mode), "ipvs"},
		{"oom-score-adj", *o.Config.OOMScoreAdj, int32(-999)},
		{"conntrack-max-per-core", *o.Config.Conntrack.MaxPerCore, int32(32768)},
		{"conntrack-min", *o.Config.Conntrack.Min, int32(131072)},
		{"conntrack-tcp-timeout-established", o.Config.Conntrack.TCPEstablishedTimeout.Duration, 24 * time.Hour},
		{"conntrack-tcp-timeout-close-wait", o.Config.Conntrack.TCPCloseWaitTimeout.Duration, time.Hour},
		{"iptables-sync-period", o.Config.IPTables.SyncPeriod.Duration, 30 * time.Second},
		{"iptables-min-sync-period", o.Config.IPTables.MinSyncPeriod.Duration, time.Second},
		{"log-flush-frequency", o.Config.Logging.FlushFrequency.Duration.Duration, 5 * time.Second},
		{"logging-format", o.Config.Logging.Format, "text"},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, c.got, cmpOpts); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if o.NodeName == "" {
		t.Error("NodeName not set from the host name")
	}
}

// TestValidateCollectsErrors: every problem is reported at once, each
// naming its flag.
func TestValidateCollectsErrors(t *testing.T) {
	o, _, err := parse(t, "--ipvs-sync-period", "0", "--ipvs-min-sync-period", "-1s", "--ipvs-scheduler", "Fast",
		"--ipvs-exclude-cidrs", "10.0.0.0/33", "--cluster-cidr", "10.0.0.0/8,10.1.0.0/16", "--nodeport-addresses", "primary,10.0.0.0/8",
		"--bind-address", "host", "--healthz-bind-address", "1.2.3.4:99999", "--metrics-bind-address", "[::1]",
		"--iptables-masquerade-bit", "32", "--kube-api-burst", "-1", "--config-sync-period", "0", "--ipvs-tcp-timeout", "-1s",
		"--output", "yaml", "--ipvs-interface", "", "--hostname-override", " ", "--max-virtual-servers-per-service", "-1", "--max-virtual-servers-per-node", "-5",
		"--oom-score-adj", "1001")
	if err != nil {
		t.Fatal(err)
	}
	err = o.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		"--ipvs-sync-period: must be greater than 0",
		"--ipvs-min-sync-period: must be greater than or equal to 0",
		`--ipvs-scheduler: "Fast" is not an IPVS scheduler name`,
		`--ipvs-exclude-cidrs: invalid CIDR "10.0.0.0/33"`,
		"--cluster-cidr: invalid cluster CIDR list",
		`--nodeport-addresses: "primary" cannot be combined with CIDRs`,
		`--bind-address: "host" is not an IP address`,
		"--healthz-bind-address: \"1.2.3.4:99999\": port must be 1-65535",
		`--metrics-bind-address: "[::1]" is not IP:port`,
		"--iptables-masquerade-bit: must be within the range [0, 31]",
		"--oom-score-adj: must be within the range [-1000, 1000], got 1001",
		"--kube-api-burst: must be greater than or equal to 0",
		"--config-sync-period: must be greater than 0",
		"--ipvs-tcp-timeout: must be greater than or equal to 0",
		"--output must be json or text",
		"--ipvs-interface must not be empty",
		"--hostname-override: must not be blank",
		"--max-virtual-servers-per-service must not be negative",
		"--max-virtual-servers-per-node must not be negative",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("error:\n%v", err)
	}
}

func TestMinSyncAboveSync(t *testing.T) {
	o, _, _ := parse(t, "--ipvs-sync-period", "5s", "--ipvs-min-sync-period", "10s", "--hostname-override", "n")
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--ipvs-min-sync-period: 10s is greater than the sync period 5s") {
		t.Errorf("error %v", err)
	}
}

// TestFeatureGates: as kube-proxy, a gate locked to its default and set
// to the other value refuses the start, naming it; so does a gate
// kube-proxy acts on that we do not implement. A gate we implement or
// that changes nothing on a Linux IPVS proxy is quiet; a gate we do not
// know is a warning.
func TestFeatureGates(t *testing.T) {
	for _, tc := range []struct {
		name, gates string
		wantErr     string // substring of Validate's error; "" means none
		wantStderr  string
	}{
		{name: "AllowServiceExternalIPs is implemented both ways", gates: "AllowServiceExternalIPs=false"},
		{name: "Windows and logging gates change nothing here", gates: "WinDSR=true,WinOverlay=false,ContextualLogging=false,LoggingAlphaOptions=true"},
		{name: "client-go's gates are client-go's", gates: "WatchListClient=false,ClientsPreferCBOR=true,InOrderInformersBatchProcess=true"},
		{name: "a locked gate at its default is quiet", gates: "PreferSameTrafficDistribution=true,MultiCIDRServiceAllocator=true,InOrderInformers=true"},
		{name: "a gate kube-proxy locks refuses its other value", gates: "PreferSameTrafficDistribution=false",
			wantErr: "--feature-gates: feature gate PreferSameTrafficDistribution=false: locked to true in kube-proxy v1.36"},
		{name: "MultiCIDRServiceAllocator too", gates: "MultiCIDRServiceAllocator=false",
			wantErr: "--feature-gates: feature gate MultiCIDRServiceAllocator=false: locked to true"},
		{name: "a gate client-go locks refuses its other value", gates: "InOrderInformers=false",
			wantErr: "--feature-gates: feature gate InOrderInformers=false: client-go locks it to true"},
		{name: "a gate kube-proxy acts on that we do not implement refuses the start", gates: "ComponentStatusz=true",
			wantErr: "--feature-gates: feature gate ComponentStatusz=true: kube-proxy serves /statusz with it; kube-ipvs-proxy does not"},
		{name: "its off value is kube-proxy's behaviour too", gates: "ComponentStatusz=false,ComponentFlagz=false,NativeHistograms=false"},
		{name: "an unknown gate is a warning", gates: "NoSuchGate=true",
			wantStderr: "warning: feature gate NoSuchGate: unknown to kube-ipvs-proxy; ignored\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, out, err := parse(t, "--feature-gates", tc.gates, "--hostname-override", "n")
			if err != nil {
				t.Fatal(err)
			}
			if out != tc.wantStderr {
				t.Errorf("stderr %q, want %q", out, tc.wantStderr)
			}
			err = o.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Validate: %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Validate: %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
	if _, _, err := parse(t, "--feature-gates", "Foo"); err == nil || !strings.Contains(err.Error(), `malformed pair "Foo"`) {
		t.Errorf("error %v", err)
	}
}

func TestRunModes(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"the real mode with an unreadable kubeconfig fails before touching the kernel", []string{"--proxy-mode", "ipvs", "--kubeconfig", "/nonexistent/kubeconfig"}, ExitError, "", "api client: stat /nonexistent/kubeconfig"},
		{"--dry-run without --objects watches, and fails clearly without an API server", []string{"--dry-run", "--kubeconfig", "/nonexistent/kubeconfig"}, ExitError, "", "api client: stat /nonexistent/kubeconfig"},
		{"--version prints and exits 0", []string{"--version"}, ExitOK, "kube-ipvs-proxy ", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := run(t, append(tc.args, "--hostname-override", "n")...)
			if code != tc.wantCode || !strings.Contains(out, tc.wantStdout) || !strings.Contains(errOut, tc.wantStderr) {
				t.Errorf("exit %d stdout %q stderr %q", code, out, errOut)
			}
		})
	}
}

// TestValidateIPVSInterface: --ipvs-interface must be a usable interface
// name, and not lo (the writer also refuses, at run time, any existing
// link that is not a dummy interface).
func TestValidateIPVSInterface(t *testing.T) {
	for _, tc := range []struct {
		name, want string // want: an error substring; "" for valid
	}{
		{"kube-ipvs0", ""},
		{"kipvs1", ""},
		{"lo", "not lo"},
		{"a-name-far-too-long", "not a valid interface name"},
		{"eth0/1", "not a valid interface name"},
		{"..", "not a valid interface name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, _, err := parse(t, "--ipvs-interface", tc.name, "--hostname-override", "node-a")
			if err != nil {
				t.Fatal(err)
			}
			err = o.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate: %v, want %q", err, tc.want)
			}
		})
	}
}

// TestIPVSSchedulerTakesAnyKernelSchedulerName: as kube-proxy,
// --ipvs-scheduler takes any scheduler the kernel may have ("twos",
// "none", one newer than the proxy), which the start checks against the
// kernel; only what cannot name one is refused here. The data plane is
// handed the name to check.
func TestIPVSSchedulerTakesAnyKernelSchedulerName(t *testing.T) {
	tests := []struct {
		scheduler string
		wantErr   string
	}{
		{"rr", ""}, {"mh", ""}, {"twos", ""}, {"none", ""}, {"some_new2", ""},
		{"Fast", `"Fast" is not an IPVS scheduler name`},
		{"round robin", `"round robin" is not an IPVS scheduler name`},
		{"abcdefghijklmnop", `"abcdefghijklmnop" is not an IPVS scheduler name`},
	}
	for _, tc := range tests {
		t.Run(tc.scheduler, func(t *testing.T) {
			o, _, err := parse(t, "--hostname-override", "n", "--ipvs-scheduler", tc.scheduler)
			if err == nil {
				err = o.Validate()
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rc := o.RunConfig(); rc.DataPlane.Scheduler != tc.scheduler || rc.Policy.Scheduler != tc.scheduler {
				t.Errorf("scheduler to the data plane %q and the policy %q, want %q", rc.DataPlane.Scheduler, rc.Policy.Scheduler, tc.scheduler)
			}
		})
	}
}

// TestHelpOpensWithTheModes: --help and `kube-ipvs-proxy help` print the
// synopsis of the modes, then the flags, and ask main to exit 0.
func TestHelpOpensWithTheModes(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		var out bytes.Buffer
		_, err := ParseFlags(args, &out)
		if !errors.Is(err, pflag.ErrHelp) {
			t.Errorf("%v: error %v, want pflag.ErrHelp", args, err)
		}
		for _, want := range []string{"--dry-run --objects PATH", "--preflight --kubeconfig", "--init-only", "--cleanup-table-only", "Flags:\n", "--hostname-override"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%v: help lacks %q", args, want)
			}
		}
	}
}
