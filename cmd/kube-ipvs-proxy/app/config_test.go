package app

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/conntrack"
)

var (
	kubeadmConfig = filepath.Join("testdata", "kubeadm-config.conf")
	tunedConfig   = filepath.Join("testdata", "tuned.json")
)

const typeMeta = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"

// kubeProxyConntrack are kube-proxy's conntrack defaults, which a file
// that sets none gets.
var kubeProxyConntrack = conntrack.Settings{MaxPerCore: 32 * 1024, Min: 128 * 1024,
	TCPEstablishedTimeout: 24 * time.Hour, TCPCloseWaitTimeout: time.Hour}

// TestKubeadmConfig: the file kubeadm writes (every field at its zero
// value, mode ipvs, strictARP) loads silently with kube-proxy's defaults,
// run the way kubeadm's DaemonSet runs kube-proxy.
func TestKubeadmConfig(t *testing.T) {
	o, out := mustParse(t, "--config="+kubeadmConfig, "--hostname-override=Worker-1")
	if out != "" {
		t.Errorf("stderr:\n%s", out)
	}
	want := RunConfig{
		NodeName:           "worker-1",
		SyncPeriod:         30 * time.Second,
		MinSyncPeriod:      0, // ipvs.minSyncPeriod has no default in v1alpha1
		ConfigSyncPeriod:   15 * time.Minute,
		BindAddress:        netip.MustParseAddr("0.0.0.0"),
		HealthzBindAddress: "0.0.0.0:10256",
		MetricsBindAddress: "127.0.0.1:10249",
		Client: ClientConfig{
			Kubeconfig: "/var/lib/kube-proxy/kubeconfig.conf", QPS: 5, Burst: 10,
			ContentType: "application/vnd.kubernetes.protobuf",
		},
		FeatureGates: map[string]bool{},
		OOMScoreAdj:  new(int32(-999)),
		Conntrack:    kubeProxyConntrack,
	}
	want.Policy.NodeName = "worker-1"
	want.Policy.BindAddress = netip.MustParseAddr("0.0.0.0")
	want.Policy.ClusterCIDRs = []string{"10.244.0.0/16"}
	want.Policy.MaxVirtualServers = DefaultMaxVirtualServersPerService
	want.DataPlane.Interface = "kube-ipvs0"
	want.DataPlane.ClusterCIDRs = []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}
	want.DataPlane.MasqueradeBit = 14
	want.DataPlane.GracefulPeriod = 15 * time.Minute
	want.DataPlane.StrictARP = true
	if diff := cmp.Diff(want, o.RunConfig(), cmpOpts); diff != "" {
		t.Errorf("RunConfig (-want +got):\n%s", diff)
	}
	if o.Config.Mode != ModeIPVS || *o.Config.Conntrack.MaxPerCore != 32768 || *o.Config.IPTables.LocalhostNodePorts != true {
		t.Errorf("defaults not applied: %+v", o.Config)
	}
}

// TestTunedJSONConfig: a JSON file setting every field we use.
func TestTunedJSONConfig(t *testing.T) {
	o, out := mustParse(t, "--config", tunedConfig, "--master", "https://api:6443")
	if out != "" {
		t.Errorf("stderr:\n%s", out)
	}
	rc := o.RunConfig()
	want := RunConfig{
		NodeName:   "worker-7",
		Policy:     RunConfig{}.Policy,
		DataPlane:  rc.DataPlane, // checked below
		SyncPeriod: time.Minute, MinSyncPeriod: 2 * time.Second, ConfigSyncPeriod: 5 * time.Minute,
		BindAddress: netip.MustParseAddr("10.0.0.7"), HealthzBindAddress: "10.0.0.7:10256",
		MetricsBindAddress: "0.0.0.0:9249", BindAddressHardFail: true,
		Client: ClientConfig{Kubeconfig: "/etc/kube-proxy/kubeconfig", Master: "https://api:6443", QPS: 50, Burst: 100,
			ContentType: "application/json", AcceptContentTypes: "application/json"},
		FeatureGates: map[string]bool{"AllowServiceExternalIPs": true},
		OOMScoreAdj:  new(int32(-999)),
		Conntrack:    kubeProxyConntrack,
	}
	want.Policy.NodeName, want.Policy.Scheduler, want.Policy.MasqueradeAll = "worker-7", "wlc", true
	want.Policy.BindAddress = netip.MustParseAddr("10.0.0.7")
	want.Policy.ClusterCIDRs = []string{"10.244.0.0/16", "fd00:244::/48"}
	want.Policy.NodePortAddresses = []string{"10.0.0.0/24", "fd00:10::/64"}
	want.Policy.MaxVirtualServers = DefaultMaxVirtualServersPerService
	if diff := cmp.Diff(want, rc, cmpOpts); diff != "" {
		t.Errorf("RunConfig (-want +got):\n%s", diff)
	}
	dp := rc.DataPlane
	if dp.MasqueradeBit != 12 || !dp.StrictARP || dp.TCPTimeout != 15*time.Minute || dp.TCPFinTimeout != 30*time.Second ||
		dp.UDPTimeout != 10*time.Second || len(dp.ExcludeCIDRs) != 2 || len(dp.ClusterCIDRs) != 2 {
		t.Errorf("DataPlane %+v", dp)
	}
	if o.Config.Logging.Verbosity != 4 || !klog.V(4).Enabled() || klog.V(5).Enabled() {
		t.Errorf("logging.verbosity 4 not applied to klog")
	}
}

