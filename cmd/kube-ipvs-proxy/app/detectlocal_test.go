package app

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDetectLocalModes: each of kube-proxy's four modes reaches the
// engine and the data plane, and kube-proxy's validation holds: a known
// mode, and the bridge or prefix its mode reads not empty, the error
// naming the flag, or the file and field.
func TestDetectLocalModes(t *testing.T) {
	dir := t.TempDir()
	file := func(body string) string {
		return writeFile(t, dir, strings.ReplaceAll(t.Name(), "/", "_")+".yaml", typeMeta+body)
	}
	type result struct {
		PodInterface     string
		Prefix           bool
		LocalByInterface bool
		ClusterCIDRs     int // the data plane's
	}
	for _, tc := range []struct {
		name    string
		args    func() []string
		want    result
		wantErr string
	}{
		{name: "ClusterCIDR detects by address",
			args: func() []string { return []string{"--cluster-cidr", "10.244.0.0/16"} },
			want: result{ClusterCIDRs: 1}},
		{name: "BridgeInterface detects by the bridge, in both families",
			args: func() []string {
				return []string{"--detect-local-mode", "BridgeInterface", "--pod-bridge-interface", "cbr0", "--cluster-cidr", "10.244.0.0/16"}
			},
			want: result{PodInterface: "cbr0", LocalByInterface: true, ClusterCIDRs: 1}},
		{name: "InterfaceNamePrefix detects by the prefix, without a cluster CIDR",
			args: func() []string {
				return []string{"--detect-local-mode", "InterfaceNamePrefix", "--pod-interface-name-prefix", "veth"}
			},
			want: result{PodInterface: "veth", Prefix: true, LocalByInterface: true}},
		{name: "a bridge name without BridgeInterface is not read",
			args: func() []string {
				return []string{"--pod-bridge-interface", "cbr0", "--pod-interface-name-prefix", "veth"}
			}},
		{name: "the file's BridgeInterface",
			args: func() []string {
				return []string{"--config", file("detectLocalMode: BridgeInterface\ndetectLocal: {bridgeInterface: br-pods}\n")}
			},
			want: result{PodInterface: "br-pods", LocalByInterface: true}},
		{name: "BridgeInterface without a bridge is refused, naming the flag",
			args:    func() []string { return []string{"--detect-local-mode", "BridgeInterface"} },
			wantErr: "--pod-bridge-interface: must not be empty with detectLocalMode BridgeInterface"},
		{name: "InterfaceNamePrefix without a prefix is refused, naming the flag",
			args: func() []string {
				return []string{"--detect-local-mode", "InterfaceNamePrefix", "--pod-bridge-interface", "cbr0"}
			},
			wantErr: "--pod-interface-name-prefix: must not be empty with detectLocalMode InterfaceNamePrefix"},
		{name: "the file's empty prefix is refused, naming the file and field",
			args: func() []string {
				return []string{"--config", file("detectLocalMode: InterfaceNamePrefix\ndetectLocal: {bridgeInterface: cbr0}\n")}
			},
			wantErr: ": detectLocal.interfaceNamePrefix: must not be empty with detectLocalMode InterfaceNamePrefix"},
		{name: "a bridge name no interface can have is refused",
			args: func() []string {
				return []string{"--detect-local-mode", "BridgeInterface", "--pod-bridge-interface", "a-bridge-too-long"}
			},
			wantErr: `--pod-bridge-interface: "a-bridge-too-long" is longer than 15 bytes`},
		{name: "an unknown mode is refused, as kube-proxy",
			args:    func() []string { return []string{"--detect-local-mode", "Bridge"} },
			wantErr: `--detect-local-mode: unsupported value "Bridge", want one of ClusterCIDR, NodeCIDR, BridgeInterface, InterfaceNamePrefix or empty`},
		{name: "the file's unknown mode is refused, naming the field",
			args:    func() []string { return []string{"--config", file("detectLocalMode: Interface\n")} },
			wantErr: `: detectLocalMode: unsupported value "Interface"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, _, err := parse(t, append(tc.args(), "--hostname-override", "node-a")...)
			if err != nil {
				t.Fatal(err)
			}
			err = o.Validate()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Validate() = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Validate: %v", err)
			}
			rc := o.RunConfig()
			got := result{PodInterface: rc.DataPlane.PodInterface, Prefix: rc.DataPlane.PodInterfacePrefix,
				LocalByInterface: rc.Policy.LocalByInterface, ClusterCIDRs: len(rc.DataPlane.ClusterCIDRs)}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if n := o.nftConfig(); n.PodInterface != got.PodInterface || n.PodInterfacePrefix != got.Prefix {
				t.Errorf("--dry-run's table config %+v, the data plane's %+v", n, rc.DataPlane)
			}
		})
	}
}