// TestConfigPrecedence: as in kube-proxy v1.36 (Options.Complete), the
// file replaces kube-proxy's other flags, which are then ignored with a
// notice; --hostname-override, --master, -v and --vmodule still apply.
func TestConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	withName := writeFile(t, dir, "named.yaml", typeMeta+"hostnameOverride: From-File\nclusterCIDR: 10.1.0.0/16\nlogging: {verbosity: 3}\n")
	yamlLog := writeFile(t, dir, "yamllog.yaml", typeMeta+"detectLocalMode: InterfaceNamePrefix\ndetectLocal: {interfaceNamePrefix: veth}\nlogging: {format: yaml}\n")
	tests := []struct {
		name       string
		args       []string
		check      func(o *Options) any
		want       any
		wantStderr string
	}{
		{"the file's hostnameOverride is the node name", []string{"--config", withName},
			func(o *Options) any { return o.NodeName }, "from-file", ""},
		{"--hostname-override wins over the file", []string{"--config", withName, "--hostname-override", "From-Flag"},
			func(o *Options) any { return o.NodeName }, "from-flag", ""},
		{"a kube-proxy flag with --config is ignored with a notice", []string{"--config", withName, "--cluster-cidr", "10.2.0.0/16"},
			func(o *Options) any { return o.Config.ClusterCIDR }, "10.1.0.0/16",
			"ignoring --cluster-cidr: --config is given, and as in kube-proxy the file wins\n"},
		{"an ignored flag with --config gets one notice", []string{"--config", withName, "--iptables-sync-period", "1s"},
			func(o *Options) any { return o.Config.IPTables.SyncPeriod.Duration }, 30 * time.Second,
			"ignoring --iptables-sync-period: not used in ipvs mode\n"},
		{"--master applies with --config", []string{"--config", withName, "--master", "https://m"},
			func(o *Options) any { return o.RunConfig().Client.Master }, "https://m", ""},
		{"our own flags apply with --config", []string{"--config", withName, "--ipvs-graceful-period", "1m"},
			func(o *Options) any { return o.RunConfig().DataPlane.GracefulPeriod }, time.Minute, ""},
		{"the file's verbosity applies", []string{"--config", withName},
			func(o *Options) any { return klog.V(3).Enabled() && !klog.V(4).Enabled() }, true, ""},
		{"-v wins over the file", []string{"--config", withName, "-v", "6"},
			func(o *Options) any { return uint32(o.Config.Logging.Verbosity) }, uint32(6), ""},
		{"--vmodule goes before the file's", []string{"--config", tunedConfig, "--vmodule", "a=1"},
			func(o *Options) any { return []VModuleItem(o.Config.Logging.VModule) }, []VModuleItem{{FilePattern: "a", Verbosity: 1}, {FilePattern: "proxier*", Verbosity: 6}}, ""},
		{"unimplemented file values warn; detectLocalMode InterfaceNamePrefix is implemented", []string{"--config", yamlLog},
			func(o *Options) any { return o.RunConfig().DataPlane.PodInterface }, "veth",
			"warning: " + yamlLog + `: logging.format: "yaml" is not implemented, logging as text; ignored` + "\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, out := mustParse(t, tc.args...)
			if out != tc.wantStderr {
				t.Errorf("stderr %q, want %q", out, tc.wantStderr)
			}
			if diff := cmp.Diff(tc.want, tc.check(o)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestValidateNamesFileFields: values from --config are reported with
// the file and field, all at once.
func TestValidateNamesFileFields(t *testing.T) {
	path := writeFile(t, t.TempDir(), "c.yaml", typeMeta+
		"ipvs: {syncPeriod: -1s, scheduler: Fast!, excludeCIDRs: [x]}\nclusterCIDR: 10.0.0.0/40\nmetricsBindAddress: 1.2.3.4:0\n")
	o, _, err := parse(t, "--config", path)
	if err != nil {
		t.Fatal(err)
	}
	err = o.Validate()
	for _, want := range []string{
		path + ": ipvs.syncPeriod: must be greater than 0, got -1s",
		path + `: ipvs.scheduler: "Fast!" is not an IPVS scheduler name`,
		path + `: ipvs.excludeCIDRs[0]: invalid CIDR "x"`,
		path + `: clusterCIDR: invalid cluster CIDR "10.0.0.0/40"`,
		path + `: metricsBindAddress: "1.2.3.4:0": port must be 1-65535`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// TestConfigFileErrorsFailParse: a bad value in --config fails parsing,
// naming file and field; unknown fields are printed as warnings.
func TestConfigFileErrorsFailParse(t *testing.T) {
	dir := t.TempDir()
	bad := writeFile(t, dir, "bad.yaml", typeMeta+"ipvs: {syncPeriod: 30}\n")
	if _, _, err := parse(t, "--config", bad); err == nil || !strings.Contains(err.Error(), bad+": ipvs.syncPeriod: ") {
		t.Errorf("error %v", err)
	}
	unknown := writeFile(t, dir, "unknown.yaml", typeMeta+"foo: 1\n")
	if _, out, err := parse(t, "--config", unknown); err != nil || out != "warning: "+unknown+": foo: unknown field; ignored\n" {
		t.Errorf("error %v, stderr %q", err, out)
	}
	if _, _, err := parse(t, "--config", filepath.Join(dir, "missing.yaml")); err == nil || !strings.Contains(err.Error(), "--config: open ") {
		t.Errorf("error %v", err)
	}
}

// TestWriteConfigRoundTrip: --write-config-to writes the effective
// configuration, exits 0, and loading the file gives it back.
func TestWriteConfigRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"from flags", []string{"--ipvs-scheduler", "mh", "--cluster-cidr", "10.244.0.0/16", "--ipvs-exclude-cidrs", "10.9.0.0/16",
			"--masquerade-all", "--ipvs-min-sync-period", "0", "--conntrack-min", "0", "--feature-gates", "WinDSR=true",
			"-v", "2", "--vmodule", "x=3", "--hostname-override", "Node-9",
			"--max-virtual-servers-per-service", "7", "--ipvs-interface", "kipvs9", "--notrack-services", "a/b", "--ipvs-graceful-period", "2m"}},
		{"from the kubeadm file", []string{"--config", kubeadmConfig}},
		{"from the tuned JSON file", []string{"--config", tunedConfig, "-v", "5"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "written.yaml")
			o, _ := mustParse(t, append(tc.args, "--write-config-to", path)...)
			var stdout, stderr bytes.Buffer
			if code := Run(t.Context(), o, &stdout, &stderr); code != ExitOK || stdout.Len() != 0 {
				t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
			}
			got, warnings, err := LoadConfigFile(path)
			if err != nil || warnings != nil {
				t.Fatalf("load back: %v %v", err, warnings)
			}
			if diff := cmp.Diff(o.Config, got, cmpOpts); diff != "" {
				t.Errorf("loaded back (-written +loaded):\n%s", diff)
			}
			o2, _ := mustParse(t, "--config", path)
			if diff := cmp.Diff(o.RunConfig(), o2.RunConfig(), cmpOpts); diff != "" {
				t.Errorf("RunConfig differs (-flags +file):\n%s", diff)
			}
		})
	}
}

// TestDryRunWithConfig: --config feeds the dry run like the flags do.
func TestDryRunWithConfig(t *testing.T) {
	cfg := writeFile(t, t.TempDir(), "c.yaml", typeMeta+"clusterCIDR: "+exampleClusterCIDR+"\n")
	examples := filepath.Join("..", "..", "..", "examples")
	code, out, errOut := run(t, "--config", cfg, "--dry-run", "--objects", examples, "--hostname-override", "node-a")
	if code != ExitOK || errOut != "" {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	want, err := os.ReadFile(filepath.Join(examples, "plans", "node-a.json"))
	if err != nil {
		t.Fatal(err)
	}
	if out != string(want) {
		t.Error("the plan with --config differs from the golden plan made with --cluster-cidr")
	}
}
